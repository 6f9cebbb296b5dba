"""Read queries over telemetry that the API serves."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import FilteredRelation, Q, QuerySet
from toolscope_agent.engine.compaction import ARTIFACT_ID_LENGTH

from toolscope.telemetry import sketches
from toolscope.telemetry.models import (
    SLICE,
    Artifact,
    BatchStatus,
    IngestBatch,
    Project,
    QuarantinedEvent,
    ToolCall,
    ToolDaily,
    ToolHourly,
)
from toolscope.telemetry.retention import Days, days_within

CONTENT_ID = re.compile(f"[0-9a-f]{{{ARTIFACT_ID_LENGTH}}}")
ARTIFACT = "artifact__"


def call_values(calls: QuerySet[ToolCall], fields: Sequence[str], days: Days | None,
                limit: int | None = None) -> list[dict[str, Any]]:
    """`fields` of `calls` as dicts (`artifact__*`: their artifact's), in the day partitions
    `days` (retention.py: days_within), the first `limit` of them if given. An artifact has its
    call's day, so it is joined within the same days: neither table is looked up in the others."""
    calls = calls.filter(days_within(days))
    if days is None or not any(name.startswith(ARTIFACT) for name in fields):
        return list(calls.values(*fields)[:limit])
    names = {name: name.replace(ARTIFACT, "day_artifact__", 1) if name.startswith(ARTIFACT) else name
             for name in fields}
    joined = calls.annotate(day_artifact=FilteredRelation("artifact", condition=Q(artifact__expires_on__range=days)))
    return [{name: row[names[name]] for name in fields} for row in joined.values(*names.values())[:limit]]


def artifact_get(*, project: Project, artifact_id: str) -> Artifact | None:
    """The artifact of `project` with this content id (what compacted texts name; among
    identical originals, the earliest stored) or, for artifacts linked before content ids, this
    uuid. Another project's id is simply not found."""
    artifacts = Artifact.objects.select_related("tool_call").filter(project=project)
    if CONTENT_ID.fullmatch(artifact_id):
        return artifacts.filter(content_id=artifact_id).order_by("created_at", "pk").first()
    try:
        pk = UUID(artifact_id)
    except ValueError:
        return None
    return artifacts.filter(pk=pk).first()


def batch_outcome(*, project_id: int, batch_id: int) -> dict[str, Any] | None:
    """An ingest batch of the project with each event's outcome: "stored", "quarantined" (with
    the reason), "pending" before processing ends, "failed" when the batch failed for good; None
    when the project has no such batch. Two queries."""
    batch = IngestBatch.objects.filter(project_id=project_id, pk=batch_id).first()
    if batch is None:
        return None
    quarantined = dict(QuarantinedEvent.objects.filter(batch=batch).values_list("client_id", "reason"))
    outcome = {BatchStatus.DONE: "stored", BatchStatus.FAILED: "failed"}.get(batch.status, "pending")
    events = []
    for event in (batch.payload or {}).get("events", []):
        event = event if isinstance(event, dict) else {}
        event_id = event.get("id")
        if event_id in quarantined:
            events.append({"id": event_id, "type": event.get("type"), "outcome": "quarantined",
                           "reason": quarantined[event_id]})
        else:
            events.append({"id": event_id, "type": event.get("type"), "outcome": outcome})
    return {"id": batch.pk, "kind": batch.kind, "status": batch.status, "attempts": batch.attempts,
            "error": batch.error, "received_at": batch.received_at, "started_at": batch.started_at,
            "finished_at": batch.finished_at, "event_count": batch.event_count, "quarantined": len(quarantined),
            "events": events}


# The range's duration bins added per (tool, bin) in the database: the whole days' sketches
# (ToolDaily) and the hours' (ToolHourly) at either end. What comes back is one row per bin of each
# tool, a few hundred per tool, however long the range.
BINS_SUM_SQL = """
SELECT tool_name, key, SUM(CAST(value AS BIGINT)) FROM (
    SELECT t.tool_name, b.key, b.value FROM {hourly} AS t, {each}(t.duration_bins) AS b
    WHERE t.project_id = %s AND ((t.hour >= %s AND t.hour < %s) OR (t.hour >= %s AND t.hour < %s)){tools}{slice}
    UNION ALL
    SELECT t.tool_name, b.key, b.value FROM {daily} AS t, {each}(t.duration_bins) AS b
    WHERE t.project_id = %s AND t.day >= %s AND t.day < %s{tools}
) AS bins
GROUP BY tool_name, key
"""


def duration_quantiles(*, project_id: int, start: datetime, end: datetime, tool_names: list[str] | None = None,
                       where: Mapping[str, str] | None = None) -> dict[str, tuple[float | None, ...]]:
    """(p50, p95) of each tool's call durations over [start, end), from the merged DDSketch bins of
    its whole days and of the hours at either end: within sketches.RELATIVE_ACCURACY of the exact
    figures, whatever the range. `where`: a slice ({"agent_name": ..., "model": ...}, either or
    both; blank values filter nothing), read from the hours alone (days are not sliced)."""
    each = "jsonb_each_text" if connection.vendor == "postgresql" else "json_each"
    # The whole days: from start's midnight (or the next one) to end's.
    first_day = (start.astimezone(UTC) + timedelta(days=1) - timedelta(microseconds=1)).date()
    last_day = end.astimezone(UTC).date()
    if first_day >= last_day or where:
        first_day = last_day = start.astimezone(UTC).date()
        edges = [start, end, end, end]
    else:
        edges = [start, _midnight(first_day), _midnight(last_day), end]
    tools, names = "", []
    if tool_names is not None:
        if not tool_names:
            return {}
        tools = f" AND t.tool_name IN ({', '.join(['%s'] * len(tool_names))})"
        names = list(tool_names)
    where = {name: where[name] for name in SLICE if (where or {}).get(name)}
    params: list[Any] = [project_id, *edges, *names, *where.values(), project_id, first_day, last_day, *names]
    # The table, column and function names are constants and the filters placeholders; values are parameters.
    sql = BINS_SUM_SQL.format(hourly=ToolHourly._meta.db_table, daily=ToolDaily._meta.db_table, each=each,
                              tools=tools, slice="".join(f" AND t.{name} = %s" for name in where))
    bins: dict[str, dict[str, int]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for tool_name, key, count in cursor.fetchall():
            bins[tool_name][key] = int(count)
    return {tool_name: sketches.quantiles(tool_bins) for tool_name, tool_bins in bins.items()}


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)
