"""Through the production web server (granian, as docker-compose.yml starts it): chunked request
bodies are read, gzip or not; errors are JSON; an unreachable database is a 503.

Django's test client cannot send a chunked body, and it bypasses the WSGI layers of
toolscope/wsgi.py, so these tests talk HTTP to a real server on this test run's database.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.db import connection

from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch

ROOT = Path(__file__).resolve().parents[2]
GRANIAN = Path(sys.executable).parent / "granian"
LIMIT = 200_000  # INGEST_MAX_BODY_BYTES of the servers started here
TRANSCRIPT_LIMIT = 4 * LIMIT  # and their TRANSCRIPT_MAX_BODY_BYTES


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    params = connection.get_connection_params()
    user = params.get("user", "postgres")
    return f"postgres://{user}@{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{params['dbname']}"


@pytest.fixture(scope="module")
def start_server(tmp_path_factory) -> Iterator:
    servers: list[subprocess.Popen] = []

    def start(database_url: str) -> str:
        port = _free_port()
        log = tmp_path_factory.mktemp("granian") / "server.log"
        env = {**os.environ, "DATABASE_URL": database_url, "TOOLSCOPE_ENV": "test", "DEBUG": "true",
               "INGEST_MAX_BODY_BYTES": str(LIMIT), "TRANSCRIPT_MAX_BODY_BYTES": str(TRANSCRIPT_LIMIT),
               "API_RATE_LIMIT_PER_MINUTE": "0"}
        env.pop("CACHE_URL", None)
        process = subprocess.Popen(  # the web service's command in docker-compose.yml
            [str(GRANIAN), "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--blocking-threads", "1", "toolscope.wsgi:application"],
            cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )
        servers.append(process)
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                return base
            except httpx.TransportError:
                if process.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"granian did not start: {log.read_text()[-2000:]}")

    yield start
    for process in servers:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def server(start_server, transactional_db) -> str:
    return start_server(_database_url())


@pytest.fixture
def key(project):
    return make_key(project, scopes=["ingest"])


def chunks(data: bytes, size: int = 7) -> Iterator[bytes]:
    """A body httpx sends chunked (no Content-Length), in small pieces."""
    for start in range(0, len(data), size):
        yield data[start:start + size]


def batch(*ids: str) -> bytes:
    return json.dumps({"events": [{"type": "session", "id": event_id} for event_id in ids]}).encode()


def post(server: str, key, content, **headers) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key.secret}", "Content-Type": "application/json", **headers}
    return httpx.post(f"{server}/api/v1/ingest", content=content, headers=headers, timeout=30)


def stored_ids() -> list[str]:
    return [event["id"] for batch in IngestBatch.objects.all() for event in batch.payload["events"]]


def test_a_chunked_body_is_read(server, key):
    response = post(server, key, chunks(batch("chunked-1", "chunked-2")))
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.request.headers
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] == 2
    assert sorted(stored_ids()) == ["chunked-1", "chunked-2"]


def test_a_chunked_gzip_body_is_read(server, key):
    response = post(server, key, chunks(gzip.compress(batch("zipped")), 5), **{"Content-Encoding": "gzip"})
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert response.status_code == 202, response.text
    assert stored_ids() == ["zipped"]


def test_a_chunked_gzip_body_with_trailing_data_is_400(server, key):
    response = post(server, key, chunks(gzip.compress(batch("zipped")) + b"trailing"),
                    **{"Content-Encoding": "gzip"})
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert stored_ids() == []


def test_a_chunked_body_over_the_limit_is_a_json_413(server, key):
    response = post(server, key, chunks(b" " * (LIMIT + 1) + batch("big"), 64 * 1024))
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert stored_ids() == []


def test_a_chunked_transcript_is_held_to_the_transcript_limit(server, key):
    from tests.long_sessions import long_transcript

    body = json.dumps(long_transcript("openai_chat", 200)).encode()
    assert LIMIT < len(body) < TRANSCRIPT_LIMIT
    headers = {"Authorization": f"Bearer {key.secret}", "Content-Type": "application/json"}
    response = httpx.post(f"{server}/api/v1/transcripts", content=chunks(body, 64 * 1024), headers=headers,
                          timeout=30)
    assert response.status_code == 202, response.text
    assert response.json()["batch_ids"] == list(IngestBatch.objects.values_list("pk", flat=True))
    over = body[:-1] + b" " * TRANSCRIPT_LIMIT + b"}"
    response = httpx.post(f"{server}/api/v1/transcripts", content=chunks(over, 64 * 1024), headers=headers,
                          timeout=30)
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"


def test_an_unknown_api_path_is_json_under_debug(server):
    response = httpx.get(f"{server}/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert response.headers["X-Request-ID"]


def test_an_unreachable_database_is_a_503_with_retry_after(start_server, db):
    base = start_server(f"postgres://postgres@127.0.0.1:{_free_port()}/toolscope")  # nothing listens there
    response = httpx.get(f"{base}/api/v1/tools", headers={"Authorization": "Bearer ts_abcdefgh_" + "x" * 40})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    body = response.json()
    assert body["code"] == "database_unavailable"
    assert body["request_id"] == response.headers["X-Request-ID"]
