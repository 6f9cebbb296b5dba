"""Hourly rollups (ToolHourly, ProjectHourly): what the dashboard reads instead of raw rows.

Two ways keep them right:

- **Deltas, at processing time** (`HourlyDelta`, `rollups_add`). Accounting holds every stored
  row of the sessions a batch touches, before and after the batch: what the batch changed in each
  (hour, tool) and each hour (calls, errors, tokens, duplicates, savings, turns called and
  advertised, sessions, the turn budget sums) is added to the rollup rows in the batch's own
  transaction. The figures are in the dashboard the moment the batch commits, whatever the size
  of the hour; a batch processed twice adds nothing the second time, as its rows change nothing.
  Call durations are kept the same way, as DDSketch bins per (hour, tool) (telemetry/sketches.py):
  counts a batch adds to, from which the hour's p50 and p95 are read as they change.
- **Rebuilds** (`rollups_rebuild`, `rollups_rebuild_all`, and a marked hour's refresh): recompute
  an hour whole from the raw rows and replace what was there. Idempotent; they repair anything.

Concurrency, on PostgreSQL:

- Per (project, hour) there is a transaction-level advisory lock: a rebuild holds it exclusively,
  a batch adding deltas shares it. A rebuild therefore reads the raw
  rows with no batch of its hours half-committed: the batches that committed before it are in the
  raw rows it reads, the ones after it add their deltas to what it wrote. Locks are taken in hour
  order, so lock waits form no cycle; PostgreSQL's deadlock detector backs that up (processing
  retries an OperationalError; a failed refresh leaves its marks for the next one).
- Batches of the same session are serialised by the session row's lock (processing.py), so two
  batches never compute deltas from the same "before".
- A refresher claims DirtyHour marks with SELECT ... FOR UPDATE SKIP LOCKED, deletes them at
  once and rebuilds their hours in the same transaction. A crash rolls all of it back (the marks
  stay); a second refresher skips the locked rows.
- A mark is INSERT ... ON CONFLICT DO UPDATE. Made while a claim of the same hour is open, it
  waits for the claim's transaction (the row is locked, then deleted); once the claim commits and
  the row is gone, PostgreSQL retries the insert and a fresh mark survives, so the hour is done
  again with whatever the marker wrote. ON CONFLICT DO NOTHING would not wait on a row that is
  only locked (between the claim's SELECT and its DELETE) and that mark would be lost.

SQLite serialises writers: a rebuild deletes the old rollups first, which takes the write lock
before anything is read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Func, Q, QuerySet, Sum, TextField, Value
from django.db.models.functions import Greatest, TruncDay, TruncHour
from django.utils import timezone

from toolscope.policies.models import Tool
from toolscope.telemetry import sketches
from toolscope.telemetry.models import (
    SLICE,
    AdvertisedSet,
    DirtyHour,
    ProjectHourly,
    Session,
    ToolCall,
    ToolCallStatus,
    ToolDaily,
    ToolHourly,
    Turn,
)
from toolscope.telemetry.services.bulk import rows_insert

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
DAY_HOURS = 24
INSERT_BATCH = 2000
# Turn budget fields summed into ProjectHourly under the same names.
TURN_BUDGET = ("system_prompt_tokens", "schema_tokens", "message_tokens", "call_tokens", "tool_output_tokens",
               "estimated_input_tokens")
# ProjectHourly sums over the turns whose provider reported input tokens: the overview divides
# the provider's count by what the same turns' estimate holds, never by another set of turns.
REPORTED = {"reported_schema_tokens": "schema_tokens", "reported_estimated_tokens": "estimated_input_tokens"}
# Turn costs summed into ProjectHourly under the same names (over the priced turns: `priced_turns`).
COST_SUMS = ("cost_nanos", "schema_cost_nanos", "tool_output_cost_nanos")
# ProjectHourly field <- ToolHourly field, summed over the hour's tools.
CALL_TOTALS = {"tool_calls": "calls", "errors": "errors", "duplicate_tokens": "duplicate_tokens",
               "compaction_savings": "compaction_savings"}

# A rollup row's slice (models.SLICE_HELP): (agent_name, model).
Slice = tuple[str, str]
# A ToolHourly row: (hour, tool, agent_name, model); a ProjectHourly row: (hour, agent_name, model).
Key = tuple[datetime, str, str, str]
HourKey = tuple[datetime, str, str]


class _TurnKey(Func):
    """(session, turn_index): the turn a call belongs to, even when its `turn` link is null.
    A row value on PostgreSQL; SQLite's COUNT(DISTINCT) takes one value, so a string there."""

    function = "ROW"
    output_field = TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        return self.as_sql(compiler, connection, template="(%(expressions)s)", arg_joiner=" || ':' || ", **extra)


