"""Simulation runs: start one (or reopen the one already made for the same document and
selection), run it in a worker with progress, cancel it.

A run is claimed with a conditional UPDATE (pending -> running), so a second delivery of its
task does nothing. It replays its sessions in chunks of CHUNK_SESSIONS: four queries per chunk
(services/simulation.py), one UPDATE of the progress, and a look at the status, so a cancelled
run stops at the next chunk. The result keeps totals, per-tool and per-day figures and the first
MAX_MISSES misses, each with its session and turn, and a row per session (the first
MAX_SESSION_ROWS); a row per turn (the first MAX_TURN_ROWS, seven integers each) is stored apart,
in SimulationTurns, which only the per-turn CSV reads.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from toolscope_agent.engine.replay_figures import Simulation as Replayed

from toolscope.policies.models import Policy, PolicyVersion, Simulation, SimulationStatus, SimulationTurns
from toolscope.policies.selectors import policy_label_version
from toolscope.policies.services.background import background_enqueue, background_kind, background_run
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.simulation import (
    simulation_replayer,
    simulation_session_rows,
    simulation_sessions_load,
)
from toolscope.telemetry.models import Project

CHUNK_SESSIONS = 500
MAX_MISSES = 500
MAX_SESSION_ROWS = 10_000
MAX_TURN_ROWS = 250_000
RUN_TASK = "workers.simulation_run"


@dataclass(frozen=True)
class SessionSelection:
    start: datetime
    end: datetime
    agent_name: str | None = None
    model: str | None = None
    limit: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "agent_name": self.agent_name,
                "model": self.model, "limit": self.limit}


def simulation_start(*, project: Project, document: dict[str, Any], source: str, selection: SessionSelection,
                     user: Any = None) -> tuple[Simulation, bool]:
    """The simulation of `document` on `selection`, and whether it was created now. An existing
    one (any status but failed or cancelled) is reopened as it is; a new one is queued."""
    key, document_hash = _key(document, selection), simulation_document_hash(document)
    with transaction.atomic():
        existing = Simulation.objects.select_for_update().filter(project=project, key=key).first()
        if existing is not None and existing.status not in (SimulationStatus.FAILED, SimulationStatus.CANCELLED):
            return existing, False
        if existing is not None:
            existing.delete()
        simulation = Simulation.objects.create(project=project, key=key, document=document, source=source,
                                               document_hash=document_hash, selection=selection.as_json(),
                                               created_by=user)
        transaction.on_commit(lambda: background_enqueue(RUN_TASK, simulation.pk), robust=True)
    return simulation, True


def simulation_cancel(*, simulation: Simulation) -> bool:
    """Stop a pending or running simulation at its next chunk; False when it had already ended."""
    return bool(Simulation.objects.filter(
        pk=simulation.pk, status__in=(SimulationStatus.PENDING, SimulationStatus.RUNNING),
    ).update(status=SimulationStatus.CANCELLED, finished_at=timezone.now()))


def simulation_run(*, simulation_id: int) -> Simulation | None:
    """Run a pending simulation to its end; None when it is gone, another worker has it, or it
    waits for one of its project's slots (services/background.py: then it is queued again, or
    its project's older run is run first)."""
    return background_run(Simulation, simulation_id, _replay)


def _replay(simulation: Simulation) -> dict[str, Any] | None:
    """The summary of the whole selection, or None when the run was cancelled midway."""
    selection = simulation.selection
    rows = simulation_session_rows(
        project=simulation.project, start=datetime.fromisoformat(selection["start"]),
        end=datetime.fromisoformat(selection["end"]), agent_name=selection.get("agent_name"),
        model=selection.get("model"), limit=selection.get("limit"))
    Simulation.objects.filter(pk=simulation.pk).update(sessions_total=len(rows))
    replay = simulation_replayer(project=simulation.project, document=simulation.document)
    summary = _Summary()
    started = time.monotonic()
    for chunk in _chunks(rows):
        if Simulation.objects.filter(pk=simulation.pk, status=SimulationStatus.CANCELLED).exists():
            return None
        days = {key: at.date().isoformat() for _, key, at in chunk}
        summary.add(replay(simulation_sessions_load(rows=[(pk, key) for pk, key, _ in chunk])), days)
        Simulation.objects.filter(pk=simulation.pk).update(sessions_done=F("sessions_done") + len(chunk))
    SimulationTurns.objects.update_or_create(simulation=simulation, defaults={
        "sessions": list(summary.session_index), "rows": summary.turn_rows})
    return summary.as_json(sessions=len(rows), seconds=time.monotonic() - started)


