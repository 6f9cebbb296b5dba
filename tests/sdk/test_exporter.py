"""The background exporter against a real local HTTP server: batching, compression, retries,
giving up, back-pressure, flush and close."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.sdk.conftest import API_KEY
from tests.sdk.server import Action, RecordingServer, free_port


def event(n: int, **extra: object) -> dict[str, object]:
    return {"type": "tool_call", "id": f"e{n}", "session_id": "s", "turn_index": 0, "tool_name": "t", **extra}


def record_many(client, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        assert client.record(event(n))


def test_batches_by_count(server, make_client):
    client = make_client(server.url, batch_size=10, flush_interval=30)
    record_many(client, 25)

    requests = server.wait_requests(2)
    time.sleep(0.2)
    assert [len(r.events) for r in server.ingest] == [10, 10], "the last 5 wait for their batch to fill"

    assert client.flush(timeout=5)
    assert [len(r.events) for r in server.ingest] == [10, 10, 5]
    assert [e["id"] for e in server.events] == [f"e{n}" for n in range(25)]
    assert requests[0].ids == [f"e{n}" for n in range(10)]
    assert client.stats.sent == 25


def test_batches_by_time(server, make_client):
    client = make_client(server.url, batch_size=500, flush_interval=0.3)
    started = time.monotonic()
    record_many(client, 3)

    (request,) = server.wait_requests(1, timeout=3)
    elapsed = request.at - started
    assert 0.25 <= elapsed < 2.0
    assert request.ids == ["e0", "e1", "e2"]


def test_body_is_gzip_json_with_bearer_key(server, client):
    record_many(client, 2)
    assert client.flush(timeout=5)

    (request,) = server.ingest
    assert request.method == "POST"
    assert request.path == "/api/v1/ingest"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["content-encoding"] == "gzip"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("toolscope-agent/")
    assert request.raw[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(request.raw)) == {"events": request.events}
    assert request.ids == ["e0", "e1"]


def test_retries_a_503_with_the_same_ids(server, client):
    server.then(Action(status=503))
    record_many(client, 3)
    assert client.flush(timeout=5)

    first, second = server.ingest
    assert first.ids == second.ids == ["e0", "e1", "e2"]
    assert first.body == second.body, "a retried batch is byte for byte the same"
    stats = client.stats
    assert (stats.sent, stats.retried, stats.failed) == (3, 1, 0)


def test_honours_retry_after_on_429(server, make_client):
    client = make_client(server.url, backoff_base=0.001, backoff_max=0.001)
    server.then(Action(status=429, headers={"Retry-After": "1"}, body={"detail": "slow down"}))
    record_many(client, 1)
    assert client.flush(timeout=5)

    first, second = server.ingest
    assert second.at - first.at >= 0.95
    assert first.ids == second.ids
    assert client.stats.retried == 1


def test_retries_when_the_server_drops_the_connection(server, client):
    server.then(Action(drop=True), Action(drop=True))
    record_many(client, 2)
    assert client.flush(timeout=5)

    assert [r.ids for r in server.ingest] == [["e0", "e1"]] * 3
    assert (client.stats.sent, client.stats.retried) == (2, 2)


def test_retries_until_the_server_listens(make_client):
    port = free_port()
    client = make_client(f"http://127.0.0.1:{port}", backoff_base=0.1, backoff_max=0.2, max_attempts=30)
    record_many(client, 4)
    time.sleep(0.4)
    late = RecordingServer(port=port).start()
    try:
        assert client.flush(timeout=10)
        assert [e["id"] for e in late.events] == ["e0", "e1", "e2", "e3"]
        assert client.stats.retried >= 1
        assert client.stats.sent == 4
    finally:
        late.stop()


def test_gives_up_after_max_attempts(make_client, caplog):
    client = make_client(f"http://127.0.0.1:{free_port()}", max_attempts=3, batch_size=2)
    with caplog.at_level(logging.WARNING, logger="toolscope_agent"):
        record_many(client, 3)
        assert not client.flush(timeout=5), "nothing was accepted"

    stats = client.stats
    assert (stats.sent, stats.failed, stats.retried) == (0, 3, 4)  # 2 batches, 2 retries each
    assert "gave up on a batch of 2 events after 3 attempts" in caplog.text


def test_gives_up_on_repeated_5xx(server, make_client):
    client = make_client(server.url, max_attempts=2)
    server.then(Action(status=500), Action(status=502))
    record_many(client, 1)
    assert not client.flush(timeout=5)
    assert len(server.ingest) == 2
    assert (client.stats.failed, client.stats.sent) == (1, 0)
    # The exporter carries on with the next batch.
    record_many(client, 1, start=1)
    assert client.flush(timeout=5), "every event since the previous flush was accepted"
    assert server.ingest[-1].ids == ["e1"]
    assert client.stats.sent == 1


def test_400_is_not_retried_and_logged_once(server, client, caplog):
    envelope_error = {"detail": "events must be a list"}
    server.then(Action(status=400, body=envelope_error), Action(status=400, body=envelope_error))
    with caplog.at_level(logging.DEBUG, logger="toolscope_agent"):
        record_many(client, 2)
        assert not client.flush(timeout=5)
        record_many(client, 1, start=2)
        assert not client.flush(timeout=5)

    assert len(server.ingest) == 2, "one request per batch, none retried"
    assert (client.stats.failed, client.stats.retried, client.stats.sent) == (3, 0, 0)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "HTTP 400: events must be a list" in errors[0].getMessage()


def test_rejected_events_in_a_202_are_counted_and_logged(server, client, caplog):
    def partly(request):
        results = [{"id": "e0", "status": "accepted"}]
        results.append({"id": "e1", "status": "rejected", "reason": "must be a string", "path": "events[1].output"})
        return {"accepted": 1, "duplicates": 0, "rejected": 1, "results": results}

    server.then(Action(status=202, body=partly))
    with caplog.at_level(logging.WARNING, logger="toolscope_agent"):
        record_many(client, 2)
        assert not client.flush(timeout=5), "one event was refused"
    assert (client.stats.sent, client.stats.rejected) == (2, 1)
    assert "rejected event 'e1': events[1].output must be a string" in caplog.text


def test_full_queue_drops_without_blocking(server, make_client):
    hold = threading.Event()
    server.then(Action(hold=hold))
    client = make_client(server.url, max_queue_size=100, batch_size=10, flush_interval=0.01)
    record_many(client, 10)
    server.wait_requests(1)  # the exporter is now stuck in that request

    slowest = 0.0
    accepted = 0
    for n in range(10, 2010):
        started = time.perf_counter()
        accepted += client.record(event(n))
        slowest = max(slowest, time.perf_counter() - started)
    assert accepted == 100
    stats = client.stats
    assert (stats.dropped, stats.queued) == (1900, 100)
    assert slowest < 0.1, f"record() blocked for {slowest * 1000:.1f} ms"

    hold.set()
    assert not client.flush(timeout=5), "events were dropped"
    assert client.stats.sent == 110
    assert len(server.events) == 110


def test_flush_waits_only_for_what_was_queued(server, client):
    assert client.flush(timeout=1), "nothing queued: returns at once"
    hold = threading.Event()
    server.then(Action(hold=hold))
    record_many(client, 2)
    assert not client.flush(timeout=0.2), "the server holds the request"
    hold.set()
    assert client.flush(timeout=5)
    assert client.stats.sent == 2


def test_close_flushes_stops_and_drops_later_events(server, client):
    record_many(client, 5)
    assert client.close(timeout=5)
    assert [e["id"] for e in server.events] == [f"e{n}" for n in range(5)]
    assert not client._exporter.thread.is_alive()
    assert client._exporter.thread.daemon

    assert not client.record(event(99))
    assert client.stats.dropped == 1
    assert not client.close(timeout=1), "closing twice is harmless, and reports the dropped event"
    assert client.flush(timeout=1)


def test_close_gives_up_after_its_timeout(make_client):
    client = make_client(f"http://127.0.0.1:{free_port()}", max_attempts=100, backoff_base=0.2, backoff_max=0.2)
    record_many(client, 3)
    started = time.monotonic()
    assert not client.close(timeout=0.3)
    assert time.monotonic() - started < 1.0
    client._exporter.thread.join(2)
    assert not client._exporter.thread.is_alive()
    assert client.stats.failed == 3


def test_splits_batches_by_size(server, make_client):
    client = make_client(server.url, max_batch_bytes=5000)
    for n in range(6):
        client.record(event(n, output="x" * 2000))
    client.record(event(6, output="y" * 6000))  # alone over the limit
    assert not client.flush(timeout=5), "one event was too large"
    assert [len(r.events) for r in server.ingest] == [2, 2, 2]
    assert all(len(r.body) <= 5000 for r in server.ingest)
    assert (client.stats.sent, client.stats.failed) == (6, 1)


def test_a_413_splits_the_batch(server, client):
    server.then(Action(status=413, body={"detail": "too large"}))
    record_many(client, 4)
    assert client.flush(timeout=5)
    assert [r.ids for r in server.ingest] == [["e0", "e1", "e2", "e3"], ["e0", "e1"], ["e2", "e3"]]
    assert client.stats.sent == 4


def test_unencodable_events_fail_alone(server, client):
    client.record(event(0, arguments={"x": float("nan")}))
    client.record(event(1, arguments={"path": Path("/tmp/x")}))  # made text
    assert not client.flush(timeout=5)
    assert [e["id"] for e in server.events] == ["e1"]
    assert server.events[0]["arguments"] == {"path": "/tmp/x"}
    assert (client.stats.sent, client.stats.failed) == (1, 1)


def test_flushes_at_interpreter_exit_and_never_imports_django(server):
    script = textwrap.dedent(
        f"""
        import sys
        from toolscope_agent import Client
        client = Client({server.url!r}, "k", flush_interval=60)
        with client.session(agent_name="exit-test") as s:
            s.tool_call("bash", {{"cmd": "ls"}}, output="a b")
        assert "django" not in sys.modules
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    subprocess.run([sys.executable, "-c", script], check=True, timeout=20, env=env)
    assert [e["type"] for e in server.events] == ["session", "tool_call", "session"]


@pytest.mark.parametrize(
    ("base_url", "options"),
    [
        ("http://127.0.0.1:1", {"batch_size": 0}),
        ("http://127.0.0.1:1", {"batch_size": 1001}),
        ("http://127.0.0.1:1", {"max_queue_size": 0}),
        ("http://127.0.0.1:1", {"max_attempts": 0}),
        ("127.0.0.1:8000", {}),
    ],
)
def test_rejects_bad_options(base_url, options):
    from toolscope_agent import Client

    with pytest.raises(ValueError, match="must"):
        Client(base_url, "k", **options)
