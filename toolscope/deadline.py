"""A hard time limit on web requests: a request still running WEB_REQUEST_TIMEOUT seconds after it
started ends its web worker process, which granian respawns (`--respawn-failed-workers`).

Why the whole process: Python cannot stop a thread, and granian runs Django in threads. Worse, a
request stuck inside C code that holds the GIL (a backtracking regex, a huge parse) never returns
to the interpreter, so no Python-level watchdog (a signal handler, a timer thread) even runs.
faulthandler's watchdog is a C thread that needs no GIL: at the deadline it writes every thread's
traceback to stderr (the worker's log, starting "Timeout (h:mm:ss)!") and calls `_exit(1)`. The
client gets its connection closed; granian logs "Unexpected exit from worker" and starts a new
worker. gunicorn's worker `--timeout` does the same with SIGKILL from its arbiter.

faulthandler has one watchdog per process, so the module keeps the deadlines of the requests in
flight and arms the watchdog for the earliest: with several Django threads per worker, a stream of
quick requests never postpones a stuck one. A worker that exits takes the requests it was serving
with it; the compose stack runs one Django thread per worker (`--blocking-threads 1`).

Off (0) outside production, so a debugger paused in `runserver` or a test never ends its process.
"""

from __future__ import annotations

import faulthandler
import itertools
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse


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


class RequestDeadlineMiddleware:
    """First in MIDDLEWARE, so the limit covers every other middleware too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.seconds = settings.WEB_REQUEST_TIMEOUT
        if not self.seconds:
            raise MiddlewareNotUsed

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = DEADLINES.start(self.seconds)
        try:
            return self.get_response(request)
        finally:
            DEADLINES.finish(token)
