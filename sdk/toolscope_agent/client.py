"""The toolscope client: background telemetry export, sessions, the tool decorator, and the
synchronous calls (transcript upload, catalog registration, artifact retrieval, `check()`)."""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload
from urllib.parse import quote, urlencode

import httpx

from . import _http, _shapes
from ._http import RetryPolicy, deliver, response_json, server_message
from ._version import __version__
from .decorators import tool as _tool
from .errors import ToolscopeError, UnreachableError, error_for
from .exporter import Event, Exporter, ExporterStats
from .session import Session
from .spool import DEFAULT_MAX_BYTES as DEFAULT_SPOOL_BYTES
from .spool import Spool

logger = logging.getLogger("toolscope_agent")

P = ParamSpec("P")
R = TypeVar("R")

INGEST_PATH = "/api/v1/ingest"
TRANSCRIPTS_PATH = "/api/v1/transcripts"
TOOLS_PATH = "/api/v1/tools"
EMBEDDINGS_PATH = "/api/v1/tools/embeddings"
SEARCH_PATH = "/api/v1/tools/search"
ARTIFACTS_PATH = "/api/v1/artifacts"
SESSIONS_PATH = "/api/v1/sessions"
BATCHES_PATH = "/api/v1/batches"

# Artifact ids as the server issues them: content ids (24 hex digits), or the UUIDs of artifacts
# stored before content ids existed. Ids come from the model: anything else never reaches a URL.
_ARTIFACT_ID = re.compile(r"[0-9a-f]{24}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# What `check()` asks for each scope: a request that passes authentication and the scope check,
# then fails validation or lookup, so it stores and changes nothing. (method, path, body, the
# status that proves the key holds the scope).
_CHECKS: dict[str, tuple[str, str, bytes | None, int]] = {
    "ingest": ("POST", INGEST_PATH, b'{"events":[]}', 400),
    "policy:read": ("GET", f"{ARTIFACTS_PATH}/{'0' * 24}", None, 404),
}

_live_lock = threading.Lock()
_live: set[Client] = set()


def _query_value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _close_all_at_exit() -> None:
    """Registered once with atexit: flush and stop every client that was not closed."""
    with _live_lock:
        clients = list(_live)
    for client in clients:
        try:
            client.close(timeout=client.shutdown_timeout)
        except Exception:
            logger.exception("toolscope: error while closing a client at exit")


atexit.register(_close_all_at_exit)


class Client:
    """A connection to one toolscope project.

    Telemetry (`session()`, `record()`, `@tool`) is queued and sent by a daemon thread; recording
    never blocks and never raises because of the network. `upload_transcript` and
    `register_tools` are synchronous and raise `ToolscopeError` when the server refuses them.

    Options:
        max_queue_size: events held while waiting to be sent; beyond it new events are dropped
            and counted in `stats.dropped`.
        batch_size: events per request (at most 1,000, the server's limit).
        flush_interval: seconds an event may wait for its batch to fill before it is sent.
        max_batch_bytes: uncompressed bytes per request; larger batches are split, and a single
            event above it is dropped (counted as failed).
        max_attempts: attempts per request, the first included, on network errors, 5xx and 429.
        backoff_base, backoff_max: the n-th retry waits a random time in
            [0, min(backoff_max, backoff_base * 2**(n-1))] seconds.
        max_retry_after: the longest Retry-After (seconds) that is honoured.
        timeout: seconds for each HTTP request (connect, read, write).
        gzip_level: compression level of ingest bodies.
        shutdown_timeout: how long the exit hook waits for pending events.
        spool_dir: a directory where batches the server could not take are kept and sent again
            once it answers, oldest first, also by the next process that uses the directory
            (toolscope_agent.spool); None (the default) keeps nothing on disk.
        spool_max_bytes: the spool's bound on disk (256 MiB); past it the oldest are dropped.
        transport / http_client: an httpx transport, or a whole httpx.Client (not closed by
            `close()`), e.g. for proxies or tests.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_queue_size: int = 10_000,
        batch_size: int = 500,
        flush_interval: float = 1.0,
        max_batch_bytes: int = 4_000_000,
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = _http.DEFAULT_MAX_RETRY_AFTER,
        timeout: float = 10.0,
        gzip_level: int = 6,
        shutdown_timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
        spool_max_bytes: int = DEFAULT_SPOOL_BYTES,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required, e.g. https://toolscope.example.com")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        if not api_key or not api_key.isascii():
            raise ValueError("api_key is required (ASCII, as issued by toolscope)")
        if transport is not None and http_client is not None:
            raise ValueError("pass either transport or http_client, not both")
        self.base_url = base_url.rstrip("/")
        self.shutdown_timeout = shutdown_timeout
        self._retry = RetryPolicy(
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            max_retry_after=max_retry_after,
        )
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout, transport=transport)
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": f"{_http.USER_AGENT}/{__version__}",
            "Accept": "application/json",
        }
        self._known_hashes: set[str] = set()
        self._closed = False
        self.spool: Spool | None = None
        try:
            if spool_dir is not None:
                self.spool = Spool.in_free_directory(spool_dir, max_bytes=spool_max_bytes)
            self._exporter = Exporter(
                http=self._http,
                url=self.base_url + INGEST_PATH,
                headers=self._headers,
                retry=self._retry,
                max_queue_size=max_queue_size,
                batch_size=batch_size,
                flush_interval=flush_interval,
                max_batch_bytes=max_batch_bytes,
                gzip_level=gzip_level,
                on_undelivered=self._undelivered,
                spool=self.spool,
            )
        except Exception:
            if self._owns_http:
                self._http.close()
            raise
        with _live_lock:
            _live.add(self)

    # -- telemetry ------------------------------------------------------------------------------

    def session(
        self,
        *,
        agent_name: str | None = None,
        model: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session; `with client.session(...) as s:` records its start and end."""
        return Session(self, agent_name=agent_name, model=model, metadata=metadata, session_id=session_id)

    def record(self, event: Event) -> bool:
        """Queue one raw event (docs/events.md) without blocking. Returns False when it was
        dropped (queue full or client closed), which `stats.dropped` counts."""
        return self._exporter.put(event)

    @overload
    def tool(self, fn: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def tool(
        self, fn: str | None = None, /, *, name: str | None = None
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def tool(self, fn: Any = None, /, *, name: str | None = None) -> Any:
        """Decorator recording a tool function's calls in the current session:

            @client.tool()            # or @client.tool, or @client.tool(name="search")
            def read_file(path: str) -> str: ...

        Outside a session the function is just called."""
        if callable(fn):
            return _tool(fn, name)
        tool_name = fn if isinstance(fn, str) else name

        def decorate(function: Callable[P, R]) -> Callable[P, R]:
            return _tool(function, tool_name)

        return decorate

    @property
    def stats(self) -> ExporterStats:
        """Counters: sent, dropped, failed, retried, rejected, queued."""
        return self._exporter.stats

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event recorded so far was sent or given up on. True only when the
        server accepted all of them: False on timeout, or when any event since the previous
        flush failed (a refused key, retries exhausted), was rejected, or was dropped; `stats`
        tells which."""
        return self._exporter.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Flush and stop the exporter thread; later events are dropped. Idempotent. Returns
        False, as `flush()` does, when pending events could not be delivered within `timeout`
        seconds or the server did not accept them all."""
        with _live_lock:
            _live.discard(self)
        self._closed = True
        finished = self._exporter.close(timeout)
        if finished and self._owns_http:
            self._http.close()
        return finished and self._exporter.settle()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- synchronous calls ----------------------------------------------------------------------

    def upload_transcript(
        self,
        payload: Mapping[str, Any],
        *,
        format: str | None = None,
        session_id: str | None = None,
        agent_name: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """POST a whole conversation to `/api/v1/transcripts` and return the server's answer.

        `payload` is the request as sent to the provider: `{"messages", "tools"}` (OpenAI Chat
        Completions), `{"system", "messages", "tools"}` (Anthropic Messages) or `{"input",
        "tools"}` (OpenAI Responses). `format` names it when the server should not guess.
        Retried like telemetry; raises ToolscopeError when refused or unreachable.
        """
        body: dict[str, Any] = {
            key: value
            for key, value in (
                ("format", format),
                ("session_id", session_id),
                ("agent_name", agent_name),
                ("model", model),
            )
            if value is not None
        }
        body.update(payload)
        return self._request("POST", TRANSCRIPTS_PATH, body)

    def register_tools(self, tools: Iterable[Any]) -> dict[str, Any]:
        """PUT tool definitions (any common shape) into the project's catalog."""
        definitions = []
        for definition in tools:
            full, digest = _shapes.tool_definition(definition)
            if digest is None:
                raise ValueError(f"register_tools needs full definitions, not a schema_hash reference: {full}")
            definitions.append(full)
        return self._request("PUT", TOOLS_PATH, {"tools": definitions})

    def get_artifact(self, artifact_id: str) -> dict[str, Any]:
        """GET `/api/v1/artifacts/{id}`: the original of a compacted output of this key's project
        (needs the `policy:read` scope), as `{"id", "original", "compacted", "tokens_before",
        "tokens_after", "strategy", "created_at", "tool_name", "call_id"}`. Raises ToolscopeError
        (`.status` 404 when the project holds no such artifact) and ValueError for a string that
        is not an artifact id."""
        if not isinstance(artifact_id, str) or not _ARTIFACT_ID.fullmatch(artifact_id):
            raise ValueError(f"not an artifact id: {artifact_id!r}")
        return self._request("GET", f"{ARTIFACTS_PATH}/{artifact_id}")

    def search_tools(self, query: str, top_k: int = 8, *, label: str = "production") -> dict[str, Any]:
        """POST `/api/v1/tools/search`: the project's catalog ranked as `label`'s version ranks it
        (needs `policy:read`), as `{"ranking", "results": [{"name", "score", "summary",
        "parameters"}]}`. One attempt, not retried: an agent waiting on a search would rather
        rank locally. Raises ToolscopeError when the server does not answer with results."""
        content = _shapes.json_text({"query": query, "top_k": top_k, "label": label}).encode("utf-8", "replace")
        outcome = self._deliver("POST", SEARCH_PATH, content, RetryPolicy(max_attempts=1))
        data = response_json(outcome.response) if outcome.kind == "ok" and outcome.response is not None else None
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            return data
        raise self._error("POST", SEARCH_PATH, outcome)

    def tool_embeddings(self, *, label: str = "production") -> dict[str, Any]:
        """GET `/api/v1/tools/embeddings`: the stored embedding of each catalog definition for
        `label`'s version (needs `policy:read`), as `{"model", "dimension", "vectors": {text
        SHA-256: base64 float32}}`; "model" is None when the version does not rank by meaning
        with the server's model. Raises ToolscopeError when the server does not answer."""
        return self._request("GET", f"{EMBEDDINGS_PATH}?{urlencode({'label': label})}")

    # -- reading (the `read` scope) --------------------------------------------------------------

    def sessions(self, *, start: datetime | str | None = None, end: datetime | str | None = None,
                 **filters: Any) -> Iterator[dict[str, Any]]:
        """Every session started in [start, end) (default: the last 24 hours), newest first, as
        GET /api/v1/sessions lists them; pages are fetched as the iteration reaches them.
        `filters`: agent, model, errors ("yes"/"no"), near_window, gateway (booleans), limit (page
        size)."""
        params: dict[str, Any] = {key: _query_value(value) for key, value in
                                  {"start": start, "end": end, **filters}.items() if value is not None}
        while True:
            page = self._request("GET", f"{SESSIONS_PATH}?{urlencode(params)}")
            yield from page.get("results", [])
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    def session_detail(self, session_id: str, *, limit: int | None = None) -> dict[str, Any]:
        """GET /api/v1/sessions/{id}, every page of it: {"session", "turns", "calls", "totals"}
        (ToolscopeError 404 when the project has no such session). The server answers a session in
        pages of turns and calls together (`limit` each, default 500); they are fetched one after
        the other and joined."""
        path = f"{SESSIONS_PATH}/{quote(session_id, safe='')}"
        params: dict[str, Any] = {} if limit is None else {"limit": limit}
        detail = self._request("GET", f"{path}?{urlencode(params)}" if params else path)
        while detail.get("next_cursor"):
            page = self._request("GET", f"{path}?{urlencode({**params, 'cursor': detail['next_cursor']})}")
            detail["turns"] += page.get("turns", [])
            detail["calls"] += page.get("calls", [])
            detail["next_cursor"] = page.get("next_cursor")
        return detail

    def batch(self, batch_id: int) -> dict[str, Any]:
        """GET /api/v1/batches/{id}: an ingest batch's status and each event's outcome (stored,
        quarantined with its reason, pending, failed). The id is what ingest answered."""
        return self._request("GET", f"{BATCHES_PATH}/{int(batch_id)}")

    def check(self, scopes: Iterable[str] = ("ingest",)) -> None:
        """Make sure telemetry can reach the project: the URL answers as a toolscope server, the
        key is valid and holds each of `scopes` ("ingest", "policy:read"). One request per scope,
        not retried, nothing stored. Raises `errors.UnreachableError` (no answer, or not
        toolscope's API), `errors.AuthenticationError` (401: unknown or revoked key),
        `errors.ScopeError` (403: a scope is missing), or ToolscopeError (any other failure),
        each carrying the server's message."""
        once = RetryPolicy(max_attempts=1)
        foreign = f"{self.base_url} does not answer as a toolscope server"
        for scope in scopes:
            if scope not in _CHECKS:
                raise ValueError(f"unknown scope {scope!r}; check() knows: {', '.join(_CHECKS)}")
            method, path, body, proof = _CHECKS[scope]
            outcome = self._deliver(method, path, body, once)
            response = outcome.response
            if response is not None and response.status_code == proof and isinstance(response_json(response), dict):
                continue
            raise self._error(method, path, outcome, unexpected=foreign)

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        content = None if body is None else _shapes.json_text(body).encode("utf-8", "replace")
        outcome = self._deliver(method, path, content, self._retry)
        response = outcome.response
        if outcome.kind == "ok" and response is not None:
            data = response_json(response)
            if isinstance(data, dict):
                return data
            return {} if data is None else {"data": data}
        raise self._error(method, path, outcome)

    def _deliver(self, method: str, path: str, content: bytes | None, retry: RetryPolicy) -> _http.Outcome:
        if self._closed:
            raise ToolscopeError("the client is closed")
        headers = self._headers if content is None else {**self._headers, "Content-Type": "application/json"}
        return deliver(self._http, method, self.base_url + path, content=content, headers=headers, policy=retry,
                       wait=_http.sleep)

    def _error(self, method: str, path: str, outcome: _http.Outcome, unexpected: str | None = None) -> ToolscopeError:
        """The exception for a failed request; with `unexpected` (check()), an answer that is not
        toolscope's becomes UnreachableError with that sentence."""
        response = outcome.response
        if response is None:
            return UnreachableError(
                f"{method} {self.base_url + path} failed after {outcome.attempts} attempts: {outcome.error}")
        data = response_json(response)
        body = data if data is not None else response.text
        message = server_message(response)
        if outcome.kind == "gave_up":
            message = f"{message} (gave up after {outcome.attempts} attempts)"
        status = response.status_code
        busy = status == 429 or status >= 500  # toolscope answered, but not now
        if unexpected is not None and status not in (401, 403) and not (busy and isinstance(data, dict)):
            return UnreachableError(f"{unexpected} (HTTP {status}: {message})", status=status, body=body)
        return error_for(message, status=status, body=body)

    # -- schema hashes ----------------------------------------------------------------------------

    def _advertise(self, tools: Iterable[Any], new_hashes: list[str]) -> list[dict[str, Any]]:
        """Turn-event form of the advertised tools: the full definition the first time this client
        sees a schema hash, `{"name", "schema_hash"}` afterwards."""
        known = self._known_hashes
        out: list[dict[str, Any]] = []
        for definition in tools:
            try:
                full, digest = _shapes.tool_definition(definition)
            except Exception as exc:
                logger.warning("toolscope: skipping a tool definition that cannot be read: %s", exc)
                continue
            if digest is None:
                out.append(full)
            elif digest in known:
                out.append({"name": full["name"], "schema_hash": digest})
            else:
                known.add(digest)
                new_hashes.append(digest)
                out.append(full)
        return out

    def _forget_hashes(self, hashes: Iterable[str]) -> None:
        for digest in hashes:
            self._known_hashes.discard(digest)

    def _undelivered(self, events: list[Event]) -> None:
        """Full definitions that never reached the server are sent again by the next turn."""
        for event in events:
            if event.get("type") != "turn":
                continue
            for tool in event.get("tools") or ():
                if isinstance(tool, dict):
                    digest = _shapes.full_definition_hash(tool)
                    if digest is not None:
                        self._known_hashes.discard(digest)

    def __repr__(self) -> str:
        return f"<toolscope_agent.Client {self.base_url}{' closed' if self._closed else ''}>"
