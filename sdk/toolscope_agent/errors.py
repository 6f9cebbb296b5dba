"""The exceptions the SDK raises to its callers: ToolscopeError, and its kinds that `Client.check()`
and the synchronous calls raise for a bad key, a missing scope, or no server at the URL."""

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


class AuthenticationError(ToolscopeError):
    """The server refused the API key (HTTP 401): unknown, revoked or mistyped."""


class ScopeError(ToolscopeError):
    """The API key is valid but lacks the scope the call needs (HTTP 403), e.g. `ingest` or
    `policy:read`."""


class UnreachableError(ToolscopeError):
    """No toolscope server answered at the base URL: the connection failed, or what answered is
    not toolscope's API (an HTML page, a 404 for the API's own paths)."""


def error_for(message: str, *, status: int | None, body: Any = None) -> ToolscopeError:
    """The most specific ToolscopeError for an HTTP status (None: no answer at all)."""
    kinds: dict[int | None, type[ToolscopeError]] = {None: UnreachableError, 401: AuthenticationError, 403: ScopeError}
    return kinds.get(status, ToolscopeError)(message, status=status, body=body)
