"""Policy revalidation: GET /api/v1/policy with a current If-None-Match (the 304 path agents poll).

Publishes a 40-tool policy into a fresh PostgreSQL database, starts gunicorn with the shared cache
on Redis (CACHE_URL=redis://127.0.0.1:6379/7) or per-process locmem, and drives it with wrk:
32 keep-alive connections, every request carrying the key and the current ETag. Reports
requests/s, latency percentiles, the CPU the gunicorn processes spent per request (what the
server costs whatever else the machine runs; 1,000,000 / µs per request = requests/s one core
serves), and the transactions PostgreSQL committed during the run (the warm path commits none,
except for a few queries each time a key's cached verification expires).

    .venv/bin/python bench/policy_etag.py [--seconds 15] [--cache redis redis-reuse locmem]
        [--configs 2x1 3x1 4x1 2x4 4x4] [--connections 32] [--rate-limit] [--body] [--baseline]

A config is <gunicorn workers>x<threads>; threads > 1 means the gthread worker (keep-alive),
1 means sync workers (a new connection per request). --rate-limit turns the per-key limit on (two
more cache round trips per request, as in production); --body sends no If-None-Match (200s);
--baseline also drives /healthz (a plain Django view through the same middleware), the floor of
this stack.

--cache redis-reuse runs Redis through a settings module generated for the run whose cache
backend keeps one redis.Redis client per connection pool. Django's RedisCache builds a new
redis.Redis for every operation, and redis-py 8's constructor (a 170-entry case-insensitive
callback table) costs more than the round trip itself; this measures what reusing it would give.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
from _stack import create_key, gunicorn, manage, scratch_database, stack_env

REDIS_CACHE = "redis://127.0.0.1:6379/7"
REUSE_SETTINGS = """
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

from toolscope.settings import *  # noqa: F403


class ReusingClient(RedisCacheClient):
    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        clients = self.__dict__.setdefault("_clients", {})
        if index not in clients:
            clients[index] = self._client(connection_pool=self._get_connection_pool(write))
        return clients[index]


class ReusingRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusingClient


CACHES["default"]["BACKEND"] = "bench_reuse_settings.ReusingRedisCache"  # noqa: F405
"""
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
    for pct in ("50", "90", "99"):
        result[f"p{pct}"] = _ms(re.search(rf"^\s+{pct}%\s+(\S+)", output, re.M).group(1))
    return result


def server_cpu_seconds(base: str) -> float:
    """user + system CPU of the gunicorn master and workers bound to `base`'s port."""
    bind, total = base.removeprefix("http://"), 0.0
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "gunicorn" not in cmdline or bind not in cmdline:
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
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


def wrk(base: str, path: str, headers: dict[str, str], *, seconds: int, connections: int) -> dict[str, float | int]:
    """wrk against base+path with `headers` on every request; adds the server's CPU per request."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "headers.lua"
        script.write_text("".join(f'wrk.headers["{name}"] = [[{value}]]\n' for name, value in headers.items()))
        cpu_before = server_cpu_seconds(base)
        output = subprocess.run(
            ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), base + path],
            check=True, capture_output=True, text=True,
        ).stdout
    result = parse_wrk(output)
    result["cpu_us"] = (server_cpu_seconds(base) - cpu_before) / result["requests"] * 1e6
    return result


def run_policy(base: str, database_url: str, headers: dict[str, str], *, expect: int, warm: int,
               seconds: int, connections: int) -> dict[str, float | int]:
    for _ in range(warm):  # every worker caches the key's verification and the document
        status = httpx.get(f"{base}{POLICY}", headers=headers, timeout=5).status_code
        assert status == expect, status
    time.sleep(STATS_FLUSH_SECONDS)  # backends report their counters about once a second
    before = commits(database_url)
    result = wrk(base, POLICY, headers, seconds=seconds, connections=connections)
    time.sleep(STATS_FLUSH_SECONDS)
    result["db_commits"] = commits(database_url) - before
    return result


def report(cache: str, config: str, what: str, r: dict[str, float | int]) -> None:
    print(f"{cache:11} {config:6} {what:8} {r['rps']:8,.0f}  {r['p50']:6.2f}ms {r['p90']:6.2f}ms {r['p99']:7.2f}ms "
          f"{r['cpu_us']:8.0f} µs  {r['bad']:8} {r['socket_errors']:8}  {r.get('db_commits', '-'):>8}", flush=True)


def stack(cache: str, database_url: str, settings_dir: str, rate_limit: bool) -> dict[str, str]:
    env = stack_env(database_url, CACHE_URL="locmem://" if cache == "locmem" else REDIS_CACHE)
    env["API_RATE_LIMIT_PER_MINUTE"] = "1000000000" if rate_limit else "0"
    if cache == "redis-reuse":
        (Path(settings_dir) / "bench_reuse_settings.py").write_text(REUSE_SETTINGS)
        env["PYTHONPATH"] = settings_dir
        env["DJANGO_SETTINGS_MODULE"] = "bench_reuse_settings"
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--cache", nargs="+", choices=["redis", "redis-reuse", "locmem"],
                        default=["redis", "redis-reuse", "locmem"])
    parser.add_argument("--configs", nargs="+", default=["2x1", "3x1", "4x1", "2x4", "4x4"])
    parser.add_argument("--rate-limit", action="store_true", help="per-key rate limit on (production)")
    parser.add_argument("--body", action="store_true", help="no If-None-Match: measure 200s")
    parser.add_argument("--baseline", action="store_true", help="also measure /healthz on each config")
    args = parser.parse_args()
    print(f"GET {POLICY}, {'200 with body' if args.body else '304 (If-None-Match current)'}, "
          f"wrk -t2 -c{args.connections} -d{args.seconds}s, rate limit {'on' if args.rate_limit else 'off'}")
    print("cache       config path        req/s     p50      p90      p99   CPU/request  non-2xx  sockerr  "
          "db commits")
    for cache in args.cache:
        with scratch_database() as database_url, tempfile.TemporaryDirectory() as settings_dir:
            env = stack(cache, database_url, settings_dir, args.rate_limit)
            manage(env, "migrate", "--noinput")
            key = create_key(env)
            etag = manage(env, "shell", "-c", PUBLISH).strip().splitlines()[-1]
            headers = {"Authorization": f"Bearer {key}", **({} if args.body else {"If-None-Match": etag})}
            for config in args.configs:
                workers, threads = (int(n) for n in config.split("x"))
                with gunicorn(env, workers=workers, threads=threads) as base:
                    result = run_policy(base, database_url, headers, expect=200 if args.body else 304,
                                        warm=workers * threads * 4, seconds=args.seconds,
                                        connections=args.connections)
                    report(cache, config, "policy", result)
                    if args.baseline:
                        healthz = wrk(base, "/healthz", {}, seconds=args.seconds, connections=args.connections)
                        report(cache, config, "healthz", healthz)


if __name__ == "__main__":
    main()
