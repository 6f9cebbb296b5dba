"""Celery tasks keep their time limits in the pool process itself (toolscope/deadline.py), not only
as timers of the worker's main process, which stop while it reconnects to a lost broker (issue 24,
item 6; tests/e2e/test_time_limit_outage.py runs it with Redis down).

No assertion measures time: a limit that does not work leaves a task that never ends (a
backtracking regex holding the GIL), which the bounded waits turn into a failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from toolscope.deadline import TASK_DEADLINE

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def deadline():
    yield TASK_DEADLINE
    TASK_DEADLINE.finish()


def test_the_soft_limit_raises_in_the_task_once(deadline):
    deadline.start(0.2, None)
    with pytest.raises(SoftTimeLimitExceeded):
        time.sleep(30)
    # Celery's own soft-limit signal (SIGUSR1 from the main process) arriving too is not raised again.
    os.kill(os.getpid(), signal.SIGUSR1)
    time.sleep(0.05)
    deadline.finish()
    os.kill(os.getpid(), signal.SIGUSR1)  # nor between tasks
    time.sleep(0.05)


def test_a_task_that_ends_in_time_is_not_interrupted_later(deadline):
    deadline.start(0.2, None)
    deadline.finish()
    time.sleep(0.4)  # the timer was disarmed: nothing is raised here


def test_the_hard_limit_ends_the_process_even_inside_c_code():
    # A task that never gets back to the interpreter (or that swallowed its soft limit) is ended
    # by the watchdog, a C thread, a moment after its hard limit.
    code = textwrap.dedent("""
        import re
        from toolscope.deadline import TASK_DEADLINE
        TASK_DEADLINE.start(None, 1)
        re.search(r"(a+)+b", "a" * 64)
        print("finished")
    """)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "toolscope.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "finished" not in done.stdout
    assert "Timeout (0:00:03)!" in done.stderr and "File" in done.stderr  # its traceback, for the log
