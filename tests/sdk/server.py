"""A real HTTP server for the SDK tests: records every request (gzip bodies decompressed) and
answers from a script of actions, then with 202/200 and per-event results."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: bytes
    json: Any
    at: float

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.json["events"] if isinstance(self.json, dict) else []

    @property
    def ids(self) -> list[str]:
        return [event["id"] for event in self.events]


@dataclass
class Action:
    """One scripted answer. `body` may be a callable of the recorded request."""

    status: int = 202
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hold: threading.Event | None = None


def accepted(request: Recorded) -> dict[str, Any]:
    results = [{"id": event.get("id"), "status": "accepted"} for event in request.events]
    return {"batch_id": 1, "accepted": len(results), "duplicates": 0, "rejected": 0, "results": results}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    recorder: RecordingServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        recorder = self.server.recorder
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
        request = Recorded(
            method=self.command,
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            raw=raw,
            body=body,
            json=json.loads(body) if body else None,
            at=time.monotonic(),
        )
        action = recorder._record(request)
        if action.hold is not None:
            action.hold.wait(10)
        if action.drop:
            self.close_connection = True
            return
        answer = action.body(request) if callable(action.body) else action.body
        if answer is None:
            if action.status < 300 and request.path == "/api/v1/ingest":
                answer = accepted(request)
            elif action.status < 300:
                answer = {"ok": True, "path": request.path, "received": request.json}
            else:
                answer = {"detail": f"scripted {action.status}"}
        payload = json.dumps(answer).encode()
        self.send_response(action.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in action.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class RecordingServer:
    def __init__(self, port: int = 0) -> None:
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.recorder = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Recorded] = []
        self._script: deque[Action] = deque()
        self._condition = threading.Condition()
        self._holds: list[threading.Event] = []
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> RecordingServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        for hold in self._holds:
            hold.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def then(self, *actions: Action) -> RecordingServer:
        """Answer the next requests with these actions, in order."""
        with self._condition:
            self._script.extend(actions)
            self._holds.extend(action.hold for action in actions if action.hold is not None)
        return self

    def _record(self, request: Recorded) -> Action:
        with self._condition:
            self.requests.append(request)
            action = self._script.popleft() if self._script else Action(status=202 if request.method == "POST" else 200)
            self._condition.notify_all()
            return action

    def wait_for(self, predicate: Callable[[list[Recorded]], bool], timeout: float = 5.0) -> list[Recorded]:
        with self._condition:
            if not self._condition.wait_for(lambda: predicate(self.requests), timeout):
                raise AssertionError(f"timed out; the server saw {len(self.requests)} requests")
            return list(self.requests)

    def wait_requests(self, count: int, timeout: float = 5.0) -> list[Recorded]:
        return self.wait_for(lambda requests: len(requests) >= count, timeout)

    @property
    def ingest(self) -> list[Recorded]:
        with self._condition:
            return [r for r in self.requests if r.path == "/api/v1/ingest"]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [event for request in self.ingest for event in request.events]


def free_port() -> int:
    """A port nothing listens on (yet)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
