"""Hypothesis strategies for ingest events: generated from the OpenAPI description of
/api/v1/ingest (api/schema.py), then pushed to and past the edges it states and past what the
columns hold (issue 11's fuzz findings). Shared by the in-process property test and the one
against a real worker."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from api.schema import EVENT_BATCH_SCHEMA

EVENT_SCHEMAS = EVENT_BATCH_SCHEMA["properties"]["events"]["items"]["oneOf"]


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


# Wrong types and shapes a careless client sends, for any field. No lone surrogates: JSON holding
# one is refused whole by the parser, before any event is looked at.
ANY_EDGES = [None, True, {}, [], "", " ", "\x00", "1", -1, 1e300, {"type": {}}]
TIMESTAMP_EDGES = ["1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2999-12-31T23:59:59Z", "3000-01-01T00:00:00Z",
                   "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "2026-11-22T10:00:00", 0, -1,
                   32503679999, 32503680000, 1e12]
OBJECT_EDGES = [deep(63), deep(64), deep(65), {"k\x00": "v\x00"}, {"n": 2**64 - 1}, {"n": -(2**63)}, {"n": 2**64},
                {"": [None, True, 1.5]}, {"password": "hunter2"}]


def _edges(schema: dict[str, Any]) -> list[Any]:
    """Values at and just past the limits `schema` states."""
    if "oneOf" in schema:
        return TIMESTAMP_EDGES
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 2**63 - 1)
        return [low, low - 1, high, high + 1, high + 0.5, 2**63, 2**64 - 1]
    if kind == "string":
        if "enum" in schema:
            return [*schema["enum"], schema["enum"][0].upper()]
        longest = schema.get("maxLength", 10_000)
        return ["x" * longest, "é" * (longest + 1), "a\x00b", "\x00", "\u2028", " \t"]
    if kind == "object":
        return OBJECT_EDGES
    if kind == "array":
        return [[], [None], [{"role": "user", "content": "\x00"}], [{"name": "t\x00"}]]
    return []


@st.composite
def edge_events(draw: st.DrawFn) -> dict[str, Any]:
    schema = draw(st.sampled_from(EVENT_SCHEMAS))
    event = dict(draw(from_schema(schema)))
    fields = sorted(schema["properties"])
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(fields))
        choices = _edges(schema["properties"][name])
        event[name] = draw(st.sampled_from(choices if choices and draw(st.integers(0, 4)) else ANY_EDGES))
    return event


batches = st.lists(edge_events(), min_size=1, max_size=6)


def event_stored(event: dict[str, Any], project_id: int) -> bool:
    """Whether the rows of an accepted event (as stored in its batch) exist."""
    from toolscope.policies.models import Tool
    from toolscope.telemetry.models import Session, ToolCall, Turn

    kind = event["type"]
    if kind == "session":
        return Session.objects.filter(project_id=project_id, client_id=event["session_id"]).exists()
    if kind == "turn":
        # A turn is also known by (session, index): a second event for a taken index is a re-send.
        return Turn.objects.filter(project_id=project_id, session__client_id=event["session_id"],
                                   index=event["index"]).exists()
    if kind == "tool_call":
        return ToolCall.objects.filter(project_id=project_id, client_id=event["id"]).exists()
    # A name may have a row per source (catalog identity), so count names, not rows.
    names = {tool["name"] for tool in event["tools"]}
    stored = Tool.objects.filter(project_id=project_id, name__in=names).values("name").distinct().count()
    return stored == len(names)


def assert_accepted_are_stored(response: Any, project: Any, *, process: Any) -> None:
    """The property both ingest property tests state: `process(batch_id)` has the batch processed
    (in-process or by a real worker); then every event the response accepted has its rows, the
    batch is done and nothing was quarantined."""
    from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent

    assert response.status_code in (202, 400), response.content[:500]
    body = response.json()
    if body.get("batch_id") is None:  # all rejected (400) or re-sends of earlier examples' events
        assert body.get("accepted", 0) == 0
        return
    process(body["batch_id"])
    stored = IngestBatch.objects.get(pk=body["batch_id"])
    assert stored.status == BatchStatus.DONE
    assert list(QuarantinedEvent.objects.filter(project=project).values_list("reason", flat=True)) == []
    accepted = stored.payload["events"]  # as accepted: validated, redacted
    assert len(accepted) == body["accepted"]
    assert [event for event in accepted if not event_stored(event, project.pk)] == []
