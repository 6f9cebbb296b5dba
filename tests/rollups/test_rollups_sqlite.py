"""The embedded default: the same rollups on SQLite, duration sketches merged with json_each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolscope.telemetry.sketches import RELATIVE_ACCURACY

REPO = Path(__file__).resolve().parents[2]
CONFIG_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL", "TOOLSCOPE_ENV")
SCRIPT = """
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests import factories
from tests.rollups.dataset import H0, build_dataset
from datetime import timedelta
from toolscope.telemetry.models import ProjectHourly, ToolHourly
from toolscope.telemetry.selectors import duration_quantiles
from toolscope.telemetry.services.rollups import dirty_hours_mark, rollups_refresh
project = factories.make_project("acme")
build_dataset(project)
dirty_hours_mark(project_id=project.pk, timestamps=[H0])
refreshed = rollups_refresh()
tools = {row.pop("tool_name"): row for row in ToolHourly.objects.filter(hour=H0).values(
    "tool_name", "calls", "errors", "duration_p50_ms", "duration_p95_ms", "times_advertised", "times_called",
    "schema_tokens", "compaction_savings")}
merged = duration_quantiles(project_id=project.pk, start=H0 - timedelta(hours=1), end=H0 + timedelta(hours=2))
print(json.dumps({"refreshed": refreshed, "tools": tools, "turns": ProjectHourly.objects.get(hour=H0).turns,
                  "merged": merged}))
"""


def _run_on_sqlite(script: str, tmp_path) -> dict:
    """`script` in a fresh interpreter on the embedded default (SQLite, no broker): its last line's JSON."""
    env = {key: value for key, value in os.environ.items() if key not in CONFIG_VARIABLES}
    env.update(TOOLSCOPE_SQLITE_PATH=str(tmp_path / "toolscope.sqlite3"), DJANGO_SETTINGS_MODULE="toolscope.settings")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_rollups_on_sqlite_match_the_hand_computed_numbers(tmp_path):
    result = _run_on_sqlite(SCRIPT, tmp_path)
    read_file, bash = result["tools"]["read_file"], result["tools"]["bash"]
    assert (result["refreshed"], result["turns"]) == (1, 3)
    assert (read_file["calls"], read_file["errors"], read_file["compaction_savings"]) == (4, 1, 800)
    # 10, 20, 30 and 40 ms: the sketch reads ranks floor(q * 3), 20 and 30 ms, within 1%.
    p50, p95 = pytest.approx(20, rel=RELATIVE_ACCURACY), pytest.approx(30, rel=RELATIVE_ACCURACY)
    assert (read_file["duration_p50_ms"], read_file["duration_p95_ms"]) == (p50, p95)
    assert result["merged"]["read_file"] == [p50, p95]  # the hours' bins added by SQLite's json_each
    assert (read_file["times_advertised"], read_file["times_called"], read_file["schema_tokens"]) == (3, 1, 360)
    assert (bash["times_called"], result["tools"]["grep"]["calls"]) == (2, 0)


DELTAS_SCRIPT = """
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests import factories
from tests.rollups.test_hourly_deltas import process, random_batches, rebuilt, rollups
from toolscope.policies.models import CompactionRule, Policy
from toolscope.telemetry.services.rollups import rollups_refresh
project = factories.make_project("acme")
policy = Policy.objects.create(project=project)
CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=40, strategy="head_tail")
for events in random_batches(3, 8):
    process(project, events)
rollups_refresh()
kept = rollups()
print(json.dumps({"rows": len(kept[0]), "equal": kept == rebuilt(project)}))
"""


def test_deltas_on_sqlite_equal_a_rebuild(tmp_path):
    result = _run_on_sqlite(DELTAS_SCRIPT, tmp_path)
    assert result["rows"] > 0
    assert result["equal"] is True
