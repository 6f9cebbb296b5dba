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
flight and arms the watchdog for the earliest: with several threads per worker, a stream of quick
requests never postpones a stuck one. A worker that exits takes the requests it was serving
with it; the compose stack runs one Django thread per worker (`--blocking-threads 1`).

Off (0) outside production, so a debugger paused in `runserver` or a test never ends its process.
"""

from __future__ import annotations

import faulthandler
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

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
