"""A JSON parser that enforces the size limit while reading, and understands gzip bodies.

The limit applies to the decompressed size and is checked before anything is parsed, so neither a
large body nor a small gzip bomb costs more than the limit in memory. A gzip body is one gzip
member and nothing after it: trailing bytes mean a corrupt or spliced body, refused with a 400.
A body holding more than INGEST_MAX_JSON_CONTAINERS objects and arrays is refused (413) before it
is parsed: that, not its size, is what parsing it costs in memory. A body nested deeper than
MAX_DEPTH is refused too: nothing toolscope stores is that deep, and
the raw batch is written back with orjson, which cannot write it.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import BaseParser

from toolscope.telemetry.otlp.budget import json_containers_over

READ_CHUNK = 64 * 1024
# orjson writes at most this many levels of nesting (it reads up to 1,024). Free JSON inside an
# event is held to far less (docs/events.md); this bounds every body, transcripts and catalogs too.
MAX_DEPTH = 254


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "payload_too_large"


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The request body exceeds the limit of {limit / 1_000_000:g} MB (decompressed).")


def read_limited(stream: Any, encoding: str, limit: int) -> bytes:
    """The decompressed body, or PayloadTooLarge as soon as it passes `limit` bytes."""
    if encoding not in ("", "identity", "gzip"):
        raise exceptions.UnsupportedMediaType(
            encoding, detail=f"Content-Encoding '{encoding}' is not supported; use gzip or none."
        )
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
    parts: list[bytes] = []
    size = 0
    while chunk := stream.read(READ_CHUNK):
        if inflater is not None:
            try:
                chunk = inflater.decompress(chunk, limit + 1 - size)
            except zlib.error as exc:
                raise exceptions.ParseError(f"The gzip body is corrupt: {exc}.") from None
            if inflater.unconsumed_tail:
                raise _too_large(limit)
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        parts.append(chunk)
        if inflater is not None and inflater.eof:
            _expect_end(inflater, stream)
            break
    if inflater is not None and not inflater.eof:
        raise exceptions.ParseError("The gzip body is truncated.")
    return b"".join(parts)


def _expect_end(inflater: Any, stream: Any) -> None:
    """After the gzip stream's end (its trailer checked by zlib) the body must end too."""
    if inflater.unused_data or stream.read(1):
        raise exceptions.ParseError("The gzip body has data after the end of the gzip stream.")


def _check_containers(body: bytes) -> None:
    # An empty object is 3 bytes of the body and ~100 bytes parsed: a 5 MB body of them would take
    # a web worker past 300 MB. Counted outside strings, at C speed, before anything is parsed.
    limit = settings.INGEST_MAX_JSON_CONTAINERS
    if json_containers_over(body, limit):
        raise PayloadTooLarge(f"The body holds more than {limit:,} JSON objects and arrays; the limit is "
                              f"{limit:,} per request.")


def _check_depth(body: bytes, data: Any) -> None:
    # Nesting MAX_DEPTH + 1 levels takes twice as many bytes; a shorter body cannot. orjson finds
    # the depth in C, faster than any walk here (under 1 ms for a 1.4 MB batch).
    if len(body) > 2 * MAX_DEPTH:
        try:
            orjson.dumps(data)
        except orjson.JSONEncodeError:
            raise exceptions.ParseError(f"The body is nested deeper than {MAX_DEPTH} levels.") from None


class LimitedJSONParser(BaseParser):
    media_type = "application/json"
    # The setting that holds the body limit of the views this parser reads for.
    limit_setting = "INGEST_MAX_BODY_BYTES"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        request = (parser_context or {})["request"]
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        limit = getattr(settings, self.limit_setting)
        declared = request.META.get("CONTENT_LENGTH")
        if encoding != "gzip" and declared and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        body = read_limited(stream, encoding, limit) if stream is not None else b""
        _check_containers(body)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}.") from None
        _check_depth(body, data)
        return data


class TranscriptJSONParser(LimitedJSONParser):
    """A whole session in one body (POST /api/v1/transcripts): TRANSCRIPT_MAX_BODY_BYTES."""

    limit_setting = "TRANSCRIPT_MAX_BODY_BYTES"