def hour_floor(moment: datetime) -> datetime:
    """The UTC hour holding `moment`. A naive datetime is taken as UTC, as the database stores it."""
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hours_normalise(moments: Iterable[datetime]) -> list[datetime]:
    # Sorted: upserts and advisory locks taken in one global order cannot deadlock each other.
    return sorted({hour_floor(moment) for moment in moments})


def _in_hours(hours: list[datetime], field: str = "started_at") -> Q:
    """Consecutive hours merged into [start, end) ranges: a day is one index range scan, not 24."""
    ranges: list[list[datetime]] = []
    for hour in hours:
        if ranges and ranges[-1][1] == hour:
            ranges[-1][1] = hour + HOUR
        else:
            ranges.append([hour, hour + HOUR])
    condition = Q()
    for start, end in ranges:
        condition |= Q(**{f"{field}__gte": start, f"{field}__lt": end})
    return condition


def _hourly(queryset: QuerySet[Any], *, project_id: int, hours: list[datetime]) -> QuerySet[Any]:
    return (
        queryset.filter(_in_hours(hours), project_id=project_id)
        .annotate(hour=TruncHour("started_at", tzinfo=UTC))
        .order_by()
    )


# --- marks ---------------------------------------------------------------------------------------


def dirty_hours_mark(*, project_id: int, timestamps: Iterable[datetime]) -> None:
    """Mark the hours holding `timestamps` for a rebuild by the rollup task: one upsert, however
    many timestamps. update_conflicts rather than ignore_conflicts so that a mark racing a claim
    waits for it and survives it (module docstring); bumping marked_at also shows how fresh the
    mark is."""
    now = timezone.now()
    marks = [DirtyHour(project_id=project_id, hour=hour, marked_at=now) for hour in _hours_normalise(timestamps)]
    if marks:
        DirtyHour.objects.bulk_create(
            marks, update_conflicts=True, unique_fields=["project", "hour"], update_fields=["marked_at"],
        )


def _dirty_hours_claim(*, limit: int) -> list[tuple[int, datetime]]:
    """Claim and delete up to `limit` marks, oldest first; must run inside the rebuild's transaction."""
    queryset = DirtyHour.objects.order_by("marked_at", "id")
    if connection.features.has_select_for_update_skip_locked:
        queryset = queryset.select_for_update(skip_locked=True)
    claimed = list(queryset.values_list("id", "project_id", "hour")[:limit])
    DirtyHour.objects.filter(pk__in=[pk for pk, _, _ in claimed]).delete()
    return [(project_id, hour) for _, project_id, hour in claimed]


# --- reading raw rows ----------------------------------------------------------------------------


def _call_rows(*, project_id: int, hours: list[datetime]) -> dict[Key, dict[str, Any]]:
    """ToolHourly's call figures per (hour, tool, slice): one aggregate query, and the durations'
    sketches. A call's slice is its session's agent and its turn's model ("" while it has none)."""
    aggregates: dict[str, Any] = {
        "calls": Count("id"),
        "errors": Count("id", filter=~Q(status=ToolCallStatus.OK)),
        "unflagged_errors": Count("id", filter=Q(error_text_unflagged=True)),
        "output_tokens": Sum("output_tokens", default=0),
        "duplicates": Count("id", filter=Q(duplicate_of__isnull=False)),
        "duplicate_tokens": Sum("duplicate_tokens", default=0),
        "compactions": Count("id", filter=Q(artifact__isnull=False)),
        # Clamped: an artifact that grew must not make the (unsigned) savings negative.
        "compaction_savings": Sum(
            Greatest(F("artifact__tokens_before") - F("artifact__tokens_after"), Value(0)), default=0
        ),
        "times_called": Count(_TurnKey("session_id", "turn_index"), distinct=True),
    }
    # The model is the call's own column (its turn's, as processing wrote it): no join of turns.
    calls = _hourly(ToolCall.objects.all(), project_id=project_id, hours=hours)
    queryset = calls.annotate(agent_name=F("session__agent_name"))
    rows = {(row.pop("hour"), row.pop("tool_name"), row.pop("agent_name"), row.pop("model")): row
            for row in queryset.values("hour", "tool_name", *SLICE).annotate(**aggregates)}
    for key, bins in _duration_bins(calls).items():
        p50, p95 = sketches.quantiles(bins)
        rows[key].update(duration_bins=bins, duration_p50_ms=p50, duration_p95_ms=p95)
    return rows


