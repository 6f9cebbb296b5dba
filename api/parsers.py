"""A JSON parser that enforces the size limit while reading, and understands gzip bodies.

The limit applies to the decompressed size and is checked before anything is parsed, so neither a
large body nor a small gzip bomb costs more than the limit in memory.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import BaseParser

READ_CHUNK = 64 * 1024


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "payload_too_large"


def _too_large() -> PayloadTooLarge:
    limit_mb = settings.INGEST_MAX_BODY_BYTES / 1_000_000
    return PayloadTooLarge(f"The request body exceeds the limit of {limit_mb:g} MB (decompressed).")


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
                raise _too_large()
        size += len(chunk)
        if size > limit:
            raise _too_large()
        parts.append(chunk)
    if inflater is not None and not inflater.eof:
        raise exceptions.ParseError("The gzip body is truncated.")
    return b"".join(parts)


class LimitedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        request = (parser_context or {})["request"]
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        limit = settings.INGEST_MAX_BODY_BYTES
        declared = request.META.get("CONTENT_LENGTH")
        if encoding != "gzip" and declared and declared.isdigit() and int(declared) > limit:
            raise _too_large()
        body = read_limited(stream, encoding, limit) if stream is not None else b""
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}.") from None
