"""The Runs page: a project's simulations and recommendations in one list, newest first.

Two queries whatever the page: the newest `limit + 1` rows of each kind after the cursor, merged
here. Keyset pagination over (created_at, kind, id) as on the Sessions page: no OFFSET and no
COUNT, so page 100 costs page 1. The rows carry each run's headline (kept when it ended), never
its result or document, which can be megabytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from toolscope.policies.models import BackgroundRun, Recommendation, Simulation, SimulationStatus

RUNS_PAGE_SIZE = 25
# The kinds in the list's order among runs created at the same instant (descending).
KIND_ORDER = {"recommendation": 0, "simulation": 1}
_COMMON = ("pk", "status", "error", "created_at", "started_at", "finished_at", "created_by__username", "headline")
_COLUMNS: dict[str, tuple[type[BackgroundRun], tuple[str, ...]]] = {
    "simulation": (Simulation, (*_COMMON, "source", "selection", "sessions_done", "sessions_total")),
    "recommendation": (Recommendation, (*_COMMON, "days", "limit", "start", "end", "agent_name", "model",
                                        "candidates_done", "candidates_total")),
}
UNITS = {"simulation": "sessions", "recommendation": "candidates"}
DASH = " \N{EN DASH} "


@dataclass(frozen=True)
class RunRow:
    kind: str
    pk: int
    status: str
    error: str
    what: str
    created_at: datetime
    started_by: str | None
    done: int
    total: int
    duration: timedelta | None
    headline: dict[str, Any] | None

    @property
    def progress(self) -> float:
        return self.done / self.total if self.total else float(self.status == SimulationStatus.DONE)

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def cursor(self) -> str:
        return run_cursor_format(self.created_at, self.kind, self.pk)


@dataclass(frozen=True)
class RunPage:
    rows: list[RunRow]
    next_after: str | None


def run_list(*, project_id: int, after: tuple[datetime, str, int] | None = None,
             limit: int = RUNS_PAGE_SIZE) -> RunPage:
    """The project's runs of both kinds, newest first, `limit` after the cursor: two queries."""
    now = timezone.now()
    rows = []
    for kind, (model, columns) in _COLUMNS.items():
        found = model.objects.filter(_after(kind, after), project_id=project_id)
        rows += [_row(kind, values, now) for values in
                 found.order_by("-created_at", "-pk").values(*columns)[:limit + 1]]
    rows.sort(key=lambda row: (row.created_at, KIND_ORDER[row.kind], row.pk), reverse=True)
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(rows=rows, next_after=rows[-1].cursor if more else None)


def _after(kind: str, after: tuple[datetime, str, int] | None) -> Q:
    """This kind's rows that come after the cursor in (created_at, kind, id) descending."""
    if after is None:
        return Q()
    moment, cursor_kind, pk = after
    if KIND_ORDER[kind] < KIND_ORDER[cursor_kind]:
        return Q(created_at__lte=moment)
    if KIND_ORDER[kind] > KIND_ORDER[cursor_kind]:
        return Q(created_at__lt=moment)
    return Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=pk)


def _row(kind: str, values: dict[str, Any], now: datetime) -> RunRow:
    done, total = (values["sessions_done"], values["sessions_total"]) if kind == "simulation" else (
        values["candidates_done"], values["candidates_total"])
    started, finished = values["started_at"], values["finished_at"]
    duration = (finished or now) - started if started and (finished or values["status"] == "running") else None
    return RunRow(kind=kind, pk=values["pk"], status=values["status"], error=values["error"], what=_what(kind, values),
                  created_at=values["created_at"], started_by=values["created_by__username"], done=done, total=total,
                  duration=duration, headline=values["headline"])


def _what(kind: str, values: dict[str, Any]) -> str:
    """The policy simulated and its sessions, or the sessions a recommendation learns from."""
    if kind == "simulation":
        selection = values["selection"] or {}
        limit = f", at most {selection['limit']:,}" if selection.get("limit") else ""
        return f"{values['source']} on {selection.get('start', '')[:10]}{DASH}{selection.get('end', '')[:10]}{limit}"
    if values["start"] is not None and values["end"] is not None:
        window = f"{values['start']:%Y-%m-%d %H:%M}{DASH}{values['end']:%Y-%m-%d %H:%M}"
        window += "".join(f", {name}" for name in (values["agent_name"], values["model"]) if name)
    else:
        window = f"the last {values['days']} days"
    return f"learnt from {window}, at most {values['limit']:,} sessions"


def run_cursor_format(created_at: datetime, kind: str, pk: int) -> str:
    return f"{created_at.isoformat()}|{kind}|{pk}"


def run_cursor_parse(raw: str) -> tuple[datetime, str, int] | None:
    """The position a cursor of run_cursor_format's shape names; None for any other text."""
    parts = raw.split("|")
    if len(parts) != 3:
        return None
    moment, kind, pk = parts
    if kind not in KIND_ORDER or not pk.isdigit():
        return None
    try:
        parsed = datetime.fromisoformat(moment)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)), kind, int(pk)
