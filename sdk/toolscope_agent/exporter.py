"""The background exporter: a bounded queue drained by one daemon thread that batches events and
POSTs them, gzip-compressed, to `/api/v1/ingest`.

The caller's side (`put`) is a `put_nowait` on the queue and nothing else; JSON encoding,
compression, HTTP and logging all happen on the exporter thread, which never raises.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from . import _shapes
from ._http import Outcome, RetryPolicy, deliver, response_json, server_message
from .spool import Spool

logger = logging.getLogger("toolscope_agent")

Event = dict[str, Any]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_shapes.json_default)
_ENVELOPE_OVERHEAD = len(b'{"events":[]}')
_YIELD_EVERY = 32
_ONCE = RetryPolicy(max_attempts=1)  # a spooled batch is tried once per round, the rounds backing off
SPOOL_BACKOFF = 1.0
SPOOL_BACKOFF_MAX = 60.0
SPOOL_CLOSE_GRACE = 3.0  # seconds a close past its timeout waits for the rest to be spooled


@dataclass(frozen=True)
class ExporterStats:
    """Event counters since the client was created.

    sent: events the server acknowledged (2xx); rejected: of those, events the server refused one
    by one (see the logged reason); dropped: events discarded because the queue was full or the
    client closed; failed: events given up on (attempts exhausted without a spool, a
    non-retryable answer such as 400/401, or unencodable); retried: requests sent again; queued:
    events waiting right now; spooled: events on disk right now, waiting for the server (see
    toolscope_agent.spool).
    """

    sent: int = 0
    dropped: int = 0
    failed: int = 0
    retried: int = 0
    rejected: int = 0
    queued: int = 0
    spooled: int = 0


class _Stop:
    """Queue marker: ship what is pending and end the thread."""


_STOP = _Stop()


class Exporter:
    def __init__(
        self,
        *,
        http: httpx.Client,
        url: str,
        headers: dict[str, str],
        retry: RetryPolicy,
        max_queue_size: int = 10_000,
        batch_size: int = 500,
        flush_interval: float = 1.0,
        max_batch_bytes: int = 4_000_000,
        gzip_level: int = 6,
        on_undelivered: Callable[[list[Event]], None] | None = None,
        spool: Spool | None = None,
        name: str = "toolscope-exporter",
    ) -> None:
        if max_queue_size < 1:
            raise ValueError("max_queue_size must be at least 1")
        if not 1 <= batch_size <= 1000:
            raise ValueError("batch_size must be between 1 and 1000 (the server's limit per request)")
        if flush_interval <= 0:
            raise ValueError("flush_interval must be > 0")
        if max_batch_bytes < 1024:
            raise ValueError("max_batch_bytes must be at least 1024")
        if not 0 <= gzip_level <= 9:
            raise ValueError("gzip_level must be between 0 and 9")
        self._http = http
        self._url = url
        self._headers = {**headers, "Content-Type": "application/json", "Content-Encoding": "gzip"}
        self._retry = retry
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._max_batch_bytes = max_batch_bytes
        self._gzip_level = gzip_level
        self._on_undelivered = on_undelivered
        self._spool = spool if spool is not None and spool.usable else None
        self._spool_retry_at = 0.0  # monotonic time of the next attempt at the spool
        self._spool_backoff = SPOOL_BACKOFF
        self._spool_only = False  # closing without time to send: what is left goes to the spool

        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue_size)
        self._closed = False
        self._close_lock = threading.Lock()
        self._abort = threading.Event()

        self._stats_lock = threading.Lock()
        self._sent = 0
        self._dropped = 0
        self._failed = 0
        self._retried = 0
        self._rejected = 0
        self._dropped_reported = 0
        self._abandoned = 0
        self._dropped_reported_at = 0.0
        self._unaccepted_settled = 0  # failed + rejected + dropped when a flush last settled
        self._logged: set[tuple[Any, ...]] = set()

        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the caller's side -------------------------------------------------------------------

    def put(self, event: Event) -> bool:
        """Queue one event without blocking; False (and counted as dropped) when it cannot be."""
        if self._closed:
            self._count_dropped()
            return False
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._count_dropped()
            return False
        return True

    def _count_dropped(self) -> None:
        with self._stats_lock:
            self._dropped += 1

    @property
    def stats(self) -> ExporterStats:
        with self._stats_lock:
            return ExporterStats(
                sent=self._sent,
                dropped=self._dropped,
                failed=self._failed,
                retried=self._retried,
                rejected=self._rejected,
                queued=self._queue.qsize(),
                spooled=self._spool.events if self._spool is not None else 0,
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event queued before this call was sent or given up on.

        Returns False if that did not happen within `timeout` seconds (None: wait as long as it
        takes; each batch is bounded by the retry policy), and False when it did but some event
        since the previous flush was not accepted (see `settle`).
        """
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        if self._closed or threading.current_thread() is self._thread:
            return self._join(deadline) and self.settle()
        done = threading.Event()
        try:
            self._queue.put(done, timeout=_remaining(deadline))
        except queue.Full:
            return False
        return done.wait(_remaining(deadline)) and self.settle()

    def settle(self) -> bool:
        """True when no event failed, was rejected or was dropped since the last settle (or since
        the start). A flush that times out does not settle, so the next one still answers for
        the events it waited on."""
        with self._stats_lock:
            unaccepted = self._failed + self._rejected + self._dropped
            clean = unaccepted == self._unaccepted_settled
            self._unaccepted_settled = unaccepted
        return clean and not (self._spool is not None and self._spool.pending)

    def close(self, timeout: float | None = None) -> bool:
        """Flush, then stop the thread. Idempotent. Returns False if the queue could not be
        emptied within `timeout`; the events still pending are then counted as failed and the
        thread stops as soon as its current request returns."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        with self._close_lock:
            first = not self._closed
            self._closed = True
        if first and threading.current_thread() is not self._thread:
            try:
                self._queue.put(_STOP, timeout=_remaining(deadline))
            except queue.Full:
                # The thread sees the abort when it takes the next event, counts everything
                # still queued as failed and ends.
                self._abort.set()
                with contextlib.suppress(queue.Full):
                    self._queue.put_nowait(_STOP)
        finished = self._join(deadline)
        if not finished:
            self._abort.set()
            if self._spool is not None:  # a moment to write what is left to the spool
                self._thread.join(SPOOL_CLOSE_GRACE)
        return finished

    def _join(self, deadline: float | None) -> bool:
        if threading.current_thread() is self._thread:
            return False
        self._thread.join(_remaining(deadline))
        return not self._thread.is_alive()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    # -- the exporter thread ------------------------------------------------------------------

    def _run(self) -> None:
        batch: list[Event] = []
        deadline = 0.0
        while True:
            if self._closed and self._abort.is_set():
                self._ship(batch)  # counted as failed
                batch = []
                break
            try:
                spool_wait = self._drain_spool()
                if batch:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._ship(batch)
                        batch = []
                        continue
                    item = self._queue.get(timeout=min(remaining, spool_wait))
                else:
                    item = self._queue.get(timeout=spool_wait if spool_wait < float("inf") else None)
            except queue.Empty:
                if batch and time.monotonic() < deadline:
                    continue  # the spool's turn came first; the batch may still fill
                self._ship(batch)
                batch = []
                continue
            except Exception:  # pragma: no cover -- the thread must survive anything
                logger.exception("toolscope exporter: unexpected error while waiting for events")
                continue
            if isinstance(item, dict):
                if not batch:
                    deadline = time.monotonic() + self._flush_interval
                batch.append(item)
                if len(batch) >= self._batch_size:
                    self._ship(batch)
                    batch = []
                continue
            self._ship(batch)
            batch = []
            if isinstance(item, threading.Event):
                item.set()
            elif item is _STOP:
                break
        # Events put by a thread that raced with close() land behind the stop marker.
        leftovers: list[Event] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, dict):
                leftovers.append(item)
            elif isinstance(item, threading.Event):
                item.set()
        for start in range(0, len(leftovers), self._batch_size):
            self._ship(leftovers[start : start + self._batch_size])
        if self._spool is not None:
            self._spool.close()
        if self._abandoned:
            logger.warning(
                "toolscope exporter: %d events not sent: the client was closed before they could be",
                self._abandoned,
            )
        self._report_drops(force=True)

    def _ship(self, batch: list[Event]) -> None:
        """Deliver a batch; never raises."""
        if batch:
            try:
                if self._abort.is_set() and self._spool is not None:
                    self._spool_only = True  # no time to send: spooled for the next run
                    self._send(batch)
                elif self._abort.is_set():
                    self._abandoned += len(batch)
                    self._count_failed(batch, None)
                else:
                    self._send(batch)
            except Exception:
                logger.exception("toolscope exporter: unexpected error; %d events lost", len(batch))
                self._count_failed(batch, None)
        self._report_drops()

    def _send(self, batch: list[Event]) -> None:
        chunk: list[Event] = []
        parts: list[bytes] = []
        size = _ENVELOPE_OVERHEAD
        for position, event in enumerate(batch, 1):
            if position % _YIELD_EVERY == 0:
                time.sleep(0)  # let the agent's threads have the GIL now rather than in 5 ms
            try:
                part = _encode(event)
            except (TypeError, ValueError, RecursionError) as exc:
                self._log_once(
                    ("encode", type(exc).__name__),
                    logging.ERROR,
                    "toolscope exporter: cannot encode event %r as JSON (%s); it is dropped",
                    event.get("id"),
                    exc,
                )
                self._count_failed([event], None)
                continue
            if len(part) + _ENVELOPE_OVERHEAD > self._max_batch_bytes:
                self._log_once(
                    ("too-large", event.get("type")),
                    logging.ERROR,
                    "toolscope exporter: event %r is %d bytes, over max_batch_bytes=%d; it is dropped",
                    event.get("id"),
                    len(part),
                    self._max_batch_bytes,
                )
                self._count_failed([event], None)
                continue
            if chunk and size + len(part) + 1 > self._max_batch_bytes:
                self._post(chunk, parts)
                chunk, parts, size = [], [], _ENVELOPE_OVERHEAD
            chunk.append(event)
            parts.append(part)
            size += len(part) + 1
        if chunk:
            self._post(chunk, parts)

    def _post(self, events: list[Event], parts: list[bytes]) -> None:
        body = b'{"events":[' + b",".join(parts) + b"]}"
        content = gzip.compress(body, compresslevel=self._gzip_level, mtime=0)
        spool = self._spool
        if spool is not None and (spool.pending or self._spool_only):
            self._to_spool(content, events)  # behind what is there: order kept
            return
        outcome = deliver(
            self._http,
            "POST",
            self._url,
            content=content,
            headers=self._headers,
            policy=self._retry,
            wait=self._abort.wait,
        )
        with self._stats_lock:
            self._retried += outcome.retries
        if outcome.kind == "ok":
            self._accepted(events, outcome)
            return
        response = outcome.response
        if outcome.kind == "rejected" and response is not None and response.status_code == 413 and len(events) > 1:
            half = len(events) // 2
            self._post(events[:half], parts[:half])
            self._post(events[half:], parts[half:])
            return
        if outcome.kind == "rejected" and response is not None and response.status_code in (401, 403):
            self._log_once(
                ("auth",),
                logging.WARNING,
                "toolscope: the server refused this client's API key (%s); nothing is being recorded. "
                "Check the key and its ingest scope (Client.check() raises with the reason)",
                outcome.error,
            )
        elif outcome.kind == "rejected" and response is not None:
            body_json = response_json(response)
            if isinstance(body_json, dict) and isinstance(body_json.get("results"), list):
                self._log_rejections(body_json["results"])
            self._log_once(
                ("http", response.status_code, server_message(response)),
                logging.ERROR,
                "toolscope exporter: the server refused a batch of %d events (%s); not retried",
                len(events),
                outcome.error,
            )
        elif spool is not None:
            self._to_spool(content, events)
            self._spool_failed(outcome)
            return
        else:
            logger.warning(
                "toolscope exporter: gave up on a batch of %d events after %d attempts (%s)",
                len(events),
                outcome.attempts,
                outcome.error,
            )
        self._count_failed(events, None)

    # -- the spool ------------------------------------------------------------------------------

    def _to_spool(self, content: bytes, events: list[Event]) -> None:
        assert self._spool is not None
        try:
            before = self._spool.dropped
            self._spool.add(content, len(events))
        except OSError as exc:
            logger.error("toolscope exporter: cannot write to the spool (%s); %d events lost", exc, len(events))
            self._count_failed(events, None)
            return
        if self._spool.dropped != before:
            with self._stats_lock:
                self._dropped += self._spool.dropped - before

    def _spool_failed(self, outcome: Outcome) -> None:
        assert self._spool is not None
        if self._spool_backoff == SPOOL_BACKOFF:  # the first failure of an outage
            logger.warning("toolscope exporter: the server cannot be reached (%s); events are spooled in %s and "
                           "sent when it answers", outcome.error, self._spool.directory)
        self._spool_retry_at = time.monotonic() + self._spool_backoff
        self._spool_backoff = min(self._spool_backoff * 2, SPOOL_BACKOFF_MAX)

    def _drain_spool(self) -> float:
        """Send spooled batches, oldest first, while the server takes them; the seconds until the
        next attempt (inf: nothing spooled)."""
        spool = self._spool
        while spool is not None and spool.pending and not self._abort.is_set():
            wait = self._spool_retry_at - time.monotonic()
            if wait > 0:
                return wait
            found = spool.oldest()
            if found is None:
                break
            item, content = found
            outcome = deliver(self._http, "POST", self._url, content=content, headers=self._headers, policy=_ONCE,
                              wait=self._abort.wait)
            if outcome.kind == "gave_up":
                self._spool_failed(outcome)
                continue
            events = _decoded(content)
            spool.remove(item)
            if outcome.kind == "ok":
                if self._spool_backoff != SPOOL_BACKOFF:
                    logger.warning("toolscope exporter: the server answers again; sending the spool (%d events)",
                                   spool.events + item.events)
                self._spool_backoff = SPOOL_BACKOFF
                self._accepted(events, outcome)
            else:
                logger.error("toolscope exporter: the server refused a spooled batch of %d events (%s); not retried",
                             item.events, outcome.error)
                self._count_failed(events, None)
        return float("inf")

    def _accepted(self, events: list[Event], outcome: Outcome) -> None:
        rejected: list[Event] = []
        body = response_json(outcome.response) if outcome.response is not None else None
        results = body.get("results") if isinstance(body, dict) else None
        if isinstance(results, list):
            refused = {r.get("id") for r in results if isinstance(r, dict) and r.get("status") == "rejected"}
            if refused:
                rejected = [event for event in events if event.get("id") in refused]
                self._log_rejections(results)
        with self._stats_lock:
            self._sent += len(events)
            self._rejected += len(rejected)
        if rejected:
            self._undelivered(rejected)

    def _log_rejections(self, results: list[Any]) -> None:
        for result in results:
            if not isinstance(result, dict) or result.get("status") != "rejected":
                continue
            path = str(result.get("path", ""))
            field = path.split("]", 1)[-1] if path.startswith("events[") else path
            self._log_once(
                ("rejected", field, result.get("reason")),
                logging.WARNING,
                "toolscope exporter: the server rejected event %r: %s %s",
                result.get("id"),
                path,
                result.get("reason"),
            )

    def _count_failed(self, events: list[Event], reason: str | None) -> None:
        with self._stats_lock:
            self._failed += len(events)
        if reason:
            logger.warning("toolscope exporter: %d events not sent: %s", len(events), reason)
        self._undelivered(events)

    def _undelivered(self, events: list[Event]) -> None:
        if self._on_undelivered is not None:
            try:
                self._on_undelivered(events)
            except Exception:
                logger.exception("toolscope exporter: error in the undelivered-events callback")

    def _log_once(self, key: tuple[Any, ...], level: int, message: str, *args: Any) -> None:
        """Log a problem the first time it occurs; later occurrences go to DEBUG."""
        if key in self._logged:
            logger.debug(message, *args)
            return
        if len(self._logged) < 1000:
            self._logged.add(key)
        logger.log(level, message, *args)

    def _report_drops(self, force: bool = False) -> None:
        dropped = self._dropped
        if dropped == self._dropped_reported:
            return
        now = time.monotonic()
        if not force and now - self._dropped_reported_at < 10.0:
            return
        logger.warning(
            "toolscope exporter: dropped %d events because the queue was full or the client closed (%d in total)",
            dropped - self._dropped_reported,
            dropped,
        )
        self._dropped_reported = dropped
        self._dropped_reported_at = now


def _encode(event: Event) -> bytes:
    """One event as JSON, after turning what the caller's thread left raw into the wire format."""
    timestamp = event.get("timestamp")
    if type(timestamp) is float:
        event["timestamp"] = _shapes.iso_timestamp(timestamp)
    if event.get("type") == "tool_call":
        output = event.get("output")
        if output is not None and type(output) is not str:
            event["output"] = _shapes.output_text(output)
        arguments = event.get("arguments")
        if arguments is not None and type(arguments) is not dict:
            event["arguments"] = _shapes.arguments_object(arguments)
    return _ENCODER.encode(event).encode("utf-8", "replace")


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def _decoded(content: bytes) -> list[Event]:
    try:
        events = json.loads(gzip.decompress(content)).get("events")
    except (OSError, ValueError, AttributeError):
        return []
    return [event for event in events if isinstance(event, dict)] if isinstance(events, list) else []
