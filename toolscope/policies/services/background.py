"""A page's background work (simulations, recommendations): queued by task name, run once, and
shared fairly between projects.

Services enqueue by name through toolscope.tasks, so none imports a task module (workers ->
services, one way). The runs are `BackgroundRun` rows: claimed pending -> running with a
conditional UPDATE (a second delivery of the task does nothing), and ended done (with the result)
or failed (with the error's type).

Fairness (issue 24, item 6). A project runs at most settings.SIMULATIONS_PER_PROJECT runs at once,
simulations and recommendations together: a run holds one of its project's slots, a session-level
PostgreSQL advisory lock, for as long as it runs (released at its end, or by PostgreSQL when the
worker's connection dies with it). A task that finds every slot of its project taken puts its run
back: the run stays pending and its message goes back to the queue for later
(REQUEUE_SECONDS), so it waits in the broker and the worker's memory, never in a pool process, and
the processes serve the other projects' runs. A task that gets a slot runs its project's oldest
pending run (which may be another run than its own: its own message is then sent again), so a
project's runs go in the order they were asked for, and `background_queue_position` tells a
waiting run how many of its project's runs are ahead of it.

Without a broker (tasks run in-process) and on SQLite there are no slots: a run runs when asked.

In the background in every configuration (issue 28, item 8). Without a broker Celery runs a task
in the caller, which for a run is the request that asked for it: a recommendation held the page
half a minute, past the browser's patience. There the task goes to this process's background
thread instead (`_InProcess`): the request answers at once with the pending run, whose page
polls its progress like a worker's. One thread, runs in the order asked, so a process computes
one run at a time (SIMULATIONS_PER_PROJECT's default, for all projects together). A daemon, so
stopping the server never waits for a run: the one it cut short stays `running` until the
project's next run fails it as WorkerLost (past BACKGROUND_LIMITS' time limit).

When a run ends it keeps a `headline` beside its result (each kind's own summary: sessions, what
it saves, its misses), so the Runs page lists any number of runs without loading results.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from toolscope.policies.models import BackgroundRun, Recommendation, Simulation, SimulationStatus
from toolscope.tasks import task_send

logger = logging.getLogger(__name__)

Run = TypeVar("Run", bound=BackgroundRun)

# Celery's limits of a run's task (workers/tasks.py): a replay of 2,000,000 turns or a
# recommendation over 5,000 sessions takes a minute or two. A run still `running` after
# time_limit seconds lost its worker.
BACKGROUND_LIMITS = {"soft_time_limit": 600, "time_limit": 660}
# The kinds of run, oldest first among equals; their slots are shared.
KINDS: tuple[type[BackgroundRun], ...] = (Simulation, Recommendation)
# A run whose project has no free slot comes back after this many seconds (jittered).
REQUEUE_SECONDS = (1.0, 3.0)
# pg_try_advisory_lock(bigint): the single-key space, apart from processing's project locks
# (0x7473_0001 << 32) and the rollups' two-key locks. Slot `n` of project `p` is base + p * 256 + n.
_SLOT_LOCK_BASE = 0x7473_0002 << 32
MAX_SLOTS = 256


@dataclass(frozen=True)
class _Kind:
    task: str
    work: Callable[[Any], dict[str, Any] | None]
    headline: Callable[[dict[str, Any]], dict[str, Any]] | None = None


_KINDS: dict[type[BackgroundRun], _Kind] = {}


def background_kind(model: type[Run], *, task: str, work: Callable[[Run], dict[str, Any] | None],
                    headline: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
    """Register a kind of run: the task that runs it, its work and the headline of its result
    (services/simulation_runs.py, services/recommendations.py), so that a slot runs its project's
    oldest run of any kind."""
    _KINDS[model] = _Kind(task, work, headline)


def background_enqueue(task_name: str, *args: Any, **options: Any) -> None:
    """Send `task_name(*args)` to the simulation queue (settings.SIMULATION_QUEUE); without a
    broker, to this process's background thread (the module's docstring)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _IN_PROCESS.submit(lambda: task_send(task_name, *args, queue=settings.SIMULATION_QUEUE, **options))
        return
    task_send(task_name, *args, queue=settings.SIMULATION_QUEUE, **options)


