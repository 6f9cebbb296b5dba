"""What a batch changed in the hourly rollups, added to them in the batch's own transaction.

Accounting (accounting.py) holds every stored row of the sessions a batch touches, before and
after the batch. Each row's contribution to the rollups is a sum, so the batch's effect is
(contributions after) - (contributions before), row by row, and only rows the batch inserted or
changed contribute anything. The one exception among ToolHourly's figures, `times_called` (turns
that called the tool), counts distinct (session, turn) pairs; a session belongs to one batch at a
time (its row is locked), so a new call adds a turn exactly when no stored call of the same
session, turn, tool and hour had it already. Durations go into each (hour, tool)'s DDSketch bins,
which are counts too (telemetry/sketches.py): the hour's p50 and p95 are read from the updated bins.

Every contribution goes to a slice, (agent, model) (models.SLICE_HELP). A stored row whose slice
changed (its session's agent was named late, a call's turn arrived with its model) is taken back
from the old slice and added to the new one, as a row whose values changed is.

`apply()` upserts the sums, `value = max(0, value + delta)`, with rows in (hour, tool) order so
concurrent batches take row locks in one order; a rebuild in progress for one of the hours holds
it exclusively, and the batch waits for it (rollups.py, module docstring).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from django.db import connection, models

from toolscope.telemetry import sketches
from toolscope.telemetry.models import ProjectHourly, ToolCallStatus, ToolDaily, ToolHourly
from toolscope.telemetry.services import rollups
from toolscope.telemetry.services.bulk import rows_update
from toolscope.telemetry.services.rollups import (
    CALL_TOTALS,
    COST_SUMS,
    REPORTED,
    TURN_BUDGET,
    HourKey,
    Key,
    Slice,
    hour_floor,
)

TOOL_SUMS = ("calls", "errors", "unflagged_errors", "output_tokens", "duplicates", "duplicate_tokens", "compactions",
             "compaction_savings", "times_advertised", "times_called", "schema_tokens")
PROJECT_SUMS = ("sessions", "turns", "tool_calls", "errors", "near_window_turns", *TURN_BUDGET,
                "provider_input_tokens", "provider_output_tokens", "duplicate_tokens", "compaction_savings",
                "reported_turns", *REPORTED, "priced_turns", "cache_breaks", *COST_SUMS)
# A call's accounting values, as accounting's CallState reads them.
CALL_VALUES = ("started_at", "tool_name", "status", "error_text_unflagged", "output_tokens", "duplicate_of_id",
               "duplicate_tokens", "artifact_id", "artifact__tokens_before", "artifact__tokens_after", "duration_ms")
UPSERT_ROWS = 200


class HourlyDelta:
    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        self.tools: dict[Key, Counter[str]] = defaultdict(Counter)
        self.hours: dict[HourKey, Counter[str]] = defaultdict(Counter)
        # Per (hour, tool, slice): duration sketch bins added (+) or taken back (-).
        self.durations: dict[Key, Counter[str]] = defaultdict(Counter)

    # --- contributions ---------------------------------------------------------------------------

    def call(self, values: Mapping[str, Any], sign: int, where: Slice) -> None:
        """One tool call's contribution (`values` holds CALL_VALUES) to slice `where`, added (+1)
        or taken back (-1)."""
        key = (hour_floor(values["started_at"]), values["tool_name"], *where)
        row = self.tools[key]
        row["calls"] += sign
        row["errors"] += sign * (values["status"] != ToolCallStatus.OK)
        row["unflagged_errors"] += sign * bool(values["error_text_unflagged"])
        row["output_tokens"] += sign * (values["output_tokens"] or 0)
        row["duplicates"] += sign * (values["duplicate_of_id"] is not None)
        row["duplicate_tokens"] += sign * (values["duplicate_tokens"] or 0)
        if values["artifact_id"] is not None:
            row["compactions"] += sign
            saved = (values["artifact__tokens_before"] or 0) - (values["artifact__tokens_after"] or 0)
            row["compaction_savings"] += sign * max(saved, 0)
        if values["duration_ms"] is not None:
            self.durations[key][sketches.bin_key(values["duration_ms"])] += sign

    def turns_called(self, before: Iterable[tuple[int, int, str, datetime, Slice]],
                     after: Iterable[tuple[int, int, str, datetime, Slice]]) -> None:
        """times_called per (hour, tool, slice) counts the (session, turn) pairs with a call of the
        tool in the hour. `before` and `after` hold every call of the sessions as (session, turn
        index, tool, started_at, slice) before and after the batch: a pair the batch added counts
        +1, a pair whose slice moved moves its count."""
        def pairs(calls: Iterable[tuple[int, int, str, datetime, Slice]]) -> dict[tuple[Any, ...], Slice]:
            return {(session, index, tool, hour_floor(at)): where for session, index, tool, at, where in calls}

        old, new = pairs(before), pairs(after)
        for pair, where in new.items():
            if old.get(pair) != where:
                self.tools[(pair[3], pair[2], *where)]["times_called"] += 1
                if pair in old:
                    self.tools[(pair[3], pair[2], *old[pair])]["times_called"] -= 1

    def turn(self, values: Mapping[str, Any], sign: int, where: Slice) -> None:
        """One turn's contribution to slice `where`: counts, provider-reported tokens, its budget
        and its dollars."""
        row = self.hours[(hour_floor(values["started_at"]), *where)]
        row["turns"] += sign
        row["near_window_turns"] += sign * bool(values["near_window"])
        row["provider_input_tokens"] += sign * (values["input_tokens"] or 0)
        row["provider_output_tokens"] += sign * (values["output_tokens"] or 0)
        for name in TURN_BUDGET:
            row[name] += sign * (values[name] or 0)
        if values["input_tokens"] is not None:
            row["reported_turns"] += sign
            for name, source in REPORTED.items():
                row[name] += sign * (values[source] or 0)
        if values["cost_nanos"] is not None:
            row["priced_turns"] += sign
            for name in COST_SUMS:
                row[name] += sign * (values[name] or 0)
        row["cache_breaks"] += sign * bool(values["cache_break"])

    def advertised(self, turns: Iterable[tuple[Mapping[str, Any], Slice]], sign: int = 1) -> None:
        """Turns' advertised tools, each turn with its slice: times advertised and schema tokens
        per (hour, tool, slice), priced as a rebuild prices them (rollups.advertised_counts),
        added (+1) or taken back (-1)."""
        counts: Counter[tuple[datetime, int, str, str]] = Counter(
            (hour_floor(turn["started_at"]), turn["advertised_set_id"], *where) for turn, where in turns
            if turn["advertised_set_id"] is not None
        )
        rows = [{"hour": hour, "advertised_set_id": set_id, "agent_name": agent_name, "model": model, "turns": n}
                for (hour, set_id, agent_name, model), n in counts.items()]
        for key, (times, tokens) in rollups.advertised_counts(project_id=self.project_id, turn_rows=rows).items():
            self.tools[key]["times_advertised"] += sign * times
            self.tools[key]["schema_tokens"] += sign * tokens

    def session(self, before: tuple[datetime, Slice] | None, after: tuple[datetime, Slice]) -> None:
        """A session counts in the hour it started, in its slice (its agent, its own model); an
        earlier event can move that hour, a session event name its agent or model."""
        old = (hour_floor(before[0]), *before[1]) if before is not None else None
        new = (hour_floor(after[0]), *after[1])
        if old != new:
            if old is not None:
                self.hours[old]["sessions"] -= 1
            self.hours[new]["sessions"] += 1

    # --- writing ---------------------------------------------------------------------------------

    def apply(self) -> None:
        durations = {key: bins for key, bins in self.durations.items() if any(bins.values())}
        # A row whose durations changed needs a ToolHourly row even if no sum did.
        tools = {key: row for key, row in self.tools.items() if any(row.values()) or key in durations}
        hours: dict[HourKey, Counter[str]] = defaultdict(Counter)
        for key, row in self.hours.items():
            hours[key].update(row)
        for (hour, _, agent_name, model), row in tools.items():
            for field, source in CALL_TOTALS.items():
                hours[(hour, agent_name, model)][field] += row[source]
        hours = {key: row for key, row in hours.items() if any(row.values())}
        if not tools and not hours:
            return
        rollups.hours_lock(project_id=self.project_id, hours=sorted({key[0] for key in [*hours, *tools]}),
                            shared=True)
        _upsert(ToolHourly, ("project_id", "hour", "tool_name", "agent_name", "model"), TOOL_SUMS,
                [((self.project_id, *key), row) for key, row in sorted(tools.items())])
        _durations_add(self.project_id, durations)
        _upsert(ProjectHourly, ("project_id", "hour", "agent_name", "model"), PROJECT_SUMS,
                [((self.project_id, *key), row) for key, row in sorted(hours.items())])
        emptied = [key for key, row in hours.items() if min(row.values()) < 0]
        # A rebuild keeps no row for an (hour, slice) left with nothing (a session whose start or
        # agent moved, a call whose model did).
        for hour, agent_name, model in emptied:
            ProjectHourly.objects.filter(project_id=self.project_id, hour=hour, agent_name=agent_name, model=model,
                                         sessions=0, turns=0, tool_calls=0).delete()
        emptied_tools = [key for key, row in tools.items() if min(row.values()) < 0]
        for hour, tool_name, agent_name, model in emptied_tools:
            ToolHourly.objects.filter(project_id=self.project_id, hour=hour, tool_name=tool_name,
                                      agent_name=agent_name, model=model, calls=0, times_advertised=0).delete()


def _upsert(model: type[models.Model], keys: tuple[str, ...], sums: tuple[str, ...],
            rows: list[tuple[tuple[Any, ...], Counter[str]]]) -> None:
    """Add each row's deltas to the row with its keys, rows in the given (sorted) order.

    The increases go in one INSERT ... ON CONFLICT (keys) DO UPDATE SET sum = sum + excluded.sum
    per chunk (PostgreSQL and SQLite alike). A decrease cannot ride along: the proposed row of an
    upsert must pass the columns' `>= 0` checks even when it conflicts. Decreases are rare (a
    stored row re-accounted, whose rollup row exists already) and go as UPDATEs, clamped at 0."""
    if not rows:
        return
    meta = model._meta
    key_fields = [meta.get_field(name) for name in keys]
    table = meta.db_table
    columns = ", ".join(f'"{field.column}"' for field in [*key_fields, *(meta.get_field(n) for n in sums)])
    conflict = ", ".join(f'"{field.column}"' for field in key_fields)
    increases = ", ".join(f'"{name}" = "{table}"."{name}" + excluded."{name}"' for name in sums)
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    where = " AND ".join(f'"{field.column}" = %s' for field in key_fields)
    width = len(keys) + len(sums)
    decreases: list[tuple[list[Any], dict[str, int]]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), UPSERT_ROWS):
            chunk = rows[start:start + UPSERT_ROWS]
            values = ", ".join(["(" + ", ".join(["%s"] * width) + ")"] * len(chunk))
            params: list[Any] = []
            for key, row in chunk:
                prepared = [field.get_db_prep_save(value, connection)
                            for field, value in zip(key_fields, key, strict=True)]
                params += prepared + [max(row[name], 0) for name in sums]
                negative = {name: row[name] for name in sums if row[name] < 0}
                if negative:
                    decreases.append((prepared, negative))
            # Names come from the model's metadata, never from input; values are parameters.
            cursor.execute(
                f'INSERT INTO "{table}" ({columns}) VALUES {values} '  # noqa: S608
                f"ON CONFLICT ({conflict}) DO UPDATE SET {increases}",
                params,
            )
        for prepared, negative in decreases:
            assignments = ", ".join(f'"{name}" = {greatest}(0, "{name}" + %s)' for name in negative)
            cursor.execute(f'UPDATE "{table}" SET {assignments} WHERE {where}',  # noqa: S608
                           [*negative.values(), *prepared])


def _durations_add(project_id: int, durations: Mapping[Key, Counter[str]]) -> None:
    """Add the duration bins to their ToolHourly rows and re-read the hour's p50 and p95. The
    rows exist and are locked by this transaction already (the upsert above wrote them), so the
    read-add-write cannot race another batch's."""
    if not durations:
        return
    hours = sorted({key[0] for key in durations})
    rows = []
    stored = ToolHourly.objects.filter(
        project_id=project_id, hour__in=hours, tool_name__in={key[1] for key in durations}
    ).values_list("pk", "hour", "tool_name", "agent_name", "model", "duration_bins")
    for pk, hour, tool, agent_name, model, bins in stored:
        delta = durations.get((hour, tool, agent_name, model))
        if delta is None:
            continue
        merged = sketches.bins_add(bins, delta)
        p50, p95 = sketches.quantiles(merged)
        rows.append(ToolHourly(pk=pk, duration_bins=merged, duration_p50_ms=p50, duration_p95_ms=p95))
    rows_update(ToolHourly, ("duration_bins", "duration_p50_ms", "duration_p95_ms"), rows)
    days: dict[tuple[date, str], Counter[str]] = defaultdict(Counter)
    for (hour, tool, _, _), delta in durations.items():
        days[(hour.date(), tool)].update(delta)
    daily_bins_add(project_id, days)


def daily_bins_add(project_id: int, days: Mapping[tuple[date, str], Mapping[str, int]]) -> None:
    """Add bins to the days' ToolDaily rows, made when missing. Under the hours' shared locks, so
    no rebuild of those days runs meanwhile; batches of one project are processed one at a time."""
    if not days:
        return
    ToolDaily.objects.bulk_create([ToolDaily(project_id=project_id, day=day, tool_name=tool)
                                   for day, tool in sorted(days)], ignore_conflicts=True)
    stored = ToolDaily.objects.select_for_update().filter(
        project_id=project_id, day__in={day for day, _ in days}, tool_name__in={tool for _, tool in days},
    ).order_by("day", "tool_name").values_list("pk", "day", "tool_name", "duration_bins")
    rows = [ToolDaily(pk=pk, duration_bins=sketches.bins_add(bins, days[(day, tool)]))
            for pk, day, tool, bins in stored if (day, tool) in days]
    rows_update(ToolDaily, ("duration_bins",), rows)