def _duration_bins(queryset: QuerySet[ToolCall]) -> dict[Key, dict[str, int]]:
    """The durations' sketch bins per (hour, tool, slice). The repair path: the hours' durations
    (one column, no outputs) stream to Python, about a second per million calls."""
    bins: dict[Key, Counter[str]] = defaultdict(Counter)
    timed = queryset.filter(duration_ms__isnull=False)
    # The sessions' agents in a second query, not a join: a server-side cursor's plan for a join
    # probes the sessions row by row (a 500-hour refresh took 130 s instead of 10).
    agents = dict(Session.objects.filter(pk__in=timed.values("session_id")).values_list("pk", "agent_name"))
    rows = timed.values_list("hour", "tool_name", "session_id", "model", "duration_ms")
    for hour, tool_name, session_id, model, duration in rows.iterator(chunk_size=INSERT_BATCH * 5):
        bins[(hour, tool_name, agents.get(session_id, ""), model)][sketches.bin_key(duration)] += 1
    return {key: dict(counts) for key, counts in bins.items()}


def _turn_rows(*, project_id: int, hours: list[datetime]) -> list[dict[str, Any]]:
    """Turn counts and budget sums per (hour, advertised set, slice): sets and slices are few, so
    rows are few."""
    # Aliased: an annotation may not reuse a field's name.
    sums = {f"sum_{name}": Sum(name, default=0) for name in TURN_BUDGET}
    rows = (
        _hourly(Turn.objects.all(), project_id=project_id, hours=hours)
        .annotate(agent_name=F("session__agent_name"))
        .values("hour", "advertised_set_id", *SLICE)
        .annotate(
            turns=Count("id"),
            near_window_turns=Count("id", filter=Q(near_window=True)),
            provider_input_tokens=Sum("input_tokens", default=0),
            provider_output_tokens=Sum("output_tokens", default=0),
            reported_turns=Count("id", filter=Q(input_tokens__isnull=False)),
            **{name: Sum(source, filter=Q(input_tokens__isnull=False), default=0) for name, source in REPORTED.items()},
            priced_turns=Count("id", filter=Q(cost_nanos__isnull=False)),
            cache_breaks=Count("id", filter=~Q(cache_break="")),
            **{f"sum_{name}": Sum(name, default=0) for name in COST_SUMS},
            **sums,
        )
    )
    return [{key.removeprefix("sum_"): value for key, value in row.items()} for row in rows]


def _session_counts(*, project_id: int, hours: list[datetime]) -> dict[HourKey, int]:
    """Sessions started per (hour, slice): a session's slice is its agent and its own model."""
    queryset = _hourly(Session.objects.all(), project_id=project_id, hours=hours)
    counted = queryset.values("hour", *SLICE).annotate(sessions=Count("id"))
    return {(row["hour"], row["agent_name"], row["model"]): row["sessions"] for row in counted}


def _schema_costs(*, project_id: int, names: set[str]) -> dict[tuple[str, str], int]:
    """Schema tokens per (tool, schema hash); key (tool, "") is the tool's current cost."""
    costs: dict[tuple[str, str], int] = {}
    rows = Tool.objects.filter(project_id=project_id, name__in=names).values_list(
        "name", "schema_tokens", "versions__schema_hash", "versions__schema_tokens"
    )
    for name, tool_tokens, version_hash, version_tokens in rows:
        costs[(name, "")] = tool_tokens or 0
        if version_hash is not None and version_tokens is not None:
            costs[(name, version_hash)] = version_tokens
    return costs


