"""Attacks on the stack as production runs it (issue 24, "No request takes the service down").

For one checkout (`--repo`, default this one) the bench starts what docker-compose.yml runs, as
local processes: a scratch PostgreSQL database migrated with `manage.py migrate`, a private
redis-server on a free port, granian with the web service's command and environment
(`--workers 2 --blocking-threads 1 --respawn-failed-workers`, TOOLSCOPE_ENV=production,
WEB_REQUEST_TIMEOUT=60) and one Celery worker (`-Q celery --concurrency 2`). The commands and
environment come from THIS checkout's docker-compose.yml through tests/deploy/recipe.py, and the
attack bodies from THIS checkout's tests/attacks/bodies.py, so an older `--repo` (one without
them) is attacked with the same requests; its own code runs (cwd and PYTHONPATH are `--repo`),
with this interpreter's virtualenv.

Each attack is sent while a victim project posts small /api/v1/ingest batches back to back, one
at a time. Measured per attack:

- answer: the attack requests' statuses (`dropped` when the connection closed without one) and
  the wall time until the slowest was answered;
- web RSS peak: the largest resident set each granian worker reached (sampled every 20 ms from
  /proc), in MB;
- deaths: web workers that exited during the attack (a new pid appeared in their place);
- victim: its requests' latency p50 / p95 / max while the attack ran (from 1 s before it until its
  last answer, at least 5 s after it started), and how many were not 2xx or got no answer.

The attacks:

1. four OTLP protobuf gzip bombs at once (the four trace shapes of bodies.PROTOBUF_BOMBS: 4.8 MB
   decoded, ~5 KB on the wire each);
2. the OTLP logs bomb;
3. the OTLP/JSON gzip bomb (1.6 million empty span objects);
4. heavy requests within the limits, both at once: 4.8 MB of empty message objects in one chat
   span, and 10,000 chat spans; the victim goes on while the worker processes them (the turns
   stored are counted);
5. bad input that answered 500 (malformed OTLP/JSON, attribute JSON nested 5,000 deep, ranges
   ending in year 1, a transcript in year 10000 once in UTC): the number of 5xx;
6. lost turns: two exports, each one chat span of one conversation with the same history but its
   own span id and usage, the second sent once the first is processed; the turns stored
   (GET /api/v1/sessions/{id}) out of 2.

Between attacks the bench waits for every batch to be processed and restarts granian, so each
attack starts from fresh web workers (`--keep-web`: one granian throughout; a worker keeps the
memory of a large request). Every loop is bounded in count and time; the processes (each in its
own process group) and the scratch database are removed at the end. Only 127.0.0.1 is contacted.

    .venv/bin/python bench/attacks.py [--repo PATH] [--quick] [--only 1,5] [--keep-web] [--json OUT]

To compare with the code before issue 24's fixes:

    git worktree add /tmp/ts-before 8715400
    .venv/bin/python bench/attacks.py --repo /tmp/ts-before
    .venv/bin/python bench/attacks.py

`--quick` sends bombs a tenth the size (240,000 items: still over every limit, but the code
before the fixes gets through them in seconds rather than dying at the 60 s limit), 1,000 chat
spans and 480 KB of message objects, and waits less between attacks.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
from psycopg import sql

BENCH_REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH_REPO))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402

from tests.attacks import bodies  # noqa: E402  (this checkout's, whatever --repo is)
from tests.attacks.procfs import children, rss_bytes  # noqa: E402
from tests.deploy import recipe  # noqa: E402

PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
VENV_BIN = Path(sys.prefix) / "bin"
START_TIMEOUT = 120.0
ATTACK_TIMEOUT = 240.0  # one attack request, client side (the server's own limit is 60 s)
VICTIM_TIMEOUT = 240.0
VICTIM_MAX_REQUESTS = 200_000
SAMPLE_EVERY = 0.02
WARM_UP = 20  # victim requests before each attack, not counted
PROTOBUF = {"Content-Type": "application/x-protobuf"}
PROTOBUF_GZIP = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
JSON = {"Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --- the stack --------------------------------------------------------------------------------


class Stack:
    """redis-server, a scratch database, migrate, granian (web) and a Celery worker for `repo`."""

    def __init__(self, repo: Path, log_dir: Path, web_workers: int = 2, worker_concurrency: int = 2) -> None:
        self.repo, self.log_dir = repo, log_dir
        self.web_workers, self.worker_concurrency = web_workers, worker_concurrency
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.database = f"toolscope_attacks_{secrets.token_hex(4)}"
        self.database_url = f"{PG_SERVER}/{self.database}"
        self.redis_port = free_port()
        self._database_created = False
        self.envs: dict[str, dict[str, str]] = {}

    # Processes each get their own session (process group), ended with killpg.
    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(argv, cwd=self.repo, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def start(self) -> None:
        self._spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
        self._database_created = True

        compose = recipe.load_compose({
            "SECRET_KEY": secrets.token_urlsafe(50), "POSTGRES_PASSWORD": "unused",
            "WEB_CONCURRENCY": str(self.web_workers), "WORKER_CONCURRENCY": str(self.worker_concurrency),
        })
        home = self.log_dir / "home"
        home.mkdir(exist_ok=True)
        base_env = {
            **recipe.dockerfile_env(),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            # The checkout's own SDK too: the virtualenv's editable install points at this one's.
            "HOME": str(home), "LANG": "C.UTF-8", "PYTHONPATH": f"{self.repo}{os.pathsep}{self.repo / 'sdk'}",
        }
        overrides = {"PORT": str(self.port), "GRANIAN_HOST": "127.0.0.1", "WEB_CONCURRENCY": str(self.web_workers),
                     "WEB_REQUEST_TIMEOUT": "60"}
        for name in ("migrate", "web", "worker"):
            service = compose["services"][name]
            self.envs[name] = {**base_env, **self._localize(recipe.service_environment(service)), **overrides}
        self.argv = argv = {name: recipe.as_argv(compose["services"][name]["command"])
                            for name in ("migrate", "web", "worker")}

        self._wait(lambda: self._redis_up(), 20, "redis-server")
        done = subprocess.run(argv["migrate"], cwd=self.repo, env=self.envs["migrate"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=600, check=False)
        (self.log_dir / "migrate.log").write_bytes(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"migrate exited {done.returncode}: {done.stderr.decode()[-2000:]}")
        self._spawn("web", argv["web"], self.envs["web"])
        self._spawn("worker", argv["worker"], self.envs["worker"])
        self._wait(lambda: "ready." in self._log("worker"), START_TIMEOUT, "the celery worker")
        self.wait_web(START_TIMEOUT)

    def _localize(self, env: dict[str, str]) -> dict[str, str]:
        """Compose's `postgres` and `redis` hosts become the scratch database and the private Redis."""
        out = {}
        for key, value in env.items():
            parts = urlsplit(value) if "://" in value else None
            if parts is not None and parts.hostname == "postgres":
                value = f"postgres://{urlsplit(PG_SERVER).netloc}/{self.database}"
            elif parts is not None and parts.hostname == "redis":
                value = f"redis://127.0.0.1:{self.redis_port}/{parts.path.lstrip('/') or '0'}"
            out[key] = value
        return out

    def _redis_up(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
        return False

    def _log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited {process.returncode}:\n{self._log(name)[-3000:]}")
            if done():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready after {timeout:.0f} s")

    @property
    def granian(self) -> int:
        return self.processes["web"].pid

    def web_workers_now(self) -> set[int]:
        return children(self.granian)

    def wait_web(self, timeout: float) -> None:
        """Until granian has all its workers and one of them answers /healthz."""
        def healthy() -> bool:
            if len(self.web_workers_now()) < self.web_workers:
                return False
            try:
                return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        self._wait(healthy, timeout, "granian")

    def unsettled_batches(self, project: str | None = None) -> int:
        query = ("SELECT count(*) FROM telemetry_ingestbatch b JOIN telemetry_project p ON p.id = b.project_id "
                 "WHERE b.status IN ('pending', 'processing') AND (%s::text IS NULL OR p.slug = %s)")
        with psycopg.connect(self.database_url) as conn:
            return conn.execute(query, (project, project)).fetchone()[0]

    def count(self, table: str, project: str) -> int:
        query = sql.SQL("SELECT count(*) FROM {} t JOIN telemetry_project p ON p.id = t.project_id "
                        "WHERE p.slug = %s").format(sql.Identifier(table))
        with psycopg.connect(self.database_url) as conn:
            return conn.execute(query, (project,)).fetchone()[0]

    def failed_batches(self, project: str) -> int:
        query = ("SELECT count(*) FROM telemetry_ingestbatch b JOIN telemetry_project p ON p.id = b.project_id "
                 "WHERE b.status = 'failed' AND p.slug = %s")
        with psycopg.connect(self.database_url) as conn:
            return conn.execute(query, (project,)).fetchone()[0]

    def settle(self, timeout: float, project: str | None = None) -> float:
        """Waits (at most `timeout` s) until no batch (of `project`) is pending or processing;
        returns the seconds waited, or -1 when some were still unsettled."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.unsettled_batches(project) == 0:
                return time.monotonic() - started
            time.sleep(0.25)
        return -1.0

    def create_keys(self, keys: dict[str, tuple[str, list[str]]]) -> dict[str, str]:
        """name -> (project slug, scopes): a key per name in that project (created when new);
        returns name -> key."""
        code = ("from toolscope.telemetry.models import Project\n"
                "from toolscope.telemetry.services.api_keys import api_key_create\n"
                f"for name, (slug, scopes) in {keys!r}.items():\n"
                "    p, _ = Project.objects.get_or_create(slug=slug, defaults={'name': slug})\n"
                "    print('KEY', name, api_key_create(project=p, name=name, scopes=scopes).secret)\n")
        done = subprocess.run([str(VENV_BIN / "python"), "manage.py", "shell", "-c", code], cwd=self.repo,
                              env=self.envs["web"], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode:
            raise RuntimeError(done.stderr[-2000:])
        found = [line.split() for line in done.stdout.splitlines() if line.startswith("KEY ")]
        return {name: secret for _, name, secret in found}

    def restart_web(self) -> None:
        """granian stopped and started again: every attack starts from fresh web workers (their
        memory is not given back to the system after a large request)."""
        self._end([self.processes.pop("web")])
        self._spawn("web", self.argv["web"], self.envs["web"])
        self.wait_web(START_TIMEOUT)

    @staticmethod
    def _end(processes: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM to each process group, 15 s of grace, then SIGKILL."""
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def stop(self) -> None:
        self._end(list(self.processes.values()))
        if self._database_created:
            with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.database)))


