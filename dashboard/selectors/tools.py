"""The tools table and a tool's own page."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Subquery, Sum
from django.db.models.fields.json import KeyTransform

from dashboard.selectors.common import bucket_sums, zero_filled
from dashboard.selectors.overview import tool_usage
from toolscope.policies.models import SearchHistory, Tool, ToolVersion
from toolscope.telemetry.models import ProjectHourly, ToolCall, ToolCallStatus, ToolHourly
from toolscope.telemetry.services.costs import NANOS


def catalog_rows(*, project_id: int) -> list[dict[str, Any]]:
    """The catalog with each tool's last call ever (an index lookup per tool): one query."""
    last_call = (
        ToolHourly.objects.filter(project_id=project_id, tool_name=OuterRef("name"), calls__gt=0)
        .order_by("-hour").values("hour")[:1]
    )
    return list(
        Tool.objects.filter(project_id=project_id)
        .annotate(last_call_hour=Subquery(last_call))
        .values("name", "source", "schema_hash", "schema_tokens", "last_call_hour")
        .order_by("name", "-last_seen_at", "-pk")
    )


def _by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One entry per name: the most recently seen definition's figures, and how many live
    definitions (one per source) the name has and of how many different schemas."""
    entries: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = entries.setdefault(row["name"], {**row, "sources": [], "hashes": set()})
        entry["sources"].append(row["source"])
        entry["hashes"].add(row["schema_hash"])
    for entry in entries.values():
        entry["definitions"], entry["schemas"] = len(entry["sources"]), len(entry.pop("hashes"))
        entry["sources"].sort()
    return entries


def tool_dollars(rows: list[dict[str, Any]], *, project_id: int, start: datetime, end: datetime) -> None:
    """Each tool's dollars over the range (`schema_usd`, `output_usd`; None when no request was
    priced): the priced requests' tool-schema and tool-output dollars (ProjectHourly, one query)
    shared among the tools as their tokens share them: schema tokens summed over the turns that
    sent them, output tokens their calls returned. An allocation: a request's cache reads and
    writes are priced whole, not tool by tool."""
    totals = ProjectHourly.objects.filter(project_id=project_id, hour__gte=start, hour__lt=end).aggregate(
        priced=Sum("priced_turns", default=0), schemas=Sum("schema_cost_nanos", default=0),
        outputs=Sum("tool_output_cost_nanos", default=0))
    schema_tokens = sum(row["schema_tokens"] for row in rows)
    output_tokens = sum(row["output_tokens"] for row in rows)
    for row in rows:
        row["schema_usd"] = row["output_usd"] = None
        if totals["priced"]:
            row["schema_usd"] = _share(totals["schemas"], row["schema_tokens"], schema_tokens)
            row["output_usd"] = _share(totals["outputs"], row["output_tokens"], output_tokens)


def _share(nanos: int, part: int, whole: int) -> Decimal:
    return (Decimal(nanos) * part / whole / NANOS).quantize(Decimal("1e-9")) if whole else Decimal(0)


_EMPTY_USAGE = {"calls": 0, "errors": 0, "unflagged_errors": 0, "error_rate": None, "output_tokens": 0,
                "mean_output_tokens": None,
                "duplicates": 0, "duplicate_rate": None, "duplicate_tokens": 0, "compaction_savings": 0,
                "times_advertised": 0, "times_called": 0, "schema_tokens": 0, "last_call_hour": None,
                "p50_ms": None, "p95_ms": None, "schema_usd": None, "output_usd": None}


def tool_table(*, project_id: int, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Every catalog tool and every tool seen in the range, usage beside catalog figures: two
    queries (usage, catalog), merged here. Unsorted; see tool_table_arrange."""
    usage = {row["name"]: row for row in tool_usage(project_id=project_id, start=start, end=end)}
    tool_dollars(list(usage.values()), project_id=project_id, start=start, end=end)
    catalog = _by_name(catalog_rows(project_id=project_id))
    rows = []
    for name in sorted(usage.keys() | catalog.keys()):
        entry = catalog.get(name)
        row = {**_EMPTY_USAGE, **usage.get(name, {"name": name})}
        row["in_catalog"] = entry is not None
        row["catalog_schema_tokens"] = entry["schema_tokens"] if entry else None
        row["source"] = entry["source"] if entry else ""
        # Several sources define the name: resolve renders the one the agent advertises.
        row["definitions"] = entry["definitions"] if entry else 0
        row["definition_sources"] = entry["sources"] if entry else []
        row["schemas_differ"] = bool(entry) and entry["schemas"] > 1
        # Outside the catalog there is no per-tool lookup: the last call within the range.
        row["last_used"] = entry["last_call_hour"] if entry else row["last_call_hour"]
        rows.append(row)
    return rows


SHOW_FILTERS = {
    "": lambda row: True,
    "called": lambda row: row["calls"] > 0,
    "unused": lambda row: row["times_advertised"] > 0 and row["calls"] == 0,
    "errors": lambda row: row["errors"] > 0,
    "unknown": lambda row: not row["in_catalog"],
}