def advertised_counts(*, project_id: int, turn_rows: list[dict[str, Any]]) -> dict[Key, tuple[int, int]]:
    """(times advertised, schema tokens) per (hour, tool, slice), from turn counts per (hour,
    advertised set, slice)."""
    counted = [row for row in turn_rows if row["advertised_set_id"] is not None]
    if not counted:
        return {}
    tool_lists = dict(
        AdvertisedSet.objects.filter(project_id=project_id, pk__in={row["advertised_set_id"] for row in counted})
        .values_list("id", "tools")
    )
    # A name listed twice in one set is still one advertisement per turn; the first entry wins.
    sets = {set_id: {tool["name"]: tool.get("schema_hash") or "" for tool in reversed(tools)}
            for set_id, tools in tool_lists.items()}
    costs = _schema_costs(project_id=project_id, names={name for tools in sets.values() for name in tools})
    advertised: dict[Key, tuple[int, int]] = {}
    for row in counted:
        for name, digest in sets.get(row["advertised_set_id"], {}).items():
            cost = costs.get((name, digest), costs.get((name, ""), 0))
            key = (row["hour"], name, row["agent_name"], row["model"])
            times, tokens = advertised.get(key, (0, 0))
            advertised[key] = (times + row["turns"], tokens + row["turns"] * cost)
    return advertised


# --- building rollup rows ------------------------------------------------------------------------


def _defaults(model: type[ToolHourly | ProjectHourly]) -> dict[str, Any]:
    """Every column of a rollup row (attnames, no id) with its default: rows for rows_insert."""
    return {field.attname: field.get_default() for field in model._meta.concrete_fields if not field.primary_key}


def _tool_hourly(
    *, project_id: int, calls: dict[Key, dict[str, Any]], advertised: dict[Key, tuple[int, int]]
) -> list[dict[str, Any]]:
    # Advertised-but-never-called tools get a row with calls=0: the dashboard's dead weight.
    rows = []
    defaults = _defaults(ToolHourly)
    for key in sorted(calls.keys() | advertised.keys()):
        hour, tool_name, agent_name, model = key
        times_advertised, schema_tokens = advertised.get(key, (0, 0))
        rows.append({
            **defaults, "project_id": project_id, "hour": hour, "tool_name": tool_name, "agent_name": agent_name,
            "model": model, "times_advertised": times_advertised, "schema_tokens": schema_tokens,
            **calls.get(key, {}),
        })
    return rows