# --- measuring --------------------------------------------------------------------------------


class Watch:
    """granian's workers: their pids and the largest resident set each reached, every 20 ms."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.workers = stack.web_workers_now()
        self.seen = set(self.workers)
        self.start_rss = {pid: rss_bytes(pid) for pid in self.workers}
        self.peak: dict[int, int] = dict(self.start_rss)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for pid in self.stack.web_workers_now():
                self.seen.add(pid)
                self.peak[pid] = max(self.peak.get(pid, 0), rss_bytes(pid))
            time.sleep(SAMPLE_EVERY)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.alive = self.stack.web_workers_now()

    @property
    def deaths(self) -> int:
        return len(self.seen - self.alive)


@dataclass
class Victim:
    """Another project's small batches, one after the other, until stopped (or bounded)."""

    stack: Stack
    key: str
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)

    def one(self, client: httpx.Client) -> None:
        session = uuid.uuid4().hex
        events = [{"type": "session", "id": session, "agent_name": "victim"},
                  {"type": "tool_call", "id": uuid.uuid4().hex, "session_id": session, "tool_name": "read_file",
                   "status": "ok", "output": "hello"}]
        started = time.monotonic()
        try:
            response = client.post(f"{self.stack.base}/api/v1/ingest", content=json.dumps({"events": events}),
                                   headers={"Authorization": f"Bearer {self.key}", **JSON})
            outcome: str | int = response.status_code
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        self.latencies.append(time.monotonic() - started)
        self.statuses[outcome] += 1
        if not isinstance(outcome, int):
            time.sleep(0.05)  # refused connections return at once: no busy loop

    @contextlib.contextmanager
    def running(self) -> Iterator[Victim]:
        stop = threading.Event()

        def run() -> None:
            # A connection per request, as many clients would: a kept-alive one stays with the granian
            # worker that accepted it, so the victim would see either worker's queue, by chance.
            with httpx.Client(timeout=VICTIM_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0)) as client:
                for _ in range(VICTIM_MAX_REQUESTS):
                    if stop.is_set():
                        return
                    self.one(client)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            time.sleep(1.0)  # a few requests before the attack starts
            yield self
        finally:
            stop.set()
            thread.join(timeout=VICTIM_TIMEOUT + 10)

    @property
    def errors(self) -> int:
        return sum(n for outcome, n in self.statuses.items() if not (isinstance(outcome, int) and outcome < 300))