def simulation_headline(result: dict[str, Any]) -> dict[str, Any]:
    """What the Runs page shows of a done simulation: its sessions, the schema tokens it would
    have saved (net of round trips), its misses and, when priced, the dollars saved."""
    dollars = result.get("dollars") or {}
    return {"sessions": result["sessions"], "saved_share": result["saved_share"],
            "net_saved_share": result.get("net_saved_share", result["saved_share"]),
            "miss_rate": result["miss_rate"], "hard_miss_rate": result.get("hard_miss_rate", result["miss_rate"]),
            "dollars_saved": dollars.get("saved") if dollars.get("priced_sessions") else None}


background_kind(Simulation, task=RUN_TASK, work=_replay, headline=simulation_headline)


def _chunks(rows: list[tuple[int, str, datetime]]) -> Iterator[list[tuple[int, str, datetime]]]:
    for start in range(0, len(rows), CHUNK_SESSIONS):
        yield rows[start:start + CHUNK_SESSIONS]


def simulation_document_hash(document: dict[str, Any]) -> str:
    """SHA-256 of the document's canonical JSON, without what publishing adds (version, etag,
    label, published_at): a draft and the version published from it hash alike."""
    content = {key: value for key, value in document.items()
               if key not in ("version", "etag", "label", "published_at", "search_history")}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def simulation_latest(*, project: Project, document: dict[str, Any]) -> Simulation | None:
    """The most recent finished simulation of this document, on any selection."""
    return (Simulation.objects.filter(project=project, document_hash=simulation_document_hash(document),
                                      status=SimulationStatus.DONE).order_by("-finished_at").first())


