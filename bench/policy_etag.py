"""Policy revalidation: GET /api/v1/policy with a current If-None-Match (the 304 path agents poll).

Publishes a 40-tool policy into a fresh PostgreSQL database, starts the web server with the shared
cache on Redis (CACHE_URL=redis://127.0.0.1:6379/7) or per-process locmem, and drives it with wrk:
32 keep-alive connections, every request carrying the key and the current ETag. Reports
requests/s, latency percentiles, the requests in flight by Little's law (requests/s x mean
latency: it must come out near the connection count, or some connections were left waiting
unserved and the percentiles flatter the server), the CPU the server's processes spent per
request (1,000,000 / µs per request = requests/s one core serves), the load average before the
run, and the transactions PostgreSQL committed during the run (the warm path commits none,
except for a few queries each time a key's cached verification expires).

    .venv/bin/python bench/policy_etag.py [--seconds 15] [--cache redis locmem]
        [--configs compose 2x1 2x4] [--connections 32] [--rate-limit] [--body] [--baseline]
        [--publish-check N]

`compose` (the default) runs the web service's command and environment from docker-compose.yml
(granian, production settings) as tests/deploy/test_compose.py does. <workers>x<threads> runs
gunicorn instead, for comparison: threads > 1 means the gthread worker (keep-alive), 1 sync
workers (a new connection per request). --rate-limit turns the per-key limit on with a limit
never reached (the counting costs what it costs in production, where it is on by default);
--body sends no If-None-Match (200s); --baseline also drives /healthz (a plain Django view
through the middleware).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
from _stack import compose_web, create_key, gunicorn, manage, scratch_database, stack_env

REDIS_CACHE = "redis://127.0.0.1:6379/7"
PUBLISH = """
from toolscope.policies.models import Policy, Tool
from toolscope.policies.services.publish import policy_publish
from toolscope.telemetry.models import Project
project = Project.objects.get(slug="bench")
schema = {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}}
tools = [Tool.objects.create(project=project, name=f"tool_{i:02d}", description=f"Tool number {i}.",
                             input_schema=schema, redact=["token"] if i % 5 == 0 else [])
         for i in range(40)]
policy = Policy.objects.create(project=project, mode="context_rules")
policy.always_on.set(tools[:6])
print(policy_publish(policy=policy, user=None, comment="bench").etag)
"""
POLICY = "/api/v1/policy"
# --publish-check: publishes new versions while wrk polls, and right after each publish returns
# polls with the previous ETag on fresh connections (each may land on any web process): every
# answer must be a 200 with the new ETag. Reports how long publishes took (their wait for every
# web process to drop its memory included) and the stale answers.
PUBLISH_CHECK = """
import json, os, time, httpx
from toolscope.policies.models import Policy, Tool
from toolscope.policies.services.publish import policy_publish
policy = Policy.objects.get(project__slug="bench")
tools = list(Tool.objects.filter(project=policy.project).order_by("name"))
base, key, etag = os.environ["CHECK_BASE"], os.environ["CHECK_KEY"], os.environ["CHECK_ETAG"]
times, stale, answers = [], 0, 0
for i in range(int(os.environ["CHECK_ROUNDS"])):
    policy.always_on.set(tools[: 7 + i % 2])
    started = time.perf_counter()
    new = policy_publish(policy=policy, user=None, comment="check").etag
    times.append((time.perf_counter() - started) * 1000)
    for _ in range(4):
        with httpx.Client() as client:
            answer = client.get(base + "/api/v1/policy",
                                headers={"Authorization": "Bearer " + key, "If-None-Match": etag})
        answers += 1
        stale += answer.status_code != 200 or answer.headers.get("ETag") != new
    etag = new
times.sort()
print(json.dumps({"publishes": len(times), "answers": answers, "stale": stale, "p50_ms": times[len(times) // 2],
                  "max_ms": times[-1]}))
"""
STATS_FLUSH_SECONDS = 2.0
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(number) * UNITS[unit]


def parse_wrk(output: str) -> dict[str, float | int]:
    result: dict[str, float | int] = {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "requests": int(re.search(r"(\d+) requests in", output).group(1)),
        "bad": int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", output)) else 0,
        "socket_errors": sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", output)),
    }
    result["mean"] = _ms(re.search(r"Latency\s+(\S+)", output).group(1))
    for pct in ("50", "90", "99"):
        result[f"p{pct}"] = _ms(re.search(rf"^\s+{pct}%\s+(\S+)", output, re.M).group(1))
    return result


def server_cpu_seconds(server: str | int) -> float:
    """user + system CPU of the server: the processes of process group `server`, or the gunicorn
    processes bound to the address in `server` (a base URL)."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if isinstance(server, int):
                if int(fields[2]) != server:
                    continue
            else:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "gunicorn" not in cmdline or server.removeprefix("http://") not in cmdline:
                    continue
        except (OSError, ValueError):
            continue  # not a process, or it exited meanwhile
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def commits(database_url: str) -> int:
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name]).fetchone()
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return int(row[0])


