"""A session's page in dollars (issue 26, item 4): events posted over REST and processed by the
worker's service, then each request's $ checked against a reference worked out by hand from
Anthropic's published rules and Claude Sonnet 4.5's prices ($3 input, $15 output, $0.30 cache
read, $3.75 5-minute cache write per million tokens)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.api.conftest import KeyClient
from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch, ModelPrice, ProjectHourly, Turn
from toolscope.telemetry.services.costs import nanos
from toolscope.telemetry.services.processing import batch_process
from toolscope.telemetry.services.rollups import rollups_rebuild

TOOLS = [{"name": "read_file", "description": "Read a file from the workspace.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
         {"name": "edit_file", "description": "Replace text in a file.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                            "new": {"type": "string"}}}}]
MORE = [*TOOLS, {"name": "run_tests", "description": "Run the test suite and report failures.",
                 "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}}]
SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {n}: keep the change small and tested." for n in range(150))


def million(*terms: tuple[int, str]) -> Decimal:
    return sum((Decimal(tokens) * Decimal(price) for tokens, price in terms), Decimal(0)) / 1_000_000


def session_events(start):
    """A Claude session's events: its second request adds to the first's conversation, its third
    advertises one more tool (a cache break)."""

    def turn(index, seconds, tools, message, usage):
        return {"type": "turn", "id": f"t{index}", "session_id": "s1", "index": index, "model": "claude-sonnet-4-5",
                "timestamp": (start + timedelta(seconds=seconds)).isoformat(), "tools": tools,
                "system_prompt": SYSTEM, "messages": [{"role": "user", "content": message}], "usage": usage}

    return [{"type": "session", "id": "s1", "agent_name": "coder", "model": "claude-sonnet-4-5",
             "timestamp": start.isoformat()},
            # The provider reported this one's cache: billed as reported.
            turn(0, 0, TOOLS, "Fix the failing import in app.py",
                 {"input_tokens": 3000, "output_tokens": 100, "cached_tokens": 0, "cache_write_tokens": 2900}),
            # These report output only: billed as the cache model predicts.
            turn(1, 30, TOOLS, "Now run it again and tell me what changed in the output", {"output_tokens": 50}),
            turn(2, 60, MORE, "Run the tests", {"output_tokens": 20})]


def post(project, events):
    """Ingested over REST and processed by the worker's service."""
    response = KeyClient(make_key(project, scopes=["ingest"]).secret).post_json("/api/v1/ingest", {"events": events})
    assert response.status_code == 202 and response.json()["rejected"] == 0, response.json()
    for batch_id in IngestBatch.objects.filter(finished_at__isnull=True).values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


@pytest.fixture
def priced_session(project):
    post(project, session_events(timezone.now().replace(microsecond=0) - timedelta(hours=1)))
    return {turn.index: turn for turn in Turn.objects.filter(project=project).order_by("index")}


def expected(turns):
    """Each request's dollars from the rules: breakpoints on the system prompt and the last
    message; what the request before wrote is read within 5 minutes; a new tool list heads a new
    prefix, so everything is written again."""
    t0, t2 = turns[0], turns[2]
    history = {index: (t.message_tokens or 0) + (t.call_tokens or 0) + (t.tool_output_tokens or 0)
               for index, t in turns.items()}
    head = t0.schema_tokens + t0.system_prompt_tokens
    assert head >= 1024  # Sonnet 4.5 caches prefixes from 1,024 tokens
    first = million((3000 - 2900, "3"), (2900, "3.75"), (100, "15"))
    second = million((head + history[0], "0.30"), (history[1] - history[0], "3.75"), (50, "15"))
    third = million((t2.schema_tokens + t2.system_prompt_tokens + history[2], "3.75"), (20, "15"))
    return [first, second, third]


