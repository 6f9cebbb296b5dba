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

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import redis
from celery import Celery
from psycopg import sql

from tests.deploy import recipe

pytestmark = pytest.mark.slow

LOCK_FILE = Path("/tmp/toolscope-compose-test.lock")
# Redis databases the stack may take over (and flush), skipping any the test run itself uses.
SPARE_REDIS_DBS = (12, 13, 14, 10, 9, 8, 7)
START_TIMEOUT = 60.0
HEARTBEAT_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _postgres_server() -> str:
    """scheme://user@host:port of the PostgreSQL the test run uses."""
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql") and parts.hostname:
        return f"postgresql://{parts.netloc}"
    return "postgresql://postgres@127.0.0.1:5432"


def _redis_server() -> tuple[str, set[int]]:
    """redis://host:port of the Redis the test run uses, and the database numbers it uses there."""
    broker = urlsplit(os.environ.get("CELERY_BROKER_URL", ""))
    netloc = broker.netloc if broker.scheme == "redis" and broker.hostname else "127.0.0.1:6379"
    used = set()
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL"):
        parts = urlsplit(os.environ.get(name, ""))
        if parts.scheme == "redis" and parts.netloc == netloc:
            used.add(int(parts.path.lstrip("/") or 0))
    return f"redis://{netloc}", used


@contextlib.contextmanager
def _exclusive(timeout: float = 180.0) -> Iterator[None]:
    """One compose stack per machine at a time: the Redis database numbers are shared."""
    with LOCK_FILE.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another compose test held {LOCK_FILE} for {timeout:.0f} s")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _fresh_database(server: str) -> Iterator[str]:
    name = f"toolscope_compose_{secrets.token_hex(4)}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgres://{urlsplit(server).netloc}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def _flushed_redis(urls: list[str]) -> Iterator[None]:
    def flush() -> None:
        for url in urls:
            client = redis.Redis.from_url(url)
            try:
                client.flushdb()
            finally:
                client.close()

    flush()
    try:
        yield
    finally:
        flush()


def _localize(env: dict[str, str], database_url: str, redis_urls: dict[str, str]) -> dict[str, str]:
    """Service hostnames `postgres` and `redis` become the local servers."""
    localized = {}
    for key, value in env.items():
        parts = urlsplit(value) if "://" in value else None
        if parts is not None and parts.hostname == "postgres":
            value = database_url
        elif parts is not None and parts.hostname == "redis":
            value = redis_urls[parts.path.lstrip("/") or "0"]
        localized[key] = value
    for key, value in localized.items():
        assert "@postgres" not in value, f"{key}={value} still names a service"
        assert "//redis" not in value, f"{key}={value} still names a service"
    return localized


class Stack:
    """The processes, their environments and their logs."""

    def __init__(self, compose: dict[str, Any], log_dir: Path, port: int) -> None:
        self.compose = compose
        self.log_dir = log_dir
        self.port = port
        self.envs: dict[str, dict[str, str]] = {}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.envs[name] = env
        with (self.log_dir / f"{name}.log").open("wb") as log:
            self.processes[name] = subprocess.Popen(
                argv,
                cwd=recipe.REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def run_once(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        """A one-shot service: run to the end; it must succeed (service_completed_successfully)."""
        self.envs[name] = env
        done = subprocess.run(argv, cwd=recipe.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=START_TIMEOUT, check=False)
        (self.log_dir / f"{name}.log").write_bytes(done.stdout + done.stderr)
        assert done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr.decode()[-2000:]}"

    def stop(self) -> None:
        """Ends every process group: SIGTERM, a short grace, then SIGKILL."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def logs(self, lines: int = 40) -> str:
        out = []
        for name in self.processes:
            text = (self.log_dir / f"{name}.log").read_text(errors="replace").splitlines()
            out.append(f"----- {name} (last {lines} lines) -----\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def assert_running(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                pytest.fail(f"{name} exited with {process.returncode}\n{self.logs()}")

    def readyz(self) -> tuple[int, dict[str, Any]] | None:
        url = f"http://127.0.0.1:{self.port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def poll_readyz(self, done: Callable[[int, dict[str, Any]], bool], timeout: float, what: str):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self.assert_running()
            last = self.readyz()
            if last is not None and done(*last):
                return last[1]
            time.sleep(0.25)
        pytest.fail(f"{what} within {timeout:.0f} s; last /readyz: {last}\n{self.logs()}")


def _with_schedule_in(argv: list[str], directory: Path) -> list[str]:
    """beat's schedule file moves from the container's /tmp to the test's own folder."""
    argv = list(argv)
    for flag in ("--schedule", "-s"):
        if flag in argv:
            assert argv[argv.index(flag) + 1].startswith("/tmp/")
            argv[argv.index(flag) + 1] = str(directory / "celerybeat-schedule")
            return argv
    raise AssertionError(f"beat command has no --schedule: {argv}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    port = _free_port()
    secret_key = secrets.token_urlsafe(50)
    compose = recipe.load_compose(
        {
            "SECRET_KEY": secret_key,
            "POSTGRES_PASSWORD": "compose-test-password",
            "WORKER_HEARTBEAT_SECONDS": "1",
            "WEB_CONCURRENCY": "2",
            "WORKER_CONCURRENCY": "2",
        }
    )
    redis_server, used = _redis_server()
    spare = [db for db in SPARE_REDIS_DBS if db not in used]
    # Each Redis database the recipe names gets a spare local one of its own.
    named = sorted(
        {
            urlsplit(value).path.lstrip("/") or "0"
            for name in recipe.APP_SERVICES
            for value in recipe.service_environment(compose["services"][name]).values()
            if "://" in value and urlsplit(value).hostname == "redis"
        }
    )
    redis_urls = {db: f"{redis_server}/{spare[i]}" for i, db in enumerate(named)}

    home = tmp_path / "home"
    home.mkdir()
    base_env = {
        **recipe.dockerfile_env(),
        "PATH": f"{recipe.VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }
    overrides = {
        "PORT": str(port),
        "GRANIAN_HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "2",
        "WORKER_HEARTBEAT_SECONDS": "1",
    }

    with contextlib.ExitStack() as cleanup:
        cleanup.enter_context(_exclusive())
        database_url = cleanup.enter_context(_fresh_database(_postgres_server()))
        cleanup.enter_context(_flushed_redis(list(redis_urls.values())))
        running = Stack(compose, tmp_path, port)
        cleanup.callback(running.stop)
        for name in recipe.APP_SERVICES:
            service = compose["services"][name]
            env = {**base_env, **_localize(recipe.service_environment(service), database_url, redis_urls), **overrides}
            argv = recipe.as_argv(service["command"])
            if name == "beat":
                argv = _with_schedule_in(argv, tmp_path)
            if name == "migrate":
                running.run_once(name, argv, env)  # compose starts the others once it has exited 0
                continue
            running.start(name, argv, env)
        yield running


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
