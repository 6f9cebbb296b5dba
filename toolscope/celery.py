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


@worker_init.connect
def _worker_database(**kwargs: Any) -> None:
    """A worker's PostgreSQL sessions commit asynchronously unless WORKER_SYNCHRONOUS_COMMIT (see
    settings). Runs in the main process before the pool forks, so every pool process inherits it;
    the option travels in the connection's startup packet, costing no query."""
    from django.conf import settings
    from django.db import connections

    database = settings.DATABASES["default"]
    if settings.WORKER_SYNCHRONOUS_COMMIT or database["ENGINE"] != "django.db.backends.postgresql":
        return
    options = database.setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()
    connections.close_all()  # one opened before this point would keep the old setting


@worker_init.connect
def _worker_tokenizer(**kwargs: Any) -> None:
    """Load the default encoding before the pool forks: pool processes share it instead of each
    spending a second on it in its first batch."""
    from toolscope.telemetry.models import Encoding
    from toolscope.tokenizer import counter

    counter(Encoding.O200K_BASE)  # the projects' default


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