def _key(document: dict[str, Any], selection: SessionSelection) -> str:
    canonical = orjson.dumps({"document": document, "selection": selection.as_json()}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


@dataclass
class _Summary:
    turns: int = 0
    calls: int = 0
    advertised: int = 0
    sent: int = 0
    hard: int = 0
    recoverable: int = 0
    round_trip_tokens: int = 0
    duplicates_saved: int = 0
    compaction_saved: int = 0
    recorded_dollars: float = 0.0
    policy_dollars: float = 0.0
    priced_sessions: int = 0
    cache_breaks: int = 0
    recorded_cache_breaks: int = 0
    tools: dict[str, dict[str, int]] = field(default_factory=dict)
    days: dict[str, dict[str, int]] = field(default_factory=dict)
    misses: list[dict[str, Any]] = field(default_factory=list)
    sessions: dict[str, dict[str, int]] = field(default_factory=dict)
    turn_rows: list[list[int]] = field(default_factory=list)
    session_index: dict[str, int] = field(default_factory=dict)

    def add(self, replayed: Replayed, days: dict[str, str]) -> None:
        self.turns += len(replayed.turns)
        self.calls += replayed.calls
        self.advertised += replayed.advertised_tokens
        self.sent += replayed.sent_tokens
        self.hard += replayed.hard_misses
        self.recoverable += replayed.recoverable_misses
        self.round_trip_tokens += replayed.round_trip_tokens
        self.duplicates_saved += replayed.duplicate_tokens_saved
        self.compaction_saved += replayed.compaction_tokens_saved
        self.recorded_dollars += replayed.recorded_dollars
        self.policy_dollars += replayed.policy_dollars
        self.priced_sessions += replayed.priced_sessions
        self.cache_breaks += replayed.cache_breaks
        self.recorded_cache_breaks += replayed.recorded_cache_breaks
        for name, figures in replayed.tools.items():
            tool = self.tools.setdefault(name, {"calls": 0, "hard": 0, "recoverable": 0, "output_tokens_saved": 0})
            tool["calls"] += figures.calls
            tool["hard"] += figures.hard
            tool["recoverable"] += figures.recoverable
            tool["output_tokens_saved"] += figures.output_tokens_saved
        for row in replayed.turns:
            if len(self.turn_rows) < MAX_TURN_ROWS:
                index = self.session_index.setdefault(row.session, len(self.session_index))
                self.turn_rows.append([index, row.turn, row.calls, row.misses, row.advertised_tokens, row.sent_tokens,
                                       row.sent_tools])
            if row.session in self.sessions or len(self.sessions) < MAX_SESSION_ROWS:
                session = self.sessions.setdefault(row.session, {"turns": 0, "calls": 0, "misses": 0,
                                                                 "advertised_tokens": 0, "sent_tokens": 0})
                session["turns"] += 1
                session["calls"] += row.calls
                session["misses"] += row.misses
                session["advertised_tokens"] += row.advertised_tokens
                session["sent_tokens"] += row.sent_tokens
            day = self.days.setdefault(days[row.session], {"advertised_tokens": 0, "sent_tokens": 0, "calls": 0,
                                                           "misses": 0})
            day["advertised_tokens"] += row.advertised_tokens
            day["sent_tokens"] += row.sent_tokens
            day["calls"] += row.calls
            day["misses"] += row.misses
        room = MAX_MISSES - len(self.misses)
        self.misses.extend({"session": miss.session, "turn": miss.turn, "tool": miss.tool, "kind": miss.kind,
                            "path": miss.path} for miss in replayed.misses[:max(room, 0)])

    def as_json(self, *, sessions: int, seconds: float) -> dict[str, Any]:
        misses = self.hard + self.recoverable
        return {
            "sessions": sessions, "turns": self.turns, "calls": self.calls, "seconds": round(seconds, 3),
            "advertised_tokens": self.advertised, "sent_tokens": self.sent,
            "saved_tokens": self.advertised - self.sent,
            "saved_share": (self.advertised - self.sent) / self.advertised if self.advertised else 0.0,
            "misses": misses, "hard_misses": self.hard, "recoverable_misses": self.recoverable,
            "miss_rate": misses / self.calls if self.calls else 0.0, "recovery_round_trips": self.recoverable,
            "hard_miss_rate": self.hard / self.calls if self.calls else 0.0,
            "recoverable_miss_rate": self.recoverable / self.calls if self.calls else 0.0,
            "round_trip_tokens": self.round_trip_tokens,
            "net_saved_tokens": self.advertised - self.sent - self.round_trip_tokens,
            "net_saved_share": ((self.advertised - self.sent - self.round_trip_tokens) / self.advertised
                                if self.advertised else 0.0),
            "duplicate_tokens_saved": self.duplicates_saved, "compaction_tokens_saved": self.compaction_saved,
            "dollars": {"priced_sessions": self.priced_sessions, "recorded": round(self.recorded_dollars, 6),
                        "policy": round(self.policy_dollars, 6),
                        "saved": round(self.recorded_dollars - self.policy_dollars, 6),
                        "saved_share": ((self.recorded_dollars - self.policy_dollars) / self.recorded_dollars
                                        if self.recorded_dollars else 0.0),
                        "cache_breaks": self.cache_breaks, "recorded_cache_breaks": self.recorded_cache_breaks},
            "tools": dict(sorted(self.tools.items())), "days": dict(sorted(self.days.items())),
            "miss_list": self.misses, "miss_list_truncated": misses > len(self.misses),
            "session_rows": [{"session": key, **row} for key, row in self.sessions.items()],
            "turn_rows_stored": len(self.turn_rows), "turn_rows_truncated": self.turns > len(self.turn_rows),
        }


class DocumentNotFound(LookupError):
    pass


def simulation_document(*, project: Project, label: str | None = None, version: int | None = None,
                        draft: bool = False, document: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The document to replay and what it is ("draft", "v3", "label production", "uploaded"):
    the one given, the draft, a version by number, or the version under a label."""
    if document is not None:
        return document, "uploaded"
    if draft:
        policy = Policy.objects.filter(project=project).first()
        if policy is None:
            raise DocumentNotFound("This project has no draft policy.")
        return policy_document_build(policy=policy), "draft"
    if version is not None:
        found = PolicyVersion.objects.filter(project=project, number=version).first()
        if found is None:
            raise DocumentNotFound(f"This project has no policy version {version}.")
        return found.document, f"v{version}"
    found = policy_label_version(project_id=project.pk, name=label or "production")
    if found is None:
        raise DocumentNotFound(f"No policy version carries the label {label or 'production'!r} in this project.")
    return found.document, f"v{found.number} ({label or 'production'})"