@dataclass
class Answer:
    name: str
    status: str | int
    seconds: float
    body: bytes = b""


@dataclass
class Result:
    attack: str
    answers: list[Answer]
    seconds: float
    rss_start_mb: list[int]
    rss_peak_mb: list[int]
    deaths: int
    respawned: int
    victim_n: int
    victim_p50_ms: float
    victim_p95_ms: float
    victim_max_ms: float
    victim_errors: int
    victim_statuses: dict[str, int]
    load: str
    notes: dict[str, Any] = field(default_factory=dict)

    def answer_text(self) -> str:
        """The statuses, and the slowest answer's wall time."""
        counts = Counter(str(answer.status) for answer in self.answers)
        slowest = max((answer.seconds for answer in self.answers), default=0.0)
        return ", ".join(f"{status} x{n}" if n > 1 else str(status) for status, n in counts.items()) \
            + f" in {slowest:.1f} s"


Send = tuple[str, Callable[[httpx.Client], httpx.Response]]


def post(stack: Stack, path: str, body: bytes, key: str, headers: dict[str, str]):
    def send(client: httpx.Client) -> httpx.Response:
        return client.post(f"{stack.base}{path}", content=body, headers={"Authorization": f"Bearer {key}", **headers})
    return send


def get(stack: Stack, path: str, key: str):
    def send(client: httpx.Client) -> httpx.Response:
        return client.get(f"{stack.base}{path}", headers={"Authorization": f"Bearer {key}"})
    return send