@pytest.mark.django_db(transaction=True)
def test_each_request_is_priced_as_the_providers_rules_bill_it(viewer_client, project, priced_session):
    response = viewer_client.get(reverse("dashboard:session", args=[project.slug, "s1"]))
    assert response.status_code == 200
    cost = response.context["cost"]
    want = expected(priced_session)
    shown = {turn["index"]: turn for turn in response.context["turns"]}
    assert [shown[index]["usd"] for index in range(3)] == want
    assert [round(value, 4) for value in want] == [Decimal("0.0127"), *(round(value, 4) for value in want[1:])]
    assert cost["total"] == sum(want)
    assert [shown[index]["billed_as"] for index in range(3)] == ["reported", "predicted", "predicted"]
    assert cost["breaks"] == [(2, "tools changed")]
    assert cost["sources"] == ["genai-prices 0.2.3"]
    # The one request that reported its cache is compared with what the model predicted.
    head = priced_session[0].schema_tokens + priced_session[0].system_prompt_tokens
    assert cost["agreement"].requests == 1 and cost["agreement"].reported_write == 2900
    assert cost["agreement"].predicted_write == head + priced_session[0].message_tokens
    body = response.content.decode()
    assert "1 cache break" in body and "turn 2</a> (tools changed)" in body and "$0.0127" in body


@pytest.mark.django_db(transaction=True)
def test_a_project_price_reprices_the_page_and_the_csv(viewer_client, project, priced_session):
    ModelPrice.objects.create(project=project, model="claude-sonnet-4-5", input_mtok=Decimal("1"),
                              output_mtok=Decimal("5"), cache_read_mtok=Decimal("0.1"),
                              cache_write_mtok=Decimal("1.25"), valid_from=timezone.now() - timedelta(days=1),
                              note="negotiated")
    response = viewer_client.get(reverse("dashboard:session", args=[project.slug, "s1"]))
    assert response.context["cost"]["sources"] == ["project price: negotiated"]
    assert response.context["turns"][0]["usd"] == million((100, "1"), (2900, "1.25"), (100, "5"))
    exported = viewer_client.get(reverse("dashboard:session_turns_csv", args=[project.slug, "s1"]))
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode()
                                           if exported.streaming else exported.content.decode())))
    assert [row["cache_break"] for row in rows] == ["", "", "tools changed"]
    assert Decimal(rows[0]["usd"]) == million((100, "1"), (2900, "1.25"), (100, "5"))
    assert rows[0]["billed_as"] == "reported" and rows[0]["price_source"] == "project price: negotiated"


@pytest.mark.django_db(transaction=True)
def test_an_unknown_model_is_shown_unpriced_not_free(viewer_client, project, priced_session):
    Turn.objects.filter(project=project).update(model="house-model-9")
    response = viewer_client.get(reverse("dashboard:session", args=[project.slug, "s1"]))
    assert response.context["cost"]["total"] is None and response.context["cost"]["unpriced"] == 3
    assert "3 unpriced" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_read_api_gives_the_same_dollars_as_decimal_strings(project, priced_session):
    reader = KeyClient(make_key(project, scopes=["read"]).secret)
    body = reader.get(reverse("api:session", args=["s1"])).json()
    want = expected(priced_session)
    assert [turn["usd"] for turn in body["turns"]] == [str(value) for value in want]
    assert [turn["billed_as"] for turn in body["turns"]] == ["reported", "predicted", "predicted"]
    assert body["cost"]["usd"] == str(sum(want)) and body["cost"]["upto_turn"] == 2
    assert body["cost"]["cache_breaks"] == [{"turn": 2, "reason": "tools changed"}]
    assert body["cost"]["agreement"]["requests"] == 1 and body["cost"]["agreement"]["reported_write"] == 2900


def rollup_rows(project):
    return sorted(ProjectHourly.objects.filter(project=project).values(
        "hour", "turns", "priced_turns", "cost_nanos", "schema_cost_nanos", "tool_output_cost_nanos", "cache_breaks"),
        key=lambda row: row["hour"])


