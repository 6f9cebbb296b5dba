"""Request bodies sent with `Transfer-Encoding: chunked`, read (a WSGI layer in front of Django).

A chunked request has no Content-Length. Django reads a body only as far as CONTENT_LENGTH says
and DRF treats a missing one as no body at all, so a chunked POST arrived empty. The server
(granian, gunicorn) has already removed the chunk framing and marks the input as ending at the
body's end (`wsgi.input_terminated`); this layer reads it, at most the largest body any view takes
(INGEST_MAX_BODY_BYTES, or TRANSCRIPT_MAX_BODY_BYTES for a whole transcript), and hands Django the
body with its length; the view's parser then holds it to its own limit (api/parsers.py). A longer
body is answered 413 here, as JSON.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
READ_CHUNK = 64 * 1024


def chunked_bodies(app: WSGIApp) -> WSGIApp:
    def layer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower() or environ.get("CONTENT_LENGTH"):
            return app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            # A server that leaves the input open past the body: reading to its end would hang.
            return _answer(start_response, "411 Length Required", "A chunked body needs a server that ends it; "
                           "send Content-Length.", "length_required")
        limit = max(settings.INGEST_MAX_BODY_BYTES, settings.TRANSCRIPT_MAX_BODY_BYTES)
        body = _read(environ["wsgi.input"], limit + 1)
        if len(body) > limit:
            return _answer(start_response, "413 Payload Too Large",
                           f"The request body exceeds the limit of {limit / 1_000_000:g} MB.", "payload_too_large")
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return layer


def _read(stream: Any, most: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while size < most and (chunk := stream.read(min(READ_CHUNK, most - size))):
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def _answer(start_response: Callable[..., Any], status: str, detail: str, code: str) -> list[bytes]:
    body = json.dumps({"detail": detail, "code": code}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
