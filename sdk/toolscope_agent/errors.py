"""The one exception the SDK raises to its callers."""

from __future__ import annotations

from typing import Any


class ToolscopeError(Exception):
    """A synchronous call to the toolscope server failed.

    `status` is the HTTP status of the last answer (None when no answer came back, e.g. the server
    was unreachable on every attempt), `message` the server's explanation when it gave one, and
    `body` the decoded JSON body (or the raw text) of that answer.
    """

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.status = status
        self.message = message
        self.body = body
