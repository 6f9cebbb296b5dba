"""A run starts in the background in every configuration (issue 28, item 8): without a broker
(the embedded default, tasks run in-process) the POST answers at once with the run's page while
the run is still pending or running on the process's background thread, whose progress the page
polls. Proved by holding the run on an event the test sets only after the answer came back:
no timing. With a broker the same POST only queues the task (tests/dashboard/test_recommendations.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.dashboard.test_recommendations import WINDOW, record_sessions
from tests.e2e.conftest import wait_for
from toolscope.policies.models import Recommendation
from toolscope.policies.services import recommendations

REPO = Path(__file__).resolve().parents[2]
CONFIG_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL", "TOOLSCOPE_ENV")


class Held:
    """The recommendation's work, held until `release` is set: where and whether it began."""

    def __init__(self) -> None:
        self.entered, self.release, self.threads = threading.Event(), threading.Event(), []
        self.original = recommendations._compute

    def __call__(self, run: Recommendation) -> dict:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.release.wait(60), "the test never released the run"
        return self.original(run)


@pytest.mark.django_db(transaction=True)  # the background thread reads what the request committed
def test_without_a_broker_the_post_answers_with_the_runs_page_before_the_run_ends(settings, monkeypatch,
                                                                                   project, editor):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    record_sessions(project)
    held = Held()
    monkeypatch.setattr(recommendations, "_compute", held)
    client = Client()
    client.force_login(editor)

    response = client.post(reverse("dashboard:policy_recommendation_start", args=[project.slug]), WINDOW)
    run = Recommendation.objects.get(project=project)
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:policy_recommendation", args=[project.slug, run.pk])
    assert not held.release.is_set() and run.status in ("pending", "running")
    assert b"data-progress" in client.get(response["Location"]).content  # the page's progress bar

    assert held.entered.wait(30)  # it runs meanwhile, on the background thread, not the request's
    assert held.threads == ["toolscope-background"]
    status = reverse("dashboard:policy_recommendation_status", args=[project.slug, run.pk])
    assert client.get(status).json()["status"] == "running"
    held.release.set()
    wait_for(lambda: client.get(status).json()["status"] == "done", 60, "the run to end")
    run.refresh_from_db()
    assert run.result["recommended"] and run.headline["recommended"] == run.result["recommended"]
    assert run.created_by == editor


SQLITE_SCRIPT = """
import json, threading, time, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client
from django.urls import reverse
from tests import factories
from tests.dashboard.test_recommendations import WINDOW, record_sessions
from tests.dashboard.test_runs_background import Held
from toolscope.policies.models import Recommendation
from toolscope.policies.services import recommendations
from toolscope.telemetry.models import Role

project = factories.make_project("acme")
editor = factories.make_user("editor")
factories.make_member(project, editor, Role.EDITOR)
record_sessions(project)
held = recommendations._compute = Held()
client = Client()
client.force_login(editor)
response = client.post(reverse("dashboard:policy_recommendation_start", args=["acme"]), WINDOW)
run = Recommendation.objects.get()
answered = {"code": response.status_code, "status": run.status, "released": held.release.is_set()}
held.release.set()
status, pages = reverse("dashboard:policy_recommendation_status", args=["acme", run.pk]), []
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    # Pages read while the run writes its progress (WAL): every read answers.
    pages += [client.get(status).status_code, client.get(reverse("dashboard:policy_runs", args=["acme"])).status_code]
    if client.get(status).json()["status"] not in ("pending", "running"):
        break
    time.sleep(0.05)
run.refresh_from_db()
print(json.dumps({"answered": answered, "threads": held.threads, "pages": sorted(set(pages)), "reads": len(pages),
                  "final": run.status, "headline": run.headline}))
"""


def test_on_the_embedded_default_the_run_goes_on_in_the_background_while_pages_read(tmp_path):
    """SQLite and no broker, as `./scripts/demo` runs: a fresh interpreter with none of the test
    configuration."""
    env = {key: value for key, value in os.environ.items() if key not in CONFIG_VARIABLES}
    env.update(TOOLSCOPE_SQLITE_PATH=str(tmp_path / "toolscope.sqlite3"), DJANGO_SETTINGS_MODULE="toolscope.settings",
               ALLOWED_HOSTS="testserver")
    done = subprocess.run([sys.executable, "-c", SQLITE_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["answered"] == {"code": 302, "status": result["answered"]["status"], "released": False}
    assert result["answered"]["status"] in ("pending", "running")
    assert result["threads"] == ["toolscope-background"]
    assert result["pages"] == [200] and result["final"] == "done" and result["headline"]["recommended"]
