"""Hard time limits on web requests and on Celery tasks (the second part, below).

A hard time limit on web requests: a request still running WEB_REQUEST_TIMEOUT seconds after it
started ends its web worker process, which granian respawns (`--respawn-failed-workers`).

Why the whole process: Python cannot stop a thread, and granian runs Django in threads. Worse, a
request stuck inside C code that holds the GIL (a backtracking regex, a huge parse) never returns
to the interpreter, so no Python-level watchdog (a signal handler, a timer thread) even runs.
faulthandler's watchdog is a C thread that needs no GIL: at the deadline it writes every thread's
traceback to stderr (the worker's log, starting "Timeout (h:mm:ss)!") and calls `_exit(1)`. The
client gets its connection closed; granian logs "Unexpected exit from worker" and starts a new
worker. gunicorn's worker `--timeout` does the same with SIGKILL from its arbiter.

faulthandler has one watchdog per process, so the module keeps the deadlines of the requests in
flight and arms the watchdog for the earliest: with several threads per worker, a stream of quick
requests never postpones a stuck one. A worker that exits takes the requests it was serving
with it; the compose stack runs one Django thread per worker (`--blocking-threads 1`).

Off (0) outside production, so a debugger paused in `runserver` or a test never ends its process.
"""

from __future__ import annotations

import faulthandler
import itertools
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Deadlines:
    """The deadlines of the requests in flight in this process, and the watchdog armed for the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._pending: dict[int, float] = {}

    def start(self, seconds: float) -> int:
        with self._lock:
            token = next(self._tokens)
            self._pending[token] = time.monotonic() + seconds
            self._arm()
        return token

    def finish(self, token: int) -> None:
        with self._lock:
            self._pending.pop(token, None)
            self._arm()

    def in_flight(self) -> int:
        return len(self._pending)

    def _arm(self) -> None:
        if not self._pending:
            faulthandler.cancel_dump_traceback_later()
            return
        # A deadline already past still gets its traceback and exit, right away.
        remaining = max(min(self._pending.values()) - time.monotonic(), 0.001)
        faulthandler.dump_traceback_later(remaining, exit=True)


DEADLINES = Deadlines()


def request_deadline(app: WSGIApp) -> WSGIApp:
    """The WSGI application with the limit around it, or `app` itself when the limit is off.

    It wraps toolscope.wsgi's whole application (the policy-poll layer and Django), so nothing
    a request runs escapes it. It covers the call that builds the response; the body of a
    streaming response is sent after it, unlimited (no view streams one).
    """
    seconds = settings.WEB_REQUEST_TIMEOUT
    if not seconds:
        return app

    def limited(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        token = DEADLINES.start(seconds)
        try:
            return app(environ, start_response)
        finally:
            DEADLINES.finish(token)

    return limited


# --- Celery tasks ------------------------------------------------------------------------------
#
# Celery's time limits are timers of the worker's main process: at the soft limit it signals the
# pool process (SIGUSR1: SoftTimeLimitExceeded in the task), at the hard limit it kills it. Those
# timers run in the main process's event loop, and when the broker connection drops the main
# process leaves that loop for kombu's reconnection loop (celery.worker.consumer.Consumer.start ->
# ensure_connected, retrying without limit) until the broker is back: no timer fires. During a
# Redis outage a batch ran 338 s against a 150 s hard limit, in its transaction, holding its
# project's lock (issue 24, item 6). So each pool process also keeps its task's limits itself,
# whatever its main process does:
#
# - soft: an interval timer (SIGALRM) raises SoftTimeLimitExceeded in the task, which fails the
#   attempt as Celery's would (the transaction rolls back, the project's lock is released, the
#   batch is retried). Celery's own SIGUSR1 goes to the same handler: a task is told once.
# - hard: faulthandler's watchdog, a C thread that needs no GIL, ends the process (its traceback in
#   the log) a moment after the hard limit, even in C code that never returns to the interpreter.
#   PostgreSQL ends the dead process's session, its transaction and its locks with it: workers
#   connect with client_connection_check_interval (toolscope/celery.py), so a backend busy or
#   waiting on a lock notices the lost client within a second. Celery's main process then reports
#   the lost worker and, with late acknowledgement, the message is delivered again.

HARD_GRACE_SECONDS = 2.0  # Celery's own hard limit, when its main process runs, comes first


class TaskDeadline:
    """The limits of the task running in this (pool) process."""

    def __init__(self) -> None:
        self.armed = False
        self.expired = False

    def start(self, soft: float | None, hard: float | None) -> None:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            return
        self.expired = False
        signal.signal(signal.SIGALRM, self._soft_limit)
        if SIG_SOFT is not None:
            signal.signal(SIG_SOFT, self._soft_limit)
        if soft:
            signal.setitimer(signal.ITIMER_REAL, soft)
        if hard:
            # The process's real standard error: a Celery worker's sys.stderr is a logging proxy.
            faulthandler.dump_traceback_later(hard + HARD_GRACE_SECONDS, exit=True, file=sys.__stderr__ or sys.stdout)
        self.armed = True

    def finish(self) -> None:
        if not self.armed:
            return
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()

    def _soft_limit(self, signum: int, frame: Any) -> None:
        if self.expired or not self.armed:  # once per task
            return
        self.expired = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise SoftTimeLimitExceeded(f"soft time limit exceeded (signal {signum})")


SIG_SOFT = getattr(signal, "SIGUSR1", None)  # billiard's soft-limit signal
TASK_DEADLINE = TaskDeadline()


def task_limits(task: Any) -> tuple[float | None, float | None]:
    """(soft, hard) seconds of a task as Celery's pool applies them: the message's, else the task's,
    else the app's."""
    hard, soft = task.request.timelimit or (None, None)
    hard = hard or task.time_limit or task.app.conf.task_time_limit
    soft = soft or task.soft_time_limit or task.app.conf.task_soft_time_limit
    return soft, hard