def timed(name: str, send: Callable[[httpx.Client], httpx.Response]) -> Answer:
    started = time.monotonic()
    try:
        with httpx.Client(timeout=ATTACK_TIMEOUT) as client:
            response = send(client)
        return Answer(name, response.status_code, time.monotonic() - started, response.content[:2000])
    except httpx.TimeoutException:
        return Answer(name, "timeout", time.monotonic() - started)
    except httpx.HTTPError as exc:
        # RemoteProtocolError: the server closed the connection without an answer (worker gone).
        return Answer(name, "dropped" if isinstance(exc, httpx.RemoteProtocolError) else type(exc).__name__,
                      time.monotonic() - started)


Run = Callable[[], tuple[list[Answer], dict[str, Any]]]


def measure(stack: Stack, victim_key: str, attack: str, run: Run, window: float = 5.0) -> Result:
    """Runs `run` (which sends the attack) with the victim ingesting and the workers watched."""
    victim = Victim(stack, victim_key)
    # Warm-up, not measured: a fresh worker's first ingest imports and connects (~0.5 s).
    with httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        for _ in range(WARM_UP):
            victim.one(client)
    victim.latencies.clear()
    victim.statuses.clear()
    load = loadavg()
    with Watch(stack) as watch, victim.running():
        started = time.monotonic()
        answers, notes = run()
        seconds = time.monotonic() - started
        # The victim keeps going at least `window` seconds from the attack's start: a quick attack
        # would otherwise leave only a handful of its requests to measure.
        time.sleep(max(0.0, window - seconds))
    ms = [latency * 1000 for latency in victim.latencies]
    return Result(
        attack=attack, answers=answers, seconds=seconds,
        rss_start_mb=[round(watch.start_rss[pid] / 2**20) for pid in sorted(watch.start_rss)],
        rss_peak_mb=[round(size / 2**20) for _, size in sorted(watch.peak.items())],
        deaths=watch.deaths, respawned=len(watch.seen - watch.workers), victim_n=len(ms),
        victim_p50_ms=percentile(ms, 0.5), victim_p95_ms=percentile(ms, 0.95), victim_max_ms=max(ms, default=0.0),
        victim_errors=victim.errors, victim_statuses={str(k): v for k, v in victim.statuses.items()}, load=load,
        notes=notes,
    )


