"""Real processes for end-to-end tests: a Celery worker on the test database, and a TCP proxy
that can lose responses the way a flaky network does."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

REPO = Path(__file__).resolve().parents[2]


def wait_for(condition: Callable[[], object], timeout: float = 30.0, message: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {message}")


class WorkerProcess:
    """`celery -A toolscope worker` consuming a queue of its own, on the test database."""

    def __init__(self, queue: str, log: Path, concurrency: int = 1) -> None:
        self.queue, self.log, self.concurrency = queue, log, concurrency
        self.process: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        db = connection.settings_dict
        env = dict(os.environ)
        env.update(
            DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL, TOOLSCOPE_ENV="test", LOG_LEVEL="INFO",
            PATH=f"{REPO / '.venv' / 'bin'}:{env['PATH']}",
        )
        return env

    def start(self) -> WorkerProcess:
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                ["celery", "-A", "toolscope", "worker", "-Q", self.queue, "--concurrency", str(self.concurrency),
                 "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
                cwd=REPO, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        wait_for(lambda: "ready." in self.log.read_text() or self.process.poll() is not None, 60, "worker start")
        assert self.process.poll() is None, self.log.read_text()[-3000:]
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)


@pytest.fixture
def ingest_queue(settings) -> str:
    """A queue no other test run consumes, so this test's worker sees only this test's batches."""
    settings.INGEST_QUEUE = settings.SIMULATION_QUEUE = f"e2e-{uuid.uuid4().hex[:10]}"
    return settings.INGEST_QUEUE


@pytest.fixture
def stack(transactional_db, tmp_path):
    """A whole stack as local processes (tests/e2e/stack.py), one worker process."""
    from tests.e2e.stack import running_stack  # stack.py imports this module

    with running_stack(tmp_path) as running:
        yield running


@pytest.fixture
def worker(ingest_queue, transactional_db, tmp_path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(ingest_queue, tmp_path / "worker.log").start()
    try:
        yield process
    finally:
        process.kill(signal.SIGTERM)


class ResponseDroppingProxy:
    """Forwards TCP to `target`; the first `drop` connections have their response swallowed and
    the client side closed once the server has answered: the request arrived, the answer did not."""

    def __init__(self, target: tuple[str, int], drop: int) -> None:
        self.target, self.drop = target, drop
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            dropping = self.connections <= self.drop
            threading.Thread(target=self._serve, args=(client, dropping), daemon=True).start()

    def _serve(self, client: socket.socket, dropping: bool) -> None:
        upstream = socket.create_connection(self.target)
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        if dropping:
            upstream.recv(1)  # the server has processed the request and starts answering
            for sock in (client, upstream):
                sock.close()
            return
        self._pipe(upstream, client)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
