"""Helpers for benchmarks: a scratch PostgreSQL database, a project key, a gunicorn server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

REPO = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/8")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def scratch_database(name: str | None = None):
    name = name or f"toolscope_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stack_env(database_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TOOLSCOPE_ENV="test", DATABASE_URL=database_url, CELERY_BROKER_URL=REDIS, DEBUG="false",
        LOG_LEVEL="WARNING", API_RATE_LIMIT_PER_MINUTE="0", PATH=f"{REPO / '.venv/bin'}:{env['PATH']}", **extra,
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, check=True, capture_output=True, text=True
    ).stdout


def create_key(env: dict[str, str], slug: str = "bench") -> str:
    """A project with an ingest + policy:read key; returns the key."""
    code = (
        "from toolscope.telemetry.models import Project;"
        "from toolscope.telemetry.services.api_keys import api_key_create;"
        f"p=Project.objects.create(slug='{slug}', name='{slug}');"
        "print(api_key_create(project=p, name='bench', scopes=['ingest','policy:read']).secret)"
    )
    return manage(env, "shell", "-c", code).strip().splitlines()[-1]


@contextmanager
def gunicorn(env: dict[str, str], *, workers: int, threads: int = 1, log: Path | None = None):
    port = free_port()
    args = ["gunicorn", "toolscope.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
            "--threads", str(threads), "--worker-class", "gthread" if threads > 1 else "sync",
            "--keep-alive", "30", "--log-level", "warning"]
    out = open(log or os.devnull, "w")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
        out.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
