"""The overview page: KPIs against the previous period, tokens by component, tool usage; all of
the project, or of one slice (an agent, a model or both: `where`, the rollups' slice columns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Max, Q, Sum

from dashboard.selectors.common import COMPONENTS, UNATTRIBUTED, bucket_sums, ratio, zero_filled
from toolscope.telemetry.models import SLICE, ProjectHourly, ToolHourly
from toolscope.telemetry.selectors import duration_quantiles
from toolscope.telemetry.services.costs import NANOS

# (key, label, kind, better): a ProjectHourly sum or a ratio of two; better is "up", "down" or "".
# A share's label names its denominator.
KPI_SPECS = (
    ("sessions", "Sessions", "count", ""),
    ("turns", "Turns", "count", ""),
    ("tool_calls", "Tool calls", "count", ""),
    ("provider_input_tokens", "Input tokens (provider)", "count", ""),
    ("schema_share", "Tool schemas, of provider-reported input", "share", "down"),
    ("unattributed_share", "Unattributed, of provider-reported input", "share", ""),
    ("duplicate_tokens", "Duplicate tokens", "count", "down"),
    ("compaction_savings", "Compaction savings", "count", "up"),
    ("error_rate", "Tool call errors, of calls", "share", "down"),
    ("cost", "Cost, priced requests", "usd", "down"),
    ("month_cost", "A month at this rate", "usd", "down"),
    ("schema_cost_share", "Tool schemas, of the cost", "share", "down"),
    ("cache_breaks", "Cache breaks", "count", "down"),
)
# When no turn of the range has a provider count, the schema share falls back to the estimate.
ESTIMATED_SCHEMA_LABEL = "Tool schemas, of estimated input (no provider counts)"
KPI_SUMS = ("sessions", "turns", "tool_calls", "errors", "provider_input_tokens", "schema_tokens",
            "estimated_input_tokens", "duplicate_tokens", "compaction_savings", "reported_turns",
            "reported_schema_tokens", "reported_estimated_tokens", "priced_turns", "cost_nanos", "schema_cost_nanos",
            "cache_breaks")
MONTH = timedelta(days=30)


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    kind: str  # "count", "share" or "usd"
    better: str  # "up", "down" or "" when neither direction is better
    current: float | None
    previous: float | None

    @property
    def change(self) -> float | None:
        """Relative change for counts, percentage points for shares; None without a base."""
        return self.change_points if self.kind == "share" else self.change_ratio

    @property
    def change_ratio(self) -> float | None:
        """A count's change relative to the previous period (0.25: up a quarter); None for shares."""
        if self.kind == "share" or self.current is None or not self.previous:
            return None
        return (self.current - self.previous) / self.previous

    @property
    def change_points(self) -> float | None:
        """A share's change in percentage points (20% against 10%: 10.0); None for counts."""
        if self.kind != "share" or self.current is None or self.previous is None:
            return None
        return (self.current - self.previous) * 100

    @property
    def change_shown(self) -> float | None:
        """The change as the page prints it: whole percent for counts, tenths of a point for shares
        (0.004 is shown as 0%, and coloured as no change)."""
        change = self.change
        if change is None:
            return None
        return round(change, 1) if self.kind == "share" else round(change * 100) / 100

    @property
    def verdict(self) -> str:
        """"good", "bad" or "" for the change's colour: none for a change shown as zero."""
        change = self.change_shown
        if not change or not self.better:
            return ""
        return "good" if (change > 0) == (self.better == "up") else "bad"


def _kpi_values(sums: dict[str, int], *, span: timedelta) -> dict[str, Any]:
    values: dict[str, Any] = {key: sums[key] for key in KPI_SUMS}
    provider = sums["provider_input_tokens"]
    if sums["reported_turns"]:
        # The same turns above and below the line: the provider's count, and those turns' schemas.
        values["schema_share"] = ratio(sums["reported_schema_tokens"], provider)
        values["unattributed_share"] = ratio(provider - sums["reported_estimated_tokens"], provider)
    else:
        values["schema_share"] = ratio(sums["schema_tokens"], sums["estimated_input_tokens"])
        values["unattributed_share"] = None
    values["error_rate"] = ratio(sums["errors"], sums["tool_calls"])
    # Dollars over the priced requests (telemetry/services/costs.py); none priced: no figure, never $0.
    priced = sums["priced_turns"]
    values["cost"] = sums["cost_nanos"] / NANOS if priced else None
    values["month_cost"] = values["cost"] * Decimal(MONTH / span) if priced else None
    values["schema_cost_share"] = ratio(sums["schema_cost_nanos"], sums["cost_nanos"]) if priced else None
    return values


Where = Mapping[str, str]


def slice_where(*, agent: str = "", model: str = "") -> dict[str, str]:
    """The overview's filter (an agent, a model; blank: all) as the rollups' slice columns."""
    return {column: value for column, value in (("agent_name", agent), ("model", model)) if value}


def _sliced(where: Where | None) -> Q:
    """The rollup rows of a slice: {"agent_name": ..., "model": ...}, either or both; empty: all."""
    return Q(**{name: where[name] for name in SLICE if (where or {}).get(name)})


