"""docker-compose.yml's migrate, web, worker and beat, run as local processes, work together.

The test takes each service's `command` and `environment` from docker-compose.yml (the shared
anchor resolved, `${...}` filled with test values), points the service hostnames at the local
PostgreSQL and Redis, runs the one-shot migrate command to its end, then starts the other three
commands as they are. A fresh database and spare Redis
databases keep it apart from everything else; it manages them itself (no pytest-django database).

It proves: the web server (granian) comes up on the port that PORT gives it (on loopback:
GRANIAN_HOST) once migrate has migrated a fresh database, /readyz reports the database and the broker, a
task sent through the broker comes back from the worker with the database it reached, beat's
heartbeat reaches the worker and the shared cache (/readyz reports it), and the web and worker
healthchecks pass.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from celery import Celery

from tests.deploy import recipe
from tests.deploy.conftest import HEARTBEAT_TIMEOUT, START_TIMEOUT, Stack

pytestmark = pytest.mark.slow


def test_compose_stack_serves_queues_and_beats(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()

    # migrate ran on a fresh database; web serves on the port from the environment.
    ready = stack.poll_readyz(lambda status, _: status == 200, START_TIMEOUT, "web did not become ready")
    checks = ready["checks"]
    assert ready["status"] == "ready"
    assert checks["database"]["ok"] is True
    assert checks["database"]["vendor"] == "postgresql"
    assert checks["broker"]["ok"] is True
    assert checks["broker"]["mode"] == "broker"

    # worker: a task through the broker and back through the result backend. Celery lets the
    # CELERY_BROKER_URL / CELERY_RESULT_BACKEND variables of this test run override the URLs
    # given here, which would send the task to the test run's broker instead.
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.delenv("CELERY_RESULT_BACKEND", raising=False)
    web_env = stack.envs["web"]
    client = Celery(
        "compose-test-client",
        broker=web_env["CELERY_BROKER_URL"],
        backend=web_env["CELERY_RESULT_BACKEND"],
        set_as_current=False,
    )
    client.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
    )
    try:
        reply = client.send_task("workers.ping").get(timeout=30)
    except Exception as exc:  # say why, with what the processes said
        client.close()
        pytest.fail(f"workers.ping did not come back: {exc!r}\n{stack.logs()}")
    assert reply["pong"] and reply["node"].startswith("celery@")
    assert reply["database"] == "postgresql"
    # Worker sessions commit asynchronously (settings.WORKER_SYNCHRONOUS_COMMIT); the sweeper
    # covers a commit lost in a database crash.
    assert reply["synchronous_commit"] == "off"

    # simulator: simulations and recommendations have a queue and a process of their own.
    assert web_env["SIMULATION_QUEUE"] == "simulations"
    try:
        replayer = client.send_task("workers.ping", queue="simulations").get(timeout=30)
    except Exception as exc:
        pytest.fail(f"workers.ping on the simulations queue did not come back: {exc!r}\n{stack.logs()}")
    finally:
        client.close()
    assert replayer["node"].startswith("simulator@") and replayer["database"] == "postgresql"

    # beat -> broker -> worker -> shared cache, as /readyz reports it.
    ready = stack.poll_readyz(
        lambda status, body: status == 200 and body["checks"]["worker"].get("last_heartbeat_seconds_ago") is not None,
        HEARTBEAT_TIMEOUT,
        "no worker heartbeat reached /readyz",
    )
    assert ready["checks"]["worker"]["ok"] is True
    assert ready["checks"]["worker"]["last_heartbeat_seconds_ago"] < 10

    # The healthchecks docker runs inside the web and worker containers pass here too.
    services = stack.compose["services"]
    web_check = subprocess.run(
        recipe.healthcheck_argv(services["web"]),
        cwd=recipe.REPO_ROOT,
        env=web_env,
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert web_check.returncode == 0, web_check.stderr
    for name in ("worker", "simulator"):
        check = subprocess.run(
            # Node names are celery@ and simulator@<hostname>; docker sets HOSTNAME in the container.
            recipe.healthcheck_argv(services[name]),
            cwd=recipe.REPO_ROOT,
            env={**stack.envs[name], "HOSTNAME": socket.gethostname()},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert check.returncode == 0, name + check.stdout + check.stderr + stack.logs()

    stack.assert_running()
    assert time.monotonic() - started < 60
