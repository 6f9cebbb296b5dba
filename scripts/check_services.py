"""Stops the test run at once, with how to fix it, when PostgreSQL or Redis is not reachable."""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlsplit

HOW_TO_START = {
    "PostgreSQL": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
    "  (or: docker compose up -d postgres)",
    "Redis": "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no"
    "  (or: docker compose up -d redis)",
}


def reachable(url: str, default_port: int) -> str | None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    try:
        with socket.create_connection((host, port), timeout=3):
            return None
    except OSError as exc:
        return f"{host}:{port} ({exc.strerror or exc})"


def main() -> int:
    services = [
        ("PostgreSQL", "DATABASE_URL", os.environ.get("DATABASE_URL", ""), 5432),
        ("Redis", "CELERY_BROKER_URL", os.environ.get("CELERY_BROKER_URL", ""), 6379),
    ]
    failed = False
    for name, variable, url, port in services:
        problem = reachable(url, port)
        if problem:
            failed = True
            print(f"{name} is not reachable at {problem}, from {variable}.", file=sys.stderr)
            print(f"  Start it with: {HOW_TO_START[name]}", file=sys.stderr)
            print(f"  or point {variable} at a running server.", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