def slice_choices(*, project_id: int, start: datetime, end: datetime) -> dict[str, list[str]]:
    """The agents and models with data in the range, for the overview's filter: one query."""
    pairs = (ProjectHourly.objects.filter(project_id=project_id, hour__gte=start, hour__lt=end)
             .order_by().values_list(*SLICE).distinct())
    agents, models = set(), set()
    for agent, model in pairs:
        agents.add(agent)
        models.add(model)
    return {"agents": sorted(a for a in agents if a), "models": sorted(m for m in models if m)}


def overview_kpis(*, project_id: int, start: datetime, end: datetime, where: Where | None = None) -> list[Kpi]:
    """The range's KPIs beside the previous period of the same length: one query over ProjectHourly."""
    previous_start = start - (end - start)
    periods = {"cur": Q(hour__gte=start, hour__lt=end), "prev": Q(hour__gte=previous_start, hour__lt=start)}
    totals = ProjectHourly.objects.filter(_sliced(where), project_id=project_id, hour__gte=previous_start,
                                          hour__lt=end).aggregate(
        **{f"{period}__{name}": Sum(name, filter=condition, default=0)
           for period, condition in periods.items() for name in KPI_SUMS}
    )
    current = _kpi_values({name: totals[f"cur__{name}"] for name in KPI_SUMS}, span=end - start)
    previous = _kpi_values({name: totals[f"prev__{name}"] for name in KPI_SUMS}, span=end - start)
    labels = {"schema_share": ESTIMATED_SCHEMA_LABEL} if not totals["cur__reported_turns"] else {}
    priced, turns = totals["cur__priced_turns"], totals["cur__turns"]
    if priced < turns:
        labels["cost"] = f"Cost, {priced:,} of {turns:,} requests priced"
    return [Kpi(key, labels.get(key, label), kind, better, current[key], previous[key])
            for key, label, kind, better in KPI_SPECS]


def token_series(*, project_id: int, start: datetime, end: datetime, bucket: str,
                 where: Where | None = None) -> list[dict[str, Any]]:
    """Tokens by component per hour or day, empty buckets as zeros: one query."""
    names = (*(name for name, _ in COMPONENTS), "estimated_input_tokens", "provider_input_tokens",
             "reported_estimated_tokens")
    queryset = ProjectHourly.objects.filter(_sliced(where), project_id=project_id, hour__gte=start, hour__lt=end)
    rows = zero_filled(bucket_sums(queryset, bucket=bucket, names=names), start=start, end=end, bucket=bucket,
                       names=names)
    for row in rows:
        row[UNATTRIBUTED[0]] = (row["provider_input_tokens"] or 0) - (row["reported_estimated_tokens"] or 0)
    return rows


USAGE_SUMS = ("calls", "errors", "unflagged_errors", "output_tokens", "duplicates", "duplicate_tokens",
              "compaction_savings", "times_advertised", "times_called", "schema_tokens")


def tool_usage(*, project_id: int, start: datetime, end: datetime, where: Where | None = None) -> list[dict[str, Any]]:
    """Per tool over the range, from ToolHourly: one query for the sums, one for the duration
    percentiles (the hours' sketches merged: telemetry/sketches.py)."""
    # Aliased "sum_*": an annotation named like a field would shadow it in the expressions below.
    sums = {f"sum_{name}": Sum(name) for name in USAGE_SUMS}
    rows = (
        ToolHourly.objects.filter(_sliced(where), project_id=project_id, hour__gte=start, hour__lt=end)
        .values("tool_name")
        .annotate(**sums, last_call_hour=Max("hour", filter=Q(calls__gt=0)))
        .order_by("tool_name")
    )
    durations = duration_quantiles(project_id=project_id, start=start, end=end, where=where)
    return [_usage_row(row, durations.get(row["tool_name"], (None, None))) for row in rows]


def _usage_row(row: dict[str, Any], durations: tuple[float | None, ...]) -> dict[str, Any]:
    values = {name: row[f"sum_{name}"] for name in USAGE_SUMS}
    calls = values["calls"]
    p50, p95 = durations
    return {
        "name": row["tool_name"], **values, "last_call_hour": row["last_call_hour"],
        "error_rate": ratio(values["errors"], calls),
        "mean_output_tokens": ratio(values["output_tokens"], calls),
        "duplicate_rate": ratio(values["duplicates"], calls),
        "p50_ms": p50,
        "p95_ms": p95,
    }


def top_by(rows: list[dict[str, Any]], key: str, *, limit: int = 10) -> list[dict[str, Any]]:
    """The rows with the largest non-zero `key`, ties by name (pure: no query)."""
    ranked = sorted((row for row in rows if row[key]), key=lambda row: row["name"])
    return sorted(ranked, key=lambda row: row[key], reverse=True)[:limit]


def dead_weight(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools advertised in the range and called in none of its turns, costliest first (pure)."""
    return top_by([row for row in rows if row["times_advertised"] and not row["calls"]], "schema_tokens",
                  limit=len(rows))
