"""One project's queued simulations never hold another's back (issue 24, item 6), with a real
Celery worker of two processes, as compose's simulator runs, on the real broker and database.

Project A asks for ten simulations, and each of its runs is held mid-start (its row locked by
another session, as a long replay holds its process). Before project slots, A's first two runs
took both processes and B's run waited behind all ten; now A holds one slot
(SIMULATIONS_PER_PROJECT=1), its other runs go back to the queue pending and say so, and B's run
finishes. Once A's lock is gone its runs finish one at a time."""

from __future__ import annotations

import signal
from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from tests.e2e.conftest import WorkerProcess, wait_for
from tests.factories import make_project
from tests.policies.test_background_fairness import record_sessions
from tests.workers.database import other_connection
from toolscope.policies.models import Simulation, SimulationStatus
from toolscope.policies.services.background import background_queue_position
from toolscope.policies.services.simulation_runs import SessionSelection, simulation_document, simulation_start

pytestmark = pytest.mark.slow

RUNS_OF_A = 10


def recorded(slug: str):
    return record_sessions(make_project(slug))


def simulate(project, limit: int) -> Simulation:
    """Queued on commit (transactional_db): its message goes to the test's queue at once."""
    document, source = simulation_document(project=project, draft=True)
    end = timezone.now()
    selection = SessionSelection(start=end - timedelta(days=1), end=end, limit=limit)
    return simulation_start(project=project, document=document, source=source, selection=selection)[0]


def statuses(project) -> list[str]:
    return list(Simulation.objects.filter(project=project).order_by("pk").values_list("status", flat=True))


def test_another_projects_run_finishes_while_one_project_holds_the_simulator(
        ingest_queue, transactional_db, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMULATIONS_PER_PROJECT", "1")
    monkeypatch.setenv("SIMULATION_QUEUE", ingest_queue)  # where the worker sends a waiting run back
    a, b = recorded("project-a"), recorded("project-b")
    runs_of_a = [simulate(a, limit) for limit in range(1, RUNS_OF_A + 1)]
    with other_connection() as holder:
        # A's runs cannot start (their rows are locked) until the holder lets go.
        holder.execute("SELECT id FROM policies_simulation WHERE project_id = %s FOR UPDATE", [a.pk])
        run_of_b = simulate(b, 1)  # queued behind all of A's
        worker = WorkerProcess(ingest_queue, tmp_path / "simulator.log", concurrency=2).start()
        try:
            wait_for(lambda: statuses(b) == [SimulationStatus.DONE], 60,
                     f"B's run to finish while A's are held; A: {statuses(a)}\n{worker.log.read_text()[-3000:]}")
            # A holds one process: one run started, the others wait, pending, and say how many are ahead.
            assert sorted(statuses(a)) == [SimulationStatus.PENDING] * RUNS_OF_A
            last = Simulation.objects.get(pk=runs_of_a[-1].pk)
            assert background_queue_position(last) == RUNS_OF_A - 1
            holder.rollback()
            wait_for(lambda: statuses(a) == [SimulationStatus.DONE] * RUNS_OF_A, 120,
                     f"A's runs to finish; A: {statuses(a)}\n{worker.log.read_text()[-3000:]}")
        finally:
            worker.kill(signal.SIGTERM)
    assert Simulation.objects.get(pk=run_of_b.pk).result["sessions"] == 1
    # One at a time, in the order asked for: no two of A's runs overlapped.
    spans = list(Simulation.objects.filter(project=a).order_by("pk").values_list("started_at", "finished_at"))
    assert all(earlier[1] <= later[0] for earlier, later in pairwise(spans)), spans
