"""A page's background work (simulations, recommendations): queued by task name, run once.

Services enqueue by name through toolscope.tasks, so none imports a task module (workers ->
services, one way). The runs are
`BackgroundRun` rows: claimed pending -> running with a conditional UPDATE (a second delivery
of the task does nothing), and ended done (with the result) or failed (with the error's type).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from toolscope.policies.models import BackgroundRun, SimulationStatus
from toolscope.tasks import task_send

logger = logging.getLogger(__name__)

Run = TypeVar("Run", bound=BackgroundRun)


def background_enqueue(task_name: str, *args: Any) -> None:
    """Send `task_name(*args)` to the simulation queue (settings.SIMULATION_QUEUE)."""
    task_send(task_name, *args, queue=settings.SIMULATION_QUEUE)


def background_run(model: type[Run], pk: int, work: Callable[[Run], dict[str, Any] | None]) -> Run | None:
    """Claim the pending run `pk` and do `work` on it: its answer is the result (None: it was
    cancelled midway). None when the run is gone or another worker has it."""
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
        model.objects.filter(pk=pk, status=SimulationStatus.RUNNING).update(
            status=SimulationStatus.DONE, result=result, finished_at=timezone.now())
    run.refresh_from_db()
    return run