class _InProcess:
    """One daemon thread that runs what is submitted, in order, each on the thread's own database
    connection, closed after each run (a connection is per thread: the request's is not shared)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], None]) -> None:
        self._queue.put(call)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="toolscope-background", daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        while True:
            call = self._queue.get()
            try:
                call()
            except Exception:  # the run is marked failed with the error's type (_claim_and_run)
                logger.exception("a background run failed in-process")
            finally:
                connection.close()


_IN_PROCESS = _InProcess()


def background_run(model: type[Run], pk: int, work: Callable[[Run], dict[str, Any] | None] | None = None,
                   ) -> Run | None:
    """Run the pending run `pk` of `model`, or its project's oldest pending run when that is
    another one, within the project's slots (see the module's docstring). Returns the run done
    (None when it was cancelled midway, is gone, another worker has it, or it waits for a slot)."""
    kind = _KINDS.get(model)
    if work is None:
        assert kind is not None, f"{model.__name__} is not a registered kind of background run"
        work = kind.work
    project_id = model.objects.filter(pk=pk, status=SimulationStatus.PENDING).values_list(
        "project_id", flat=True).first()
    if project_id is None:
        return None
    with _slot(project_id) as slot:
        if not slot:
            _requeue(model, pk, kind)
            return None
        _lost_runs_fail(project_id)
        chosen_model, chosen_pk = (_oldest_pending(project_id) if _fair() else None) or (model, pk)
        chosen_kind = _KINDS.get(chosen_model) if chosen_model is not model or chosen_pk != pk else None
        if chosen_kind is None:  # its own run, or one of a kind this process cannot run
            return _claim_and_run(model, pk, work)
        _claim_and_run(chosen_model, chosen_pk, chosen_kind.work)
    # Its own run is still pending, behind the one just run: its message goes back to the queue.
    if model.objects.filter(pk=pk, status=SimulationStatus.PENDING).exists():
        _requeue(model, pk, kind, at_once=True)
    return None


def _claim_and_run(model: type[Run], pk: int, work: Callable[[Run], dict[str, Any] | None]) -> Run | None:
    claimed = model.objects.filter(pk=pk, status=SimulationStatus.PENDING).update(
        status=SimulationStatus.RUNNING, started_at=timezone.now())
    if not claimed:
        return None
    run = model.objects.select_related("project").get(pk=pk)
    try:
        result = work(run)
    except Exception as exc:
        model.objects.filter(pk=pk).update(status=SimulationStatus.FAILED, error=type(exc).__name__,
                                           finished_at=timezone.now())
        logger.exception("%s %s failed", model.__name__.lower(), pk)
        raise
    if result is not None:
        summary = _KINDS[model].headline if model in _KINDS else None
        model.objects.filter(pk=pk, status=SimulationStatus.RUNNING).update(
            status=SimulationStatus.DONE, result=result, headline=summary(result) if summary else None,
            finished_at=timezone.now())
    run.refresh_from_db()
    return run


def background_queue_position(run: BackgroundRun) -> int | None:
    """How many of its project's runs (simulations and recommendations) are ahead of a pending
    run: running now, or asked for before it. None when it is not pending."""
    if run.status != SimulationStatus.PENDING:
        return None
    live = timezone.now() - timedelta(seconds=BACKGROUND_LIMITS["time_limit"])
    ahead = 0
    for model in KINDS:
        earlier = Q(created_at__lt=run.created_at)
        if isinstance(run, model):
            earlier |= Q(created_at=run.created_at, pk__lt=run.pk)
        ahead += model.objects.filter(
            Q(status=SimulationStatus.RUNNING, started_at__gte=live) | (Q(status=SimulationStatus.PENDING) & earlier),
            project_id=run.project_id,
        ).count()
    return ahead


def _fair() -> bool:
    """Slots exist with a broker (a run waiting for one comes back) on PostgreSQL (advisory locks)."""
    return connection.vendor == "postgresql" and not settings.CELERY_TASK_ALWAYS_EAGER


@contextmanager
def _slot(project_id: int) -> Iterator[bool]:
    """Whether one of the project's SIMULATIONS_PER_PROJECT slots was free, held until exit."""
    if not _fair():
        yield True
        return
    base = _SLOT_LOCK_BASE + project_id * MAX_SLOTS
    held = None
    with connection.cursor() as cursor:
        for key in range(base, base + min(settings.SIMULATIONS_PER_PROJECT, MAX_SLOTS)):
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            if cursor.fetchone()[0]:
                held = key
                break
    try:
        yield held is not None
    finally:
        if held is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [held])


def _oldest_pending(project_id: int) -> tuple[type[BackgroundRun], int] | None:
    """The project's pending run asked for first, of any kind (None: none is pending)."""
    oldest = []
    for order, model in enumerate(KINDS):
        row = (model.objects.filter(project_id=project_id, status=SimulationStatus.PENDING)
               .order_by("created_at", "pk").values_list("created_at", "pk").first())
        if row is not None:
            oldest.append((row[0], order, row[1], model))
    if not oldest:
        return None
    _, _, pk, model = min(oldest, key=lambda row: row[:3])
    return model, pk


def _lost_runs_fail(project_id: int) -> None:
    """Runs of the project still `running` past their hard time limit lost their worker (killed
    at the limit, or with its machine): they are failed, so the page says so."""
    lost = timezone.now() - timedelta(seconds=BACKGROUND_LIMITS["time_limit"])
    for model in KINDS:
        model.objects.filter(project_id=project_id, status=SimulationStatus.RUNNING, started_at__lt=lost).update(
            status=SimulationStatus.FAILED, error="WorkerLost", finished_at=timezone.now())


def _requeue(model: type[BackgroundRun], pk: int, kind: _Kind | None, *, at_once: bool = False) -> None:
    if kind is None:
        raise RuntimeError(f"{model.__name__} is not a registered kind of background run")
    countdown = 0.0 if at_once else random.uniform(*REQUEUE_SECONDS)
    background_enqueue(kind.task, pk, countdown=countdown)
