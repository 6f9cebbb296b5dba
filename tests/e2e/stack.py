"""A whole toolscope stack as local processes for resilience tests: a private redis-server (so
a test may stop it), gunicorn, a Celery worker and beat, all on the test database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.db import connection

from tests.e2e.conftest import wait_for

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Process:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name, self.args, self.env = name, args, env
        self.log = log_dir / f"{name}.log"
        self.popen: subprocess.Popen | None = None

    def start(self) -> Process:
        with self.log.open("a") as out:
            self.popen = subprocess.Popen(self.args, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen and self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)

    def tail(self) -> str:
        return f"--- {self.name}\n" + (self.log.read_text()[-2500:] if self.log.exists() else "")


class Stack:
    def __init__(self, log_dir: Path, queue: str, worker_concurrency: int = 1) -> None:
        self.log_dir, self.worker_concurrency = log_dir, worker_concurrency
        self.redis_port, self.web_port = free_port(), free_port()
        db = connection.settings_dict
        broker = f"redis://127.0.0.1:{self.redis_port}/0"
        self.env = {
            **os.environ,
            "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
            "TOOLSCOPE_ENV": "test", "DEBUG": "false", "LOG_LEVEL": "INFO",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "CELERY_BROKER_URL": broker, "CACHE_URL": f"redis://127.0.0.1:{self.redis_port}/1",
            "INGEST_QUEUE": queue, "API_RATE_LIMIT_PER_MINUTE": "100000",
            "BATCH_SWEEP_EVERY_SECONDS": "1", "BATCH_SWEEP_PENDING_SECONDS": "2",
            "BATCH_SWEEP_PROCESSING_SECONDS": "3", "WORKER_HEARTBEAT_SECONDS": "1",
        }
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        self.redis = self._process("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                             "--save", "", "--appendonly", "no"])
        self.web = self._process("web", ["gunicorn", "toolscope.wsgi", "--bind", f"127.0.0.1:{self.web_port}",
                                         "--workers", "2"])
        self.worker = self._worker()
        self.beat = self._process("beat", ["celery", "-A", "toolscope", "beat", "--loglevel", "INFO",
                                           "--schedule", str(log_dir / "beat-schedule")])

    def _process(self, name: str, args: list[str]) -> Process:
        return Process(name, args, self.env, self.log_dir)

    def _worker(self) -> Process:
        return self._process("worker", ["celery", "-A", "toolscope", "worker",
                                        "--concurrency", str(self.worker_concurrency),
                                        "--without-gossip", "--without-mingle", "--loglevel", "INFO"])

    def start(self) -> Stack:
        self.start_redis()
        for process in (self.web, self.worker, self.beat):
            process.start()
        wait_for(self._web_up, 60, "gunicorn")
        self.wait_worker_ready()
        return self

    def start_redis(self) -> None:
        self.redis.start()
        wait_for(lambda: _port_open(self.redis_port), 20, "redis-server")

    def restart_worker(self) -> None:
        self.worker = self._worker().start()
        self.wait_worker_ready()

    def wait_worker_ready(self) -> None:
        wait_for(lambda: "ready." in self.worker.log.read_text() or self.worker.popen.poll() is not None, 60,
                 "the worker")
        assert self.worker.popen.poll() is None, self.describe()

    def _web_up(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        for process in (self.beat, self.worker, self.web, self.redis):
            process.stop()

    def describe(self) -> str:
        return "\n".join(p.tail() for p in (self.web, self.worker, self.beat, self.redis))


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def settle(seconds: float) -> None:
    time.sleep(seconds)


@contextmanager
def running_stack(log_dir: Path, *, worker_concurrency: int = 1) -> Iterator[Stack]:
    """A started Stack on a queue of its own; its logs are printed if starting or the test fails."""
    stack = Stack(log_dir, queue=f"e2e-{uuid.uuid4().hex[:10]}", worker_concurrency=worker_concurrency)
    try:
        yield stack.start()
    except Exception:
        print(stack.describe())  # noqa: T201 - shown by pytest only when the test fails
        raise
    finally:
        stack.stop()