@pytest.mark.django_db(transaction=True)
def test_each_requests_dollars_are_kept_on_its_row_and_rolled_up_by_the_hour(viewer_client, project, priced_session):
    want = [nanos(value) for value in expected(priced_session)]
    turns = list(Turn.objects.filter(project=project).order_by("index"))
    assert [turn.cost_nanos for turn in turns] == want
    page = viewer_client.get(reverse("dashboard:session", args=[project.slug, "s1"])).context["turns"]
    assert [turn.schema_cost_nanos for turn in turns] == [nanos(row["cost"].components["schema_tokens"])
                                                          for row in page]
    assert [turn.tool_output_cost_nanos for turn in turns] == [
        nanos(row["cost"].components["tool_output_tokens"]) for row in page]
    assert [turn.cache_break for turn in turns] == ["", "", "tools changed"]
    rows = rollup_rows(project)
    assert sum(row["cost_nanos"] for row in rows) == sum(want)
    assert sum(row["schema_cost_nanos"] for row in rows) == sum(turn.schema_cost_nanos for turn in turns)
    assert sum(row["priced_turns"] for row in rows) == 3 and sum(row["cache_breaks"] for row in rows) == 1
    # Rebuilding the hours from the raw rows gives what the deltas did.
    rollups_rebuild(project_id=project.pk, hours=[row["hour"] for row in rows])
    assert rollup_rows(project) == rows


@pytest.mark.django_db(transaction=True)
def test_a_request_arriving_late_reprices_the_ones_after_it(project):
    """The cache of a request depends on every request before it: the second arriving after the
    third gives the third the dollars it has when all arrive in order."""
    events = session_events(timezone.now().replace(microsecond=0) - timedelta(hours=1))
    post(project, [events[0], events[1], events[3]])
    alone = Turn.objects.get(project=project, index=2).cost_nanos
    post(project, [events[2]])
    turns = {turn.index: turn for turn in Turn.objects.filter(project=project)}
    assert [turns[index].cost_nanos for index in range(3)] == [nanos(value) for value in expected(turns)]
    assert turns[2].cost_nanos != alone
    assert sum(row["cost_nanos"] for row in rollup_rows(project)) == sum(turn.cost_nanos for turn in turns.values())


@pytest.mark.django_db(transaction=True)
def test_the_overview_shows_the_cost_a_months_projection_and_the_cache_breaks(viewer_client, project,
                                                                             priced_session):
    response = viewer_client.get(reverse("dashboard:overview", args=[project.slug]), {"range": "24h"})
    kpis = {kpi.key: kpi for kpi in response.context["kpis"]}
    total = sum(Decimal(nanos(value)) for value in expected(priced_session)) / 1_000_000_000
    assert kpis["cost"].current == total and kpis["cost"].label == "Cost, priced requests"
    assert kpis["month_cost"].current == total * 30  # 24 hours scaled to 30 days
    assert kpis["cache_breaks"].current == 1
    schema = sum(turn.schema_cost_nanos for turn in Turn.objects.filter(project=project))
    assert kpis["schema_cost_share"].current == schema / sum(nanos(value) for value in expected(priced_session))
    body = response.content.decode()
    assert f"${round(total, 4)}" in body and f"${total * 30:,.2f}" in body
    # The previous period had nothing priced: no figure, not $0.
    assert kpis["cost"].previous is None and kpis["cost"].change is None


@pytest.mark.django_db(transaction=True)
def test_an_unpriced_model_is_left_out_of_the_overviews_cost_and_said(viewer_client, project):
    events = session_events(timezone.now().replace(microsecond=0) - timedelta(hours=1))
    for event in events:
        event["model"] = "house-model-9"
    post(project, events)
    assert set(Turn.objects.filter(project=project).values_list("cost_nanos", flat=True)) == {None}
    response = viewer_client.get(reverse("dashboard:overview", args=[project.slug]), {"range": "24h"})
    kpis = {kpi.key: kpi for kpi in response.context["kpis"]}
    assert kpis["cost"].current is None and kpis["month_cost"].current is None
    assert kpis["cost"].label == "Cost, 0 of 3 requests priced"


