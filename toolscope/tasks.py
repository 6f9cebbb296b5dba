"""Sending work to the Celery workers by task name: how services enqueue.

The workers import the services (workers.tasks calls them); a service that imported a task module
back would close an import circle. So services name the task ("workers.process_batch") and this
module looks it up in the Celery app, importing the app's task modules first when this process
(a web process) has not needed them yet. tests/core/test_import_layers.py (import-linter) keeps the
services from importing workers, api or dashboard.
"""

from __future__ import annotations

from typing import Any

from celery import current_app


def task_send(name: str, *args: Any, queue: str, **options: Any) -> None:
    """`name(*args)` onto `queue`; raises what the broker raises (callers decide)."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    current_app.tasks[name].apply_async(args, queue=queue, **options)
