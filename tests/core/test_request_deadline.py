"""Web requests have a time limit (toolscope/deadline.py): a request still running at its deadline
ends its worker process, even while C code holds the GIL, and granian starts a new worker.

No assertion measures time: a limit that does not work leaves a request that never finishes
(a backtracking regex on 64 characters), which the bounded waits below turn into a failure."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from django.test import override_settings

from toolscope.deadline import DEADLINES, request_deadline

REPO = Path(__file__).resolve().parents[2]
# Python's `re` backtracks 2^64 times on this: no test run outlives it.
NEVER_ENDS = 're.search(r"(a+)+b", "a" * 64)'


def test_the_limit_is_off_outside_production_and_60_seconds_in_it():
    code = "from django.conf import settings; print(settings.WEB_REQUEST_TIMEOUT)"
    env = {key: value for key, value in os.environ.items() if key != "WEB_REQUEST_TIMEOUT"}
    production = {**env, "TOOLSCOPE_ENV": "production", "DEBUG": "false", "SECRET_KEY": "k" * 50,
                  "DATABASE_URL": "postgres://x@127.0.0.1:5432/x", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}
    for environ, expected in ((env, "0"), (production, "60"), ({**production, "WEB_REQUEST_TIMEOUT": "5"}, "5")):
        result = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=REPO,
                                env={**environ, "DJANGO_SETTINGS_MODULE": "toolscope.settings"},
                                capture_output=True, text=True, check=True)
        assert result.stdout.strip() == expected


def test_the_wrapper_tracks_a_request_only_while_it_runs():
    seen = []

    def app(environ, start_response):
        seen.append(DEADLINES.in_flight())
        return [b"body"]

    with override_settings(WEB_REQUEST_TIMEOUT=600):
        limited = request_deadline(app)
    assert limited is not app
    assert limited({}, lambda *args: None) == [b"body"]
    assert seen == [1]
    assert DEADLINES.in_flight() == 0


def test_the_wrapper_is_left_out_when_the_limit_is_off():
    def app(environ, start_response):
        return []

    with override_settings(WEB_REQUEST_TIMEOUT=0):
        assert request_deadline(app) is app


def test_the_production_application_is_wrapped_around_everything_else():
    # Outside Django's MIDDLEWARE, which api/fastpath.py compares with the list it replays.
    code = ("from django.conf import settings; import toolscope.wsgi as w\n"
            "print(w.application.__qualname__, any('deadline' in m for m in settings.MIDDLEWARE))")
    env = {**os.environ, "TOOLSCOPE_ENV": "production", "DEBUG": "false", "SECRET_KEY": "k" * 50,
           "DATABASE_URL": "postgres://x@127.0.0.1:5432/x", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
           "WEB_REQUEST_TIMEOUT": "30"}
    env.pop("CACHE_URL", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["request_deadline.<locals>.limited", "False"]


def test_a_request_stuck_in_c_code_ends_its_process_at_the_deadline():
    code = textwrap.dedent(f"""
        import re, threading
        from toolscope.deadline import DEADLINES
        def request():
            DEADLINES.start(1)
            {NEVER_ENDS}
        thread = threading.Thread(target=request)
        thread.start()
        thread.join()
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("Timeout (")
    assert "in request" in result.stderr


def test_finished_requests_do_not_end_the_process_and_quick_ones_do_not_postpone_a_stuck_one():
    code = textwrap.dedent(f"""
        import re, sys, threading, time
        from toolscope.deadline import DEADLINES
        DEADLINES.finish(DEADLINES.start(1))
        time.sleep(1.5)  # past the first request's deadline: it finished, so nothing happens
        print("alive", flush=True)
        stuck = threading.Thread(target=lambda: (DEADLINES.start(2), {NEVER_ENDS}))
        stuck.start()
        for _ in range(1000):  # quick requests keep coming; the stuck one still ends the process
            DEADLINES.finish(DEADLINES.start(30))
            time.sleep(0.01)
        print("survived", flush=True)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["alive"]
    assert result.returncode == 1


APP = '''
import os, re

from django.conf import settings

settings.configure(DEBUG=False, SECRET_KEY="k" * 50, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
                   MIDDLEWARE=[], WEB_REQUEST_TIMEOUT=1)

from django.core.wsgi import get_wsgi_application
from django.http import HttpResponse
from django.urls import path

from toolscope.deadline import request_deadline


def ok(request):
    return HttpResponse(str(os.getpid()))


def hang(request):
    {never_ends}
    return HttpResponse("never")


urlpatterns = [path("ok", ok), path("hang", hang)]
application = request_deadline(get_wsgi_application())
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pid_of_worker(base: str, server: subprocess.Popen) -> str:
    for _ in range(300):
        assert server.poll() is None, "granian exited"
        try:
            return httpx.get(f"{base}/ok", timeout=10).text
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("granian never answered /ok")


@pytest.mark.slow
def test_granian_replaces_the_worker_of_a_request_past_its_deadline(tmp_path):
    (tmp_path / "hangapp.py").write_text(APP.format(never_ends=NEVER_ENDS))
    port, log = _free_port(), tmp_path / "granian.log"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(REPO / ".venv/bin/granian"), "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1", "--blocking-threads", "1", "--respawn-failed-workers", "hangapp:application"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        first = _pid_of_worker(base, server)
        with pytest.raises(httpx.RemoteProtocolError):  # the connection closes with its worker
            httpx.get(f"{base}/hang", timeout=60)
        assert _pid_of_worker(base, server) != first
        text = log.read_text()
        assert "Timeout (" in text
        assert "in hang" in text
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