def tool_table_arrange(rows: list[dict[str, Any]], *, q: str, show: str, sort: str, dir: str) -> list[dict[str, Any]]:
    """Filter and sort the table (pure). Stable: ties keep name order; empty values sort last."""
    needle = q.casefold()
    kept = [row for row in rows if needle in row["name"].casefold() and SHOW_FILTERS[show](row)]
    kept.sort(key=lambda row: row["name"])
    present = [row for row in kept if row[sort] is not None]
    missing = [row for row in kept if row[sort] is None]
    present.sort(key=lambda row: row[sort], reverse=dir == "desc")
    return present + missing


def tool_get(*, project_id: int, name: str) -> Tool | None:
    """The most recently seen definition of `name` (the one resolve falls back to)."""
    definitions = tool_definitions(project_id=project_id, name=name)
    return definitions[0] if definitions else None


def tool_definitions(*, project_id: int, name: str) -> list[Tool]:
    """Every source's definition of `name`, most recently seen first: one query."""
    return list(Tool.objects.filter(project_id=project_id, name=name).order_by("-last_seen_at", "-pk"))


def tool_search_texts(*, project_id: int, name: str) -> dict[str, Any]:
    """What the project's agents asked before calling `name` (its learned search history) and
    when that was learned: one query, reading only this tool's key of the history."""
    row = (SearchHistory.objects.filter(project_id=project_id)
           .annotate(texts=KeyTransform(name, "tools")).values("texts", "refreshed_at").first())
    texts = row["texts"] if row else None
    return {"texts": [text for text in texts if isinstance(text, str)] if isinstance(texts, list) else [],
            "refreshed_at": row["refreshed_at"] if row else None}


def tool_seen(*, project_id: int, name: str) -> bool:
    """Whether the rollups know the tool at all (for tools outside the catalog)."""
    return ToolHourly.objects.filter(project_id=project_id, tool_name=name).exists()


def tool_series(*, project_id: int, name: str, start: datetime, end: datetime, bucket: str) -> list[dict[str, Any]]:
    """Calls, errors and output tokens per hour or day for one tool: one query."""
    names = ("calls", "errors", "output_tokens", "duplicates")
    queryset = ToolHourly.objects.filter(project_id=project_id, tool_name=name, hour__gte=start, hour__lt=end)
    rows = bucket_sums(queryset, bucket=bucket, names=names)
    return zero_filled(rows, start=start, end=end, bucket=bucket, names=names)


SAMPLE_SIZE = 2000


def tool_call_sample(*, project_id: int, name: str, start: datetime, end: datetime,
                     limit: int = SAMPLE_SIZE) -> list[dict[str, Any]]:
    """The tool's most recent `limit` calls in the range (duration, output tokens), read through the
    (project, tool_name, started_at) index: one query whose cost does not grow with the range."""
    return list(
        ToolCall.objects.filter(project_id=project_id, tool_name=name, started_at__gte=start, started_at__lt=end)
        .order_by("-started_at")
        .values("started_at", "duration_ms", "output_tokens", "status")[:limit]
    )


def tool_errors(*, project_id: int, name: str, start: datetime, end: datetime, limit: int = 20) -> list[dict[str, Any]]:
    """The tool's last `limit` failed calls in the range, with their session: one query."""
    return list(
        ToolCall.objects.filter(project_id=project_id, tool_name=name, started_at__gte=start, started_at__lt=end)
        .exclude(status=ToolCallStatus.OK)
        .order_by("-started_at")
        .values("id", "started_at", "status", "error", "duration_ms", "turn_index", "session__client_id")[:limit]
    )


@dataclass
class VersionRow:
    schema_hash: str
    first_seen_at: datetime
    schema_tokens: int | None
    text: str
    diff: list[str] = field(default_factory=list)  # unified diff from the previous version
    token_change: int | None = None  # schema tokens minus the previous version's


def _pretty(version: ToolVersion) -> str:
    document = {"description": version.description, "input_schema": version.input_schema}
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def tool_versions(*, tool_id: int) -> list[VersionRow]:
    """Every schema the tool has had, newest first, each with its diff from the one before: one query."""
    versions = list(ToolVersion.objects.filter(tool_id=tool_id).order_by("first_seen_at", "id"))
    rows: list[VersionRow] = []
    for version in versions:
        text = _pretty(version)
        row = VersionRow(version.schema_hash, version.first_seen_at, version.schema_tokens, text)
        if rows:
            previous = rows[-1]
            row.diff = list(difflib.unified_diff(previous.text.splitlines(), text.splitlines(), "previous",
                                                 "this version", lineterm="", n=2))
            if previous.schema_tokens is not None and row.schema_tokens is not None:
                row.token_change = row.schema_tokens - previous.schema_tokens
        rows.append(row)
    return rows[::-1]
