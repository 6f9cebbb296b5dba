"""A server's requests to the client, relayed (issue 27, item 2): sampling, elicitation and roots.

Each upstream connection offers the three capabilities, so a server shows the tools that need
them. A server's `sampling/createMessage` or `elicitation/create`, sent while one of the
gateway's clients has a call in flight to it, goes to that client (the latest such call's, as a
request related to it, so over Streamable HTTP it travels on that call's stream); `roots/list`
goes to that client, else to the client seen last. A client that does not offer the capability,
or no client at all, gets the server an error that says so. The client's
`notifications/roots/list_changed` goes to every server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
ROOTS = types.ClientCapabilities(roots=types.RootsCapability())


class Relay:
    """One upstream's relay: the calls in flight to it, and where its requests go."""

    def __init__(self, server: str, last_client: Callable[[], Any]) -> None:
        self.server = server
        self.calls: list[tuple[Any, Any]] = []  # (ServerSession, request id) of calls in flight, oldest first
        self._last_client = last_client

    def _caller(self) -> tuple[Any, Any]:
        if self.calls:
            return self.calls[-1]
        return self._last_client(), None

    async def _ask(self, capability: types.ClientCapabilities, what: str, request: Any, result: type[Any],
                   ) -> Any:
        session, request_id = self._caller()
        if session is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"No client is connected to toolscope-mcp "
                                                                       f"to answer {what} for {self.server}")
        if not session.check_client_capability(capability):
            return types.ErrorData(code=types.INVALID_REQUEST,
                                   message=f"The client behind toolscope-mcp does not support {what}")
        metadata = ServerMessageMetadata(related_request_id=request_id) if request_id is not None else None
        try:
            return await session.send_request(request, result, metadata=metadata)
        except MCPError as exc:
            return exc.error

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        result = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return await self._ask(SAMPLING, "sampling", types.CreateMessageRequest(params=params), result)

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        return await self._ask(ELICITATION, "elicitation", types.ElicitRequest(params=params), types.ElicitResult)

    async def roots(self, context: Any) -> Any:
        return await self._ask(ROOTS, "roots", types.ListRootsRequest(), types.ListRootsResult)
