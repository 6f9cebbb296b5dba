"""CSV exports: a header row naming the columns, then the same rows the page shows."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from tests import factories


def _csv(client, name, *args, **params):
    response = client.get(reverse(f"dashboard:{name}", args=args), params)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="acme_')
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.django_db
def test_tokens_csv_has_a_row_per_bucket(viewer_client, activity):
    rows = _csv(viewer_client, "tokens_csv", "acme", range="24h")
    assert rows[0] == ["bucket", "system_prompt_tokens", "schema_tokens", "message_tokens", "call_tokens",
                       "tool_output_tokens", "estimated_input_tokens", "provider_input_tokens", "unattributed_tokens"]
    assert len(rows) == 1 + 24
    # 3 sessions x 2 turns x the builder's budget.
    assert sum(int(row[2]) for row in rows[1:]) == 6 * 300
    assert sum(int(row[7]) for row in rows[1:]) == 6 * 1600
    assert sum(int(row[8]) for row in rows[1:]) == 6 * (1600 - 1500)  # provider minus estimate


@pytest.mark.django_db
def test_kpis_csv(viewer_client, activity):
    rows = _csv(viewer_client, "kpis_csv", "acme")
    assert rows[0] == ["key", "label", "unit", "current", "previous", "change_ratio", "change_points"]
    assert ["sessions", "Sessions", "count", "3", "0", "", ""] in rows
    assert ["tool_calls", "Tool calls", "count", "9", "0", "", ""] in rows


@pytest.mark.django_db
def test_dead_weight_and_top_tools_csv(viewer_client, activity):
    header = ["name", "calls", "errors", "schema_tokens", "times_advertised", "times_called"]
    dead = _csv(viewer_client, "dead_weight_csv", "acme")
    assert dead[0] == header
    assert [row[0] for row in dead[1:]] == ["bash", "grep"]
    top = _csv(viewer_client, "top_tools_csv", "acme")
    assert top[0] == header
    assert top[1][:3] == ["read_file", "9", "1"]


@pytest.mark.django_db
def test_sessions_csv_follows_the_filters_and_ignores_the_page(viewer_client, activity):
    rows = _csv(viewer_client, "sessions_csv", "acme", errors="yes", after="2000-01-01T00:00:00+00:00|1")
    assert rows[0][:3] == ["client_id", "agent_name", "model"]
    assert [row[0] for row in rows[1:]] == [activity.sessions[0].client_id]


@pytest.mark.django_db
def test_session_turns_and_calls_csv(viewer_client, activity):
    client_id = activity.sessions[0].client_id
    turns = _csv(viewer_client, "session_turns_csv", "acme", client_id)
    assert turns[0][:4] == ["index", "started_at", "model", "system_prompt_tokens"]
    assert [row[0] for row in turns[1:]] == ["0", "1"]
    calls = _csv(viewer_client, "session_calls_csv", "acme", client_id)
    assert calls[0][:5] == ["turn_index", "offset_s", "started_at", "tool_name", "status"]
    assert [(row[0], row[1], row[4]) for row in calls[1:]] == [("0", "1.0", "error"), ("0", "2.0", "ok"),
                                                                 ("1", "11.0", "ok")]


@pytest.mark.django_db
def test_tool_csvs(viewer_client, activity):
    series = _csv(viewer_client, "tool_calls_csv", "acme", "read_file", range="24h")
    assert series[0] == ["bucket", "calls", "errors", "output_tokens", "duplicates"]
    assert sum(int(row[1]) for row in series[1:]) == 9
    sample = _csv(viewer_client, "tool_sample_csv", "acme", "read_file")
    assert sample[0] == ["started_at", "status", "duration_ms", "output_tokens"]
    assert len(sample) == 1 + 9


@pytest.mark.django_db
def test_keys_csv_never_holds_a_secret(viewer_client, project):
    created = factories.make_key(project, name="agent")
    rows = _csv(viewer_client, "keys_csv", "acme")
    assert rows[0] == ["name", "prefix", "scopes", "created_at", "created_by", "last_used_at", "revoked_at"]
    assert rows[1][:3] == ["agent", f"ts_{created.api_key.prefix}_", "ingest policy:read"]
    assert created.secret not in str(rows)
    assert created.api_key.secret_hash not in str(rows)


@pytest.mark.django_db
def test_csv_links_carry_the_range_and_the_filters(viewer_client, activity):
    tools = viewer_client.get(reverse("dashboard:tools", args=["acme"]), {"show": "called"}).content.decode()
    assert "/p/acme/tools.csv?show=called&amp;range=7d" in tools
    sessions = viewer_client.get(reverse("dashboard:sessions", args=["acme"]),
                                 {"range": "30d", "errors": "yes", "after": "x|1"}).content.decode()
    assert "/p/acme/sessions.csv?range=30d&amp;errors=yes" in sessions


FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
            "\tTAB", "\rCR"]


@pytest.mark.django_db
@pytest.mark.parametrize("agent", FORMULAS)
def test_text_that_starts_like_a_formula_is_neutralised(viewer_client, project, agent):
    # The agent name is the agents' own string; a spreadsheet must show it, never run it.
    from tests.dashboard.builders import add_session, recent

    add_session(project, at=recent(), agent=agent)
    rows = _csv(viewer_client, "sessions_csv", "acme")
    assert rows[0][1] == "agent_name"
    assert rows[1][1] == "'" + agent


@pytest.mark.django_db
def test_text_that_merely_contains_a_formula_sign_is_kept(viewer_client, project):
    from tests.dashboard.builders import add_session, recent

    add_session(project, at=recent(), agent="coder=v2 -fast @team")
    assert _csv(viewer_client, "sessions_csv", "acme")[1][1] == "coder=v2 -fast @team"


def test_numbers_stay_numbers_negative_ones_too():
    from dashboard.views.common import _lines

    lines = list(_lines(["a", "b", "c", "d"], [[-3, -0.25, "-3", 7]]))
    assert lines[1] == "-3,-0.25,'-3,7\r\n"  # the string "-3" is an agent's text, not a number
