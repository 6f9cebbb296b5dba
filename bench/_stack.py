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
        _wait_healthy(base, timeout=30)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
        out.close()


def _wait_healthy(base: str, *, timeout: float) -> None:
    """Until the server at `base` answers /healthz (any status), or `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/healthz", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _wait_log(path: Path, text: str, process: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{path.read_text()[-3000:]}")
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s:\n{path.read_text()[-3000:]}")


def _stop(process: subprocess.Popen, timeout: float = 30) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def celery_worker(env: dict[str, str], *, queue: str, log: Path, concurrency: int = 1, pool: str = "prefork",
                  wait_ready: bool = True):
    """`celery worker` on `queue` (as docker-compose runs it); yields the Popen once it logged `ready.`."""
    # BENCH_CELERY_APP: another app module for experiments (it must import toolscope.celery's app).
    app = os.environ.get("BENCH_CELERY_APP", "toolscope")
    args = ["celery", "-A", app, "worker", "--loglevel", "INFO", "--concurrency", str(concurrency),
            "--pool", pool, "--queues", queue, "--without-gossip", "--without-mingle", "--hostname",
            f"bench-{uuid.uuid4().hex[:6]}@%h"]
    with open(log, "w") as out:
        process = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        if wait_ready:
            _wait_log(log, "ready.", process, 60, "celery worker")
        yield process
    finally:
        _stop(process)


@contextmanager
def celery_beat(env: dict[str, str], *, log: Path, schedule: Path):
    """`celery beat` with its schedule file at `schedule` (never in the repository)."""
    args = ["celery", "-A", "toolscope", "beat", "--loglevel", "INFO", "--schedule", str(schedule)]
    with open(log, "w") as out:
        process = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        _wait_log(log, "beat: Starting", process, 60, "celery beat")
        yield process
    finally:
        _stop(process)


def _proc_table() -> dict[int, tuple[int, float, str, float]]:
    """pid -> (parent pid, CPU seconds used, command line, CPU seconds of its reaped children) of
    every process (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmdline,
                             (int(fields[13]) + int(fields[14])) / tick)
    return table


def cpu_snapshot(groups: dict[str, list[int]], match: dict[str, str] | None = None) -> dict[str, dict[int, float]]:
    """CPU seconds used so far per group: the processes `groups[name]` and all their descendants,
    with what their exited children used (so short-lived children, such as PostgreSQL backends
    under the postmaster, count), plus for `match[name]` every process whose command line contains
    that text; `machine` is the busy time of all CPUs (/proc/stat). Subtract two snapshots with
    `cpu_delta`."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(pid)
    snapshot: dict[str, dict[int, float]] = {}
    for name, roots in groups.items():
        pids, todo = set(), list(roots)
        while todo:
            pid = todo.pop()
            if pid in table and pid not in pids:
                pids.add(pid)
                todo.extend(children.get(pid, ()))
        snapshot[name] = {pid: table[pid][1] + table[pid][3] for pid in pids}
    for name, text in (match or {}).items():
        snapshot.setdefault(name, {}).update({pid: cpu for pid, (_, cpu, cmd, _) in table.items() if text in cmd})
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    snapshot["machine"] = {0: (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")}
    return snapshot


def postmaster_pid(database_url: str) -> int:
    """The PostgreSQL server process (the parent of every backend), when it runs on this machine."""
    with psycopg.connect(database_url) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        # Read while the connection is open: the backend process exits with it.
        return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cpu_delta(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds each group used between two snapshots (processes gone by `after` are not counted)."""
    return {name: sum(cpu - before.get(name, {}).get(pid, 0.0) for pid, cpu in pids.items())
            for name, pids in after.items()}


@contextmanager
def compose_web(env: dict[str, str], *, log: Path | None = None):
    """The web service's command and environment from docker-compose.yml, as a local process on a
    free loopback port (what tests/deploy/test_compose.py runs); `env` supplies the database,
    broker, cache and anything else to override. Yields (base URL, process group id)."""
    sys.path.insert(0, str(REPO))
    from tests.deploy import recipe

    compose = recipe.load_compose({"SECRET_KEY": env.get("SECRET_KEY", uuid.uuid4().hex * 2),
                                   "POSTGRES_PASSWORD": "unused", **env})
    web = compose["services"]["web"]
    # Values that name compose's own services (postgres, redis) come from `env` instead.
    service_env = {name: value for name, value in recipe.service_environment(web).items()
                   if "@postgres" not in value and "//redis" not in value}
    port = free_port()
    full_env = {**recipe.dockerfile_env(), **service_env, **env, "PORT": str(port), "GRANIAN_HOST": "127.0.0.1"}
    out = open(log or os.devnull, "w")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(recipe.as_argv(web["command"]), cwd=REPO, env=full_env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, timeout=60)
        yield base, process.pid
    finally:
        _stop(process)
        out.close()
