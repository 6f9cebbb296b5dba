"""The compose stack run as local processes: docker-compose.yml's migrate, web, worker, simulator and
beat, each with its own command and environment from the recipe (the shared anchor resolved,
`${...}` filled with test values), the service hostnames pointed at the local PostgreSQL and
Redis, on a fresh database and spare Redis databases (no pytest-django database).

`stack` runs migrate to its end and starts the others; tests/deploy/test_compose.py proves they
work together, tests/deploy/test_attacks.py attacks them (issue 24).
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
from psycopg import sql

from tests.deploy import recipe

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


def create_key(stack: Stack, slug: str, scopes: tuple[str, ...] = ("ingest", "read", "policy:read")) -> str:
    """A new project `slug` in the stack's database and a key of it; returns the key."""
    code = (
        "from toolscope.telemetry.models import Project;"
        "from toolscope.telemetry.services.api_keys import api_key_create;"
        f"p=Project.objects.create(slug={slug!r}, name={slug!r});"
        f"print(api_key_create(project=p, name='test', scopes={list(scopes)!r}).secret)"
    )
    done = subprocess.run(["python", "manage.py", "shell", "-c", code], cwd=recipe.REPO_ROOT, env=stack.envs["web"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]