@pytest.mark.django_db(transaction=True)
def test_the_tools_page_shares_the_schema_and_output_dollars_among_the_tools(viewer_client, project,
                                                                            priced_session):
    response = viewer_client.get(reverse("dashboard:tools", args=[project.slug]), {"range": "24h"})
    rows = {row["name"]: row for row in response.context["rows"]}
    turns = list(Turn.objects.filter(project=project))
    schema = Decimal(sum(turn.schema_cost_nanos for turn in turns)) / 1_000_000_000
    assert abs(sum(row["schema_usd"] for row in rows.values()) - schema) <= Decimal("3e-9")
    # read_file was sent with all three requests, run_tests with the last only.
    assert rows["read_file"]["schema_usd"] > rows["run_tests"]["schema_usd"] > 0
    # No tool was called: no output dollars to share.
    assert {row["output_usd"] for row in rows.values()} == {Decimal(0)}
    exported = viewer_client.get(reverse("dashboard:tools_csv", args=[project.slug]), {"range": "24h"})
    header = next(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert "schema_usd" in header and "output_usd" in header


@pytest.mark.django_db(transaction=True)
def test_the_read_apis_overview_and_tools_give_the_same_dollars_as_decimal_strings(viewer_client, project,
                                                                                   priced_session):
    reader = KeyClient(make_key(project, scopes=["read"]).secret)
    end = timezone.now() + timedelta(minutes=1)
    window = {"start": (end - timedelta(days=1)).isoformat(), "end": end.isoformat()}
    kpis = {kpi["key"]: kpi for kpi in reader.get(reverse("api:overview"), window).json()["kpis"]}
    total = sum(Decimal(nanos(value)) for value in expected(priced_session)) / 1_000_000_000
    assert kpis["cost"]["kind"] == "usd" and Decimal(kpis["cost"]["current"]) == total
    assert kpis["cost"]["previous"] is None and kpis["cache_breaks"]["current"] == 1
    tools = {row["name"]: row for row in reader.get(reverse("api:tools-stats"), window).json()["results"]}
    page = {row["name"]: row for row in viewer_client.get(reverse("dashboard:tools", args=[project.slug]),
                                                          {"range": "24h"}).context["rows"]}
    assert {name: Decimal(row["schema_usd"]) for name, row in tools.items()} == {
        name: row["schema_usd"] for name, row in page.items()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("minutes", "reason"), [(0.5, ""), (10, "expired")])
def test_a_transcripts_stored_times_decide_what_its_cache_kept(project, minutes, reason):
    """An Anthropic transcript whose host logged each message's time: a request 10 minutes after
    the one before finds its 5-minute cache expired and writes everything again; 30 s after, it
    reads what the first wrote."""
    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    tools = [{"name": tool["name"], "description": tool["description"], "input_schema": tool["input_schema"]}
             for tool in TOOLS]
    body = {"format": "anthropic", "session_id": "timed", "model": "claude-sonnet-4-5",
            "timestamp": start.isoformat(), "system": SYSTEM, "tools": tools, "messages": [
                {"role": "user", "content": "Fix the failing import in app.py"},
                {"role": "assistant", "content": "Looking at it.",
                 "timestamp": (start + timedelta(seconds=5)).isoformat()},
                {"role": "user", "content": "Now run it again and tell me what changed in the output"},
                {"role": "assistant", "content": "It passes.",
                 "timestamp": (start + timedelta(seconds=5, minutes=minutes)).isoformat()}]}
    response = KeyClient(make_key(project, scopes=["ingest"]).secret).post_json("/api/v1/transcripts", body)
    assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)
    first, second = Turn.objects.filter(project=project).order_by("index")
    assert first.time_known and second.time_known
    assert second.cache_break == reason
    head = first.schema_tokens + first.system_prompt_tokens + first.message_tokens
    written = million((head, "3.75"))  # the first request writes its whole prompt
    rest = second.schema_tokens + second.system_prompt_tokens + second.message_tokens
    want = million((head, "0.30"), (rest - head, "3.75")) if not reason else million((rest, "3.75"))
    assert (first.cost_nanos, second.cost_nanos) == (nanos(written), nanos(want))