def _project_hourly(
    *, project_id: int, sessions: dict[HourKey, int], turn_rows: list[dict[str, Any]],
    calls: dict[Key, dict[str, Any]],
) -> list[dict[str, Any]]:
    # Only (hour, slice) keys with some row get an entry, so an emptied one ends with no row.
    totals: dict[HourKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for key, count in sessions.items():
        totals[key]["sessions"] += count
    turn_fields = ("turns", "near_window_turns", "provider_input_tokens", "provider_output_tokens", *TURN_BUDGET,
                   "reported_turns", *REPORTED, "priced_turns", "cache_breaks", *COST_SUMS)
    for row in turn_rows:
        for field in turn_fields:
            totals[(row["hour"], row["agent_name"], row["model"])][field] += row[field]
    for (hour, _, agent_name, model), row in calls.items():
        for field, source in CALL_TOTALS.items():
            totals[(hour, agent_name, model)][field] += row[source]
    defaults = _defaults(ProjectHourly)
    return [{**defaults, "project_id": project_id, "hour": hour, "agent_name": agent_name, "model": model, **fields}
            for (hour, agent_name, model), fields in sorted(totals.items())]


def hours_lock(*, project_id: int, hours: list[datetime], shared: bool = False) -> None:
    """Until commit: exclusive for a rebuild, shared for deltas (module docstring)."""
    if connection.vendor != "postgresql" or not hours:
        return
    keys = [int(hour.timestamp()) // 3600 for hour in hours]
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {function}(%s::integer, key) FROM unnest(%s::integer[]) AS key ORDER BY key",  # noqa: S608
            [project_id, keys],
        )


# --- services ------------------------------------------------------------------------------------


def rollups_rebuild(*, project_id: int, hours: Iterable[datetime]) -> None:
    """Recompute the project's ToolHourly and ProjectHourly rows of exactly these hours from the raw
    rows, replacing what was there. A constant number of aggregate queries, whatever the volume:
    raw rows never come to Python on PostgreSQL."""
    wanted = _hours_normalise(hours)
    if not wanted:
        return
    days = sorted({hour.date() for hour in wanted})
    with transaction.atomic():
        # Every hour of the days: their ToolDaily sketches are recomputed from the day's hours,
        # which no batch may be adding to meanwhile.
        hours_lock(project_id=project_id, hours=_hours_normalise(
            datetime.combine(day, time(hour), tzinfo=UTC) for day in days for hour in range(DAY_HOURS)))
        # Deleted before reading: on SQLite this takes the write lock before anything is read.
        ToolHourly.objects.filter(project_id=project_id, hour__in=wanted).delete()
        ProjectHourly.objects.filter(project_id=project_id, hour__in=wanted).delete()
        # A day at a time: a day's hours are a few index ranges however scattered the marks (a
        # refresh's 500 claimed hours are not consecutive: as one query, each row was tested
        # against hundreds of ranges), and the rows in memory stay a day's.
        for day in days:
            _hours_rebuild(project_id=project_id, hours=[hour for hour in wanted if hour.date() == day])
        _days_rebuild(project_id=project_id, days=days)


def _hours_rebuild(*, project_id: int, hours: list[datetime]) -> None:
    """The rollup rows of these hours (deleted already) from the raw rows."""
    calls = _call_rows(project_id=project_id, hours=hours)
    turn_rows = _turn_rows(project_id=project_id, hours=hours)
    sessions = _session_counts(project_id=project_id, hours=hours)
    advertised = advertised_counts(project_id=project_id, turn_rows=turn_rows)
    # One COPY each on PostgreSQL (services/bulk.py): a day of sliced rows is thousands.
    rows_insert(ToolHourly, _tool_hourly(project_id=project_id, calls=calls, advertised=advertised))
    rows_insert(ProjectHourly,
                _project_hourly(project_id=project_id, sessions=sessions, turn_rows=turn_rows, calls=calls))


def _days_rebuild(*, project_id: int, days: list[date]) -> None:
    """The days' ToolDaily sketches: their hours' bins added up."""
    ToolDaily.objects.filter(project_id=project_id, day__in=days).delete()
    merged: dict[tuple[date, str], dict[str, int]] = defaultdict(dict)
    start, end = datetime.combine(days[0], time(), tzinfo=UTC), datetime.combine(days[-1], time(), tzinfo=UTC) + DAY
    hourly = ToolHourly.objects.filter(project_id=project_id, hour__gte=start, hour__lt=end).exclude(duration_bins={})
    for hour, tool_name, bins in hourly.values_list("hour", "tool_name", "duration_bins").iterator():
        key = (hour.astimezone(UTC).date(), tool_name)
        if key[0] in days:
            merged[key] = sketches.bins_add(merged[key], bins)
    ToolDaily.objects.bulk_create([ToolDaily(project_id=project_id, day=day, tool_name=tool, duration_bins=bins)
                                   for (day, tool), bins in sorted(merged.items())], batch_size=INSERT_BATCH)


def rollups_refresh(*, limit: int = 500) -> int:
    """Rebuild up to `limit` marked hours, claimed and rebuilt in one transaction, so that a crash
    loses no mark and a concurrent refresher skips them. Returns the number of hours done."""
    if limit <= 0:
        return 0
    with transaction.atomic():
        claimed = _dirty_hours_claim(limit=limit)
        rebuild: dict[int, list[datetime]] = defaultdict(list)
        for project_id, hour in claimed:
            rebuild[project_id].append(hour)
        # Projects in id order, hours sorted: advisory locks always taken in one global order.
        for project_id in sorted(rebuild):
            rollups_rebuild(project_id=project_id, hours=rebuild[project_id])
    return len(claimed)


def _days_with_data(*, project_id: int | None) -> dict[int, set[datetime]]:
    """UTC days holding raw rows, or rollups (which may be stale if their raw rows are gone)."""
    days: dict[int, set[datetime]] = defaultdict(set)
    sources = ((Session, "started_at"), (Turn, "started_at"), (ToolCall, "started_at"), (ProjectHourly, "hour"))
    for model, field in sources:
        queryset = model.objects.order_by()
        if project_id is not None:
            queryset = queryset.filter(project_id=project_id)
        pairs = queryset.annotate(day=TruncDay(field, tzinfo=UTC)).values_list("project_id", "day").distinct()
        for owner_id, day in pairs:
            days[owner_id].add(day)
    return days


def rollups_rebuild_all(*, project_id: int | None = None) -> int:
    """Rebuild every hour of every day that has data, for one project or all, a day per transaction
    so that no transaction holds locks for long. Returns the number of hours rebuilt."""
    rebuilt = 0
    for owner_id, days in sorted(_days_with_data(project_id=project_id).items()):
        for day in sorted(days):
            rollups_rebuild(project_id=owner_id, hours=[day + HOUR * offset for offset in range(DAY_HOURS)])
            rebuilt += DAY_HOURS
    return rebuilt
