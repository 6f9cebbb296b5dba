"""The Celery application. Configuration comes from Django settings prefixed CELERY_.

Surviving the broker: a worker or beat that loses Redis retries forever
(CELERY_BROKER_CONNECTION_MAX_RETRIES = None) and resumes by itself; a batch accepted meanwhile
waits in PostgreSQL for the sweeper. celery is pinned to 5.6.3 (requirements.txt): a 5.7.0
worker exits on a Redis disconnect while it holds unacknowledged messages. 5.7.0 collects the
broken connection, then also closes it; that close restores the consumer channel's unacknowledged
messages through a new Redis pool built from the transport that collecting already detached, and
the AttributeError it raises ('NoneType' object has no attribute 'hostname') is unrecoverable.
tests/e2e/test_broker_outage.py stops Redis for 30 s under a running worker and fails on it.
"""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")

app = Celery("toolscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])


# How often a worker's PostgreSQL backend checks, while it runs a query or waits on a lock, that
# the worker is still there (ms): a pool process ended at its hard time limit (toolscope/deadline.py)
# takes its transaction and its project's lock with it within this time, not when the query ends.
CLIENT_CONNECTION_CHECK_MS = 1000


@worker_init.connect
def _worker_database(**kwargs: Any) -> None:
    """A worker's PostgreSQL sessions commit asynchronously unless WORKER_SYNCHRONOUS_COMMIT (see
    settings), and check for a lost client (CLIENT_CONNECTION_CHECK_MS). Runs in the main process
    before the pool forks, so every pool process inherits it; the options travel in the
    connection's startup packet, costing no query."""
    from django.conf import settings
    from django.db import connections

    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        return
    extra = f"-c client_connection_check_interval={CLIENT_CONNECTION_CHECK_MS}"
    if not settings.WORKER_SYNCHRONOUS_COMMIT:
        extra += " -c synchronous_commit=off"
    options = database.setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} {extra}".strip()
    connections.close_all()  # one opened before this point would keep the old setting


@worker_init.connect
def _worker_tokenizer(**kwargs: Any) -> None:
    """Load the default encoding before the pool forks: pool processes share it instead of each
    spending a second on it in its first batch."""
    from toolscope.telemetry.models import Encoding
    from toolscope.tokenizer import counter

    counter(Encoding.O200K_BASE)  # the projects' default


@task_prerun.connect
def _task_deadline_start(**kwargs: Any) -> None:
    """The task's time limits, kept by the pool process itself (toolscope/deadline.py): Celery's
    are timers of the main process, which stop while it reconnects to a lost broker."""
    task = kwargs.get("task")
    if task is None or task.request.is_eager:
        return
    from toolscope.deadline import TASK_DEADLINE, task_limits

    TASK_DEADLINE.start(*task_limits(task))


@task_postrun.connect
def _task_deadline_finish(**kwargs: Any) -> None:
    from toolscope.deadline import TASK_DEADLINE

    TASK_DEADLINE.finish()


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(**kwargs: Any) -> None:
    """What Django does around a request: drop a connection that broke or outlived CONN_MAX_AGE,
    keep a healthy one (a new connection per task costs more than small tasks do)."""
    task = kwargs.get("task")
    if task is not None and task.request.is_eager:  # inside the caller's request and transaction
        return
    from django.db import close_old_connections

    close_old_connections()