def wrk(base: str, path: str, headers: dict[str, str], *, seconds: int, connections: int,
        server: str | int) -> dict[str, float | int]:
    """wrk against base+path with `headers` on every request; adds the server's CPU per request
    (`server` as server_cpu_seconds takes it) and the load average before the run."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "headers.lua"
        script.write_text("".join(f'wrk.headers["{name}"] = [[{value}]]\n' for name, value in headers.items()))
        load = float(Path("/proc/loadavg").read_text().split()[0])
        cpu_before = server_cpu_seconds(server)
        output = subprocess.run(
            ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), base + path],
            check=True, capture_output=True, text=True,
        ).stdout
    result = parse_wrk(output)
    result["cpu_us"] = (server_cpu_seconds(server) - cpu_before) / result["requests"] * 1e6
    result["load"] = load
    return result


def run_policy(base: str, server: str | int, database_url: str, headers: dict[str, str], *, expect: int,
               warm: int, seconds: int, connections: int) -> dict[str, float | int]:
    for _ in range(warm):  # every worker caches the key's verification and the document
        status = httpx.get(f"{base}{POLICY}", headers=headers, timeout=5).status_code
        assert status == expect, status
    time.sleep(STATS_FLUSH_SECONDS)  # backends report their counters about once a second
    before = commits(database_url)
    result = wrk(base, POLICY, headers, seconds=seconds, connections=connections, server=server)
    time.sleep(STATS_FLUSH_SECONDS)
    result["db_commits"] = commits(database_url) - before
    return result


def publish_check(env: dict[str, str], base: str, headers: dict[str, str], *, key: str, etag: str, rounds: int,
                  connections: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "headers.lua"
        script.write_text("".join(f'wrk.headers["{name}"] = [[{value}]]\n' for name, value in headers.items()))
        load = subprocess.Popen(["wrk", "-t2", f"-c{connections}", "-d600s", "-s", str(script), base + POLICY],
                                stdout=subprocess.DEVNULL)
        try:
            check_env = {**env, "CHECK_BASE": base, "CHECK_KEY": key, "CHECK_ETAG": etag, "CHECK_ROUNDS": str(rounds)}
            print("publish check under load:", manage(check_env, "shell", "-c", PUBLISH_CHECK).strip().splitlines()[-1],
                  flush=True)
        finally:
            load.terminate()
            load.wait()


def report(cache: str, config: str, what: str, r: dict[str, float | int]) -> None:
    in_flight = r["rps"] * r["mean"] / 1000
    print(f"{cache:7} {config:7} {what:7} {r['rps']:7,.0f}  {r['p50']:6.2f}ms {r['p90']:6.2f}ms {r['p99']:7.2f}ms "
          f"{in_flight:5.1f} {r['cpu_us']:6.0f} µs {r['bad']:7} {r['socket_errors']:7} {r.get('db_commits', '-'):>5}"
          f"  {r['load']:5.2f}", flush=True)


def stack(cache: str, database_url: str, rate_limit: bool) -> dict[str, str]:
    env = stack_env(database_url, CACHE_URL="locmem://" if cache == "locmem" else REDIS_CACHE)
    env["API_RATE_LIMIT_PER_MINUTE"] = "1000000000" if rate_limit else "0"
    return env


@contextmanager
def server(env: dict[str, str], config: str):
    """Yields (base URL, what server_cpu_seconds takes, concurrent requests it serves)."""
    if config == "compose":
        # The settings production runs with (compose's TOOLSCOPE_ENV=production and the rest).
        production = {**env, "TOOLSCOPE_ENV": "production", "SECRET_KEY": secrets.token_urlsafe(50)}
        with compose_web(production) as (base, group):
            yield base, group, int(production.get("WEB_CONCURRENCY", "2"))
        return
    workers, threads = (int(n) for n in config.split("x"))
    with gunicorn(env, workers=workers, threads=threads) as base:
        yield base, base, workers * threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--cache", nargs="+", choices=["redis", "locmem"], default=["redis"])
    parser.add_argument("--configs", nargs="+", default=["compose"])
    parser.add_argument("--rate-limit", action="store_true", help="per-key rate limit on (production)")
    parser.add_argument("--body", action="store_true", help="no If-None-Match: measure 200s")
    parser.add_argument("--baseline", action="store_true", help="also measure /healthz on each config")
    parser.add_argument("--publish-check", type=int, default=0, metavar="N",
                        help="then publish N versions under wrk load, polling after each (see PUBLISH_CHECK)")
    args = parser.parse_args()
    print(f"GET {POLICY}, {'200 with body' if args.body else '304 (If-None-Match current)'}, "
          f"wrk -t2 -c{args.connections} -d{args.seconds}s, rate limit {'on' if args.rate_limit else 'off'}")
    print("cache   config  path      req/s     p50      p90      p99   in flight  CPU/req  non-2xx sockerr "
          "db commits  load")
    for cache in args.cache:
        with scratch_database() as database_url:
            env = stack(cache, database_url, args.rate_limit)
            manage(env, "migrate", "--noinput")
            key = create_key(env)
            etag = manage(env, "shell", "-c", PUBLISH).strip().splitlines()[-1]
            headers = {"Authorization": f"Bearer {key}", **({} if args.body else {"If-None-Match": etag})}
            for config in args.configs:
                with server(env, config) as (base, cpu_of, concurrency):
                    result = run_policy(base, cpu_of, database_url, headers, expect=200 if args.body else 304,
                                        warm=concurrency * 4, seconds=args.seconds, connections=args.connections)
                    report(cache, config, "policy", result)
                    if args.publish_check:
                        publish_check(env, base, headers, key=key, etag=etag, rounds=args.publish_check,
                                      connections=args.connections)
                    if args.baseline:
                        healthz = wrk(base, "/healthz", {}, seconds=args.seconds, connections=args.connections,
                                      server=cpu_of)
                        report(cache, config, "healthz", healthz)


if __name__ == "__main__":
    main()
