"""A task's time limit holds while the broker is down (issue 24, item 6): a batch ran 338 s against
a 150 s hard limit during a Redis outage, in one transaction holding its project's lock, because
Celery's limits are timers of the worker's main process and that process sits in kombu's
reconnection loop until Redis is back. Pool processes now keep their task's limits themselves
(toolscope/deadline.py).

A real stack (a private redis-server, gunicorn, a Celery worker of two processes and beat) with a
3 s soft and 6 s hard limit: a batch waits inside its transaction on a row the test holds, Redis
is stopped, and within the limits the batch's attempt is given up: its transaction rolled back,
its project's lock released, the batch pending again with the reason. Redis comes back and the
sweeper delivers it again: it is stored once."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.stack import Stack
from tests.e2e.test_nothing_lost import all_done, batch_held_mid_processing
from tests.workers.database import other_connection
from toolscope.telemetry.models import BatchStatus, IngestBatch, ToolCall

pytestmark = pytest.mark.slow

SOFT, HARD = 3, 6
PROJECT_LOCKS = 0x7473_0001  # processing's advisory locks: (0x7473_0001 << 32) + project id


@pytest.fixture
def stack(transactional_db, tmp_path):
    running = Stack(tmp_path, queue=f"e2e-{uuid.uuid4().hex[:10]}", worker_concurrency=2)
    running.env.update(CELERY_TASK_SOFT_TIME_LIMIT=str(SOFT), CELERY_TASK_TIME_LIMIT=str(HARD))
    try:
        yield running.start()
    except Exception:
        print(running.describe())  # noqa: T201 - shown by pytest only when the test fails
        raise
    finally:
        running.stop()


def project_locks_held() -> int:
    with other_connection(autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
                            [PROJECT_LOCKS]).fetchone()[0]


def test_the_time_limit_applies_while_redis_is_down(stack):
    with batch_held_mid_processing(stack, "slow", 100) as (blocker, _):
        assert project_locks_held() == 1  # the worker holds the project, waiting on the test's row
        stack.redis.stop()
        wait_for(lambda: "Connection to broker lost" in stack.worker.log.read_text(), 30,
                 "the worker to notice the broker is gone")
        lost = time.monotonic()
        # Within the limits (and PostgreSQL's check for a lost client), Redis still down: the
        # attempt is given up, its transaction and the project's lock gone.
        wait_for(lambda: not IngestBatch.objects.filter(status=BatchStatus.PROCESSING).exists()
                 and project_locks_held() == 0, HARD + 10,
                 f"the batch's attempt to end within its time limit\n{stack.describe()}")
        assert time.monotonic() - lost < HARD + 10
        batch = IngestBatch.objects.get()
        assert batch.status == BatchStatus.PENDING and "TimeLimit" in batch.error, batch.error
        assert ToolCall.objects.count() == 0  # nothing of the attempt was committed
        assert stack.worker.popen.poll() is None, stack.describe()
        blocker.rollback()

    stack.start_redis()
    wait_for(lambda: all_done(1), 60, f"the batch to be delivered again and processed\n{stack.describe()}")
    batch = IngestBatch.objects.get()
    assert batch.attempts >= 2
    assert ToolCall.objects.count() == ToolCall.objects.values("client_id").distinct().count() == 100