def at_once(sends: list[Send]) -> Run:
    def run() -> tuple[list[Answer], dict[str, Any]]:
        with ThreadPoolExecutor(len(sends)) as pool:
            return list(pool.map(lambda item: timed(*item), sends)), {}
    return run


# --- request bodies ---------------------------------------------------------------------------


def _attributes(**values: Any) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(int_value=value) if isinstance(value, int)
                     else AnyValue(string_value=value)) for key, value in values.items()]


def otlp_request(*spans: Span) -> bytes:
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])
    return request.SerializeToString()


def one_span(name: str, start_ns: int, trace: bytes | None = None, span_id: bytes | None = None,
             **attributes: Any) -> Span:
    return Span(trace_id=trace or os.urandom(16), span_id=span_id or os.urandom(8), name=name,
                start_time_unix_nano=start_ns, end_time_unix_nano=start_ns + 5_000_000,
                attributes=_attributes(**attributes))


DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
HISTORY = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Fix the login test"}]}])


# --- the attacks ------------------------------------------------------------------------------


@dataclass
class Sizes:
    bomb: int = bodies.SPANS
    json_bomb: int = 1_600_000
    message_bytes: int = 4_800_000
    chat_spans: int = 10_000
    settle: float = 180.0


def attack_bombs(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    key = keys["attacker"]
    sends = [(name, post(stack, "/api/v1/otlp/v1/traces", bodies.gzipped(build(sizes.bomb)), key, PROTOBUF_GZIP))
             for name, (signal_, build) in bodies.PROTOBUF_BOMBS.items() if signal_ == "traces"]
    return "1. four OTLP protobuf gzip bombs at once", at_once(sends)


def attack_logs_bomb(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    body = bodies.gzipped(bodies.empty_log_records(sizes.bomb))
    return "2. OTLP logs gzip bomb", at_once([("logs", post(stack, "/api/v1/otlp/v1/logs", body, keys["attacker"],
                                                            PROTOBUF_GZIP))])


def attack_json_bomb(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    body = gzip.compress(bodies.json_empty_spans(sizes.json_bomb))
    return "3. OTLP/JSON gzip bomb", at_once([("json", post(stack, "/api/v1/otlp/v1/traces", body, keys["attacker"],
                                                           {"Content-Type": "application/json",
                                                            "Content-Encoding": "gzip"}))])


def attack_heavy(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    key = keys["heavy"]
    sends = [("4.8 MB of {} messages", post(stack, "/api/v1/otlp/v1/traces",
                                            bodies.gzipped(bodies.messages_of_empty_objects(sizes.message_bytes)),
                                            key, PROTOBUF_GZIP)),
             ("10,000 chat spans", post(stack, "/api/v1/otlp/v1/traces",
                                        bodies.gzipped(bodies.spans_at_the_limit(sizes.chat_spans)), key,
                                        PROTOBUF_GZIP))]
    send_both = at_once(sends)

    def run() -> tuple[list[Answer], dict[str, Any]]:
        # The victim goes on while the worker processes what was stored.
        answers, _ = send_both()
        waited = stack.settle(sizes.settle, "heavy")
        return answers, {"processed in": "not within the wait" if waited < 0 else f"{waited:.0f} s",
                         "turns stored": stack.count("telemetry_turn", "heavy"),
                         "batches failed": stack.failed_batches("heavy")}

    return "4. within the limits: 4.8 MB of {} + 10,000 chat spans", run


def attack_bad_input(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    ingest, read = keys["bad"], keys["reader"]
    now = time.time_ns()
    transcript = {"format": "openai_chat", "session_id": "s-edge", "timestamp": "9999-12-31T23:59:59-05:00",
                  "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    sends: list[Send] = [
        ('OTLP/JSON {"resourceSpans":"abc"}',
         post(stack, "/api/v1/otlp/v1/traces", b'{"resourceSpans":"abc"}', ingest, JSON)),
        ("OTLP/JSON scopeSpans an object",
         post(stack, "/api/v1/otlp/v1/traces", bodies.as_json({"resourceSpans": [{"scopeSpans": {"spans": []}}]}),
              ingest, JSON)),
        ("OTLP/JSON logRecords [7]",
         post(stack, "/api/v1/otlp/v1/logs",
              bodies.as_json({"resourceLogs": [{"scopeLogs": [{"logRecords": [7]}]}]}), ingest, JSON)),
        ("tool arguments nested 5,000 deep",
         post(stack, "/api/v1/otlp/v1/traces", otlp_request(one_span(
             "execute_tool bash", now, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash",
                                          "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": DEEP_OBJECT})),
              ingest, PROTOBUF)),
        ("messages nested 5,000 deep",
         post(stack, "/api/v1/otlp/v1/traces", otlp_request(one_span(
             "chat gpt-4o", now, **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": DEEP,
                                    "gen_ai.usage.input_tokens": 42})), ingest, PROTOBUF)),
        ("GET overview end=0001-01-01", get(stack, "/api/v1/overview?end=0001-01-01T00:00:00Z", read)),
        ("GET sessions end=0001-01-01", get(stack, "/api/v1/sessions?end=0001-01-01T00:00:00Z", read)),
        ("GET tools/stats end=0001-01-01", get(stack, "/api/v1/tools/stats?end=0001-01-01T00:00:00Z", read)),
        ("transcript at 9999-12-31T23:59:59-05:00",
         post(stack, "/api/v1/transcripts", bodies.as_json(transcript), ingest, JSON)),
    ]

    def run() -> tuple[list[Answer], dict[str, Any]]:
        answers = [timed(name, send) for name, send in sends]  # one after the other
        waited = stack.settle(sizes.settle, "bad")
        return answers, {"5xx": sum(isinstance(a.status, int) and a.status >= 500 for a in answers),
                         "batches failed": stack.failed_batches("bad"),
                         "batches unsettled": stack.unsettled_batches("bad") if waited < 0 else 0}

    return "5. bad input (500s before)", run


def attack_lost_turns(stack: Stack, keys: dict[str, str], sizes: Sizes) -> tuple[str, Callable]:
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    trace = os.urandom(16)
    now = time.time_ns() - 60_000_000_000

    def chat(span_id: bytes, start: int, input_tokens: int) -> bytes:
        return otlp_request(one_span("chat gpt-4o", start, trace=trace, span_id=span_id, **{
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation,
            "gen_ai.input.messages": HISTORY, "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": 7}))

    exports = [("export 1 (1,000 tokens)", chat(bytes.fromhex("b7ad6b7169203331"), now, 1000)),
               ("export 2, the retry (1,200 tokens)", chat(bytes.fromhex("b7ad6b7169203332"), now + 5_000_000_000,
                                                           1200))]

    def run() -> tuple[list[Answer], dict[str, Any]]:
        answers = []
        for name, body in exports:
            answers.append(timed(name, post(stack, "/api/v1/otlp/v1/traces", body, keys["turns"], PROTOBUF)))
            stack.settle(sizes.settle, "turns")
        with httpx.Client(timeout=30) as client:
            response = client.get(f"{stack.base}/api/v1/sessions/{conversation}",
                                  headers={"Authorization": f"Bearer {keys['reader_turns']}"})
        notes: dict[str, Any] = {"session status": response.status_code}
        if response.status_code == 200:
            turns = response.json().get("turns", [])
            notes["turns stored"] = f"{len(turns)} of 2"
            notes["input tokens"] = [turn.get("input_tokens") for turn in turns]
        else:
            notes["turns stored"] = "0 of 2"
        return answers, notes

    return "6. lost turns: one history in two exports", run


ATTACKS = {1: attack_bombs, 2: attack_logs_bomb, 3: attack_json_bomb, 4: attack_heavy, 5: attack_bad_input,
           6: attack_lost_turns}


# --- main -------------------------------------------------------------------------------------


def describe(result: Result) -> str:
    lines = [f"== {result.attack}  (load {result.load})",
             f"   answer: {result.answer_text()}"]
    for answer in result.answers:
        detail = answer.body[:160].decode("utf-8", "replace").replace("\n", " ") if answer.body else ""
        lines.append(f"     {answer.name}: {answer.status} in {answer.seconds:.2f} s  {detail!r}")
    lines.append(f"   web RSS MB: start {result.rss_start_mb}, peak per pid {result.rss_peak_mb}; "
                 f"deaths {result.deaths}, respawned {result.respawned}")
    lines.append(f"   victim: {result.victim_n} requests, p50 {result.victim_p50_ms:.0f} ms, "
                 f"p95 {result.victim_p95_ms:.0f} ms, max {result.victim_max_ms:.0f} ms, "
                 f"errors {result.victim_errors} {result.victim_statuses}")
    if result.notes:
        lines.append(f"   {result.notes}")
    return "\n".join(lines)


def table(results: list[Result]) -> str:
    header = ("| attack | answer | web RSS start -> peak (MB) | worker deaths | victim p50 / p95 / max (ms)"
              " | victim errors | notes | load |")
    rows = [header, "|---|---|---|---|---|---|---|---|"]
    for r in results:
        notes = "; ".join(f"{k}: {v}" for k, v in r.notes.items())
        rows.append(f"| {r.attack} | {r.answer_text()} | {'/'.join(map(str, r.rss_start_mb))} -> "
                    f"{'/'.join(map(str, r.rss_peak_mb))} | {r.deaths} | {r.victim_p50_ms:.0f} / "
                    f"{r.victim_p95_ms:.0f} / {r.victim_max_ms:.0f} | {r.victim_errors} of {r.victim_n} | {notes} "
                    f"| {r.load} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=BENCH_REPO, help="the checkout to run (default: this one)")
    parser.add_argument("--quick", action="store_true", help="bombs a tenth the size, shorter waits")
    parser.add_argument("--only", default="1,2,3,4,5,6", help="attacks to run, by number (1-6)")
    parser.add_argument("--keep-web", action="store_true",
                        help="one granian for all attacks (default: restarted before each, fresh workers)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    repo = args.repo.resolve()
    chosen = [int(n) for n in args.only.split(",") if n.strip()]
    sizes = Sizes(bomb=bodies.SPANS // 10, json_bomb=160_000, message_bytes=480_000, chat_spans=1_000, settle=60.0) \
        if args.quick else Sizes()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    print(f"repo {repo} at {commit}; load {loadavg()}; {os.cpu_count()} CPUs", flush=True)

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="ts-attacks-") as tmp:
        log_dir = args.logs or Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        stack = Stack(repo, log_dir)
        try:
            stack.start()
            keys = stack.create_keys({
                "victim": ("victim", ["ingest"]), "attacker": ("attacker", ["ingest"]),
                "heavy": ("heavy", ["ingest"]), "bad": ("bad", ["ingest"]), "reader": ("bad", ["read"]),
                "turns": ("turns", ["ingest"]), "reader_turns": ("turns", ["read"])})
            for position, number in enumerate(chosen):
                name, run = ATTACKS[number](stack, keys, sizes)
                if position and not args.keep_web:
                    stack.restart_web()
                stack.wait_web(START_TIMEOUT)
                result = measure(stack, keys["victim"], name, run, window=2.0 if args.quick else 5.0)
                stack.wait_web(START_TIMEOUT)
                settled = stack.settle(sizes.settle)
                if settled < 0:
                    result.notes["batches"] = f"still unprocessed after {sizes.settle:.0f} s"
                results.append(result)
                print(describe(result), flush=True)
        finally:
            stack.stop()
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([{**r.__dict__, "answers": [
            {"name": a.name, "status": a.status, "seconds": round(a.seconds, 3)} for a in r.answers]}
            for r in results], indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
