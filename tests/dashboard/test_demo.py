"""The demo project as a first-time user sees it: every part of the product has something to show."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from django.urls import reverse

from toolscope.telemetry.demo.seed import demo_seed
from toolscope.telemetry.models import Membership, Project, Role

ANCHOR = datetime.fromisoformat("2026-11-20T10:00:00+00:00")
# With twelve sessions, one is long (at least one always is).
SESSIONS = 12


@pytest.fixture
def demo(db, member, owner):
    demo_seed(sessions=SESSIONS, seed=3, anchor=ANCHOR)
    project = Project.objects.get(slug="demo")
    Membership.objects.create(project=project, user=member, role=Role.VIEWER)
    Membership.objects.create(project=project, user=owner, role=Role.ADMIN)
    return project


def _range(**params):
    return {"range": "custom", "start": "2026-11-05", "end": "2026-11-20", **params}


def test_the_near_window_filter_finds_the_long_session(viewer_client, demo):
    response = viewer_client.get(reverse("dashboard:sessions", args=[demo.slug]), _range(near_window="on"))
    (row,) = response.context["page"].rows
    assert row["max_window_share"] > 0.8


def test_a_long_sessions_budget_chart_shows_the_context_window(viewer_client, demo):
    session = demo.sessions.get(near_window=True)
    response = viewer_client.get(reverse("dashboard:session", args=[demo.slug, session.client_id]), _range())
    assert response.status_code == 200
    budget = json.loads(response.context["charts"]["budget"])
    assert budget["layout"]["shapes"][0]["y0"] == demo.context_window
    assert budget["layout"]["yaxis"]["range"][1] >= demo.context_window


def test_versions_show_production_and_staging(viewer_client, demo):
    response = viewer_client.get(reverse("dashboard:policy_versions", args=[demo.slug]))
    labels = {label.name: label.number for label in response.context["labels"]}
    assert labels == {"production": 1, "staging": 2}
    assert response.context["diff"]  # v2 against v1


@pytest.mark.parametrize("label", ["production", "staging"])
def test_the_publish_page_has_changes_to_show_against_either_label(admin_client, demo, label):
    response = admin_client.get(reverse("dashboard:policy_publish", args=[demo.slug]), {"label": label})
    assert response.status_code == 200
    assert response.context["changes"]


def test_every_demo_turn_the_provider_reported_adds_up_to_its_bill(viewer_client, demo):
    """Issue 12: the budget's components plus what no component explains equal the provider's
    input count, turn by turn, as the session page reports them."""
    from dashboard.selectors import COMPONENTS, session_turns

    checked = 0
    for session in demo.sessions.all():
        for turn in session_turns(session=session):
            if turn["input_tokens"] is None:
                continue
            parts = sum(turn[key] or 0 for key, _ in COMPONENTS)
            assert parts == turn["estimated_input_tokens"], (session.client_id, turn["index"])
            assert parts + turn["unattributed_tokens"] == turn["input_tokens"]
            checked += 1
    assert checked > 50


# The providers' published prices per million tokens (uncached input, cache read, 5-minute cache
# write, output): the page's come from genai-prices' snapshot, so this also checks the snapshot.
PRICES = {"claude-sonnet-4-5": ("3", "0.30", "3.75", "15"), "gpt-4.1": ("2", "0.50", None, "8"),
          "claude-opus-4-1": ("15", "1.50", "18.75", "75")}


def test_each_demo_requests_dollars_equal_a_reference_from_its_reported_usage(viewer_client, demo):
    """The demo's turns report their cache (reads; Anthropic's writes too): each request's dollars
    on the session page are those tokens at the model's published prices, worked out here apart."""
    from decimal import Decimal

    from toolscope.telemetry.models import Turn

    checked = set()
    for session in demo.sessions.order_by("started_at"):
        page = viewer_client.get(reverse("dashboard:session", args=[demo.slug, session.client_id]), _range())
        rows = {turn.pk: turn for turn in Turn.objects.filter(session=session)}
        for shown in page.context["turns"]:
            turn = rows[shown["id"]]
            read, write = turn.cached_tokens, turn.cache_write_tokens or 0
            uncached_price, read_price, write_price, output_price = (
                Decimal(text or 0) for text in PRICES[turn.model])
            expected = (Decimal(turn.input_tokens - read - write) * uncached_price + Decimal(read) * read_price
                        + Decimal(write) * write_price + Decimal(turn.output_tokens) * output_price) / 1_000_000
            assert shown["usd"] == expected, (turn.model, turn.index)
            assert shown["billed_as"] == "reported"
            assert (write > 0) == turn.model.startswith("claude")
        checked.add(session.model)
    assert checked == set(PRICES)


def test_the_demos_overview_shows_what_its_requests_cost(viewer_client, demo):
    """Every demo request is priced: the overview's cost is the sum of their dollars (as the
    session pages show them), and a month at that rate scales it from the range's 16 days (the
    5th to the 20th, both whole)."""
    from decimal import Decimal

    from toolscope.telemetry.models import Turn

    page = viewer_client.get(reverse("dashboard:overview", args=[demo.slug]), _range())
    kpis = {kpi.key: kpi for kpi in page.context["kpis"]}
    nanos = list(Turn.objects.filter(project=demo).values_list("cost_nanos", flat=True))
    assert None not in nanos and kpis["cost"].label == "Cost, priced requests"
    assert kpis["cost"].current == Decimal(sum(nanos)) / 1_000_000_000 > 0
    assert kpis["month_cost"].current == kpis["cost"].current * 30 / 16


def test_the_printed_demo_key_reads_what_the_readme_shows(db):
    """Issue 28, item 5: the key `./scripts/demo` prints reads the sessions (the README's read API)
    at once, and a key without a scope is told which and where keys are made."""
    from tests.api.conftest import KeyClient
    from tests.factories import make_key

    result = demo_seed(sessions=SESSIONS, seed=3, anchor=ANCHOR)
    assert set(result.key.api_key.scopes) == {"ingest", "policy:read", "read"}
    sessions = KeyClient(result.key.secret).get("/api/v1/sessions", {"start": "2026-11-01T00:00:00Z"})
    assert sessions.status_code == 200 and len(sessions.json()["results"]) > 0
    ingest_only = KeyClient(make_key(result.key.api_key.project, scopes=["ingest"]).secret).get("/api/v1/sessions")
    assert ingest_only.status_code == 403
    assert ingest_only.json()["detail"] == ("This API key lacks the 'read' scope. A project admin makes a key with it "
                                            "on the dashboard's Keys page (/p/demo/keys/).")
