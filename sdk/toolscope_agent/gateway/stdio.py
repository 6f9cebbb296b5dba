"""The gateway's own stdin and stdout, read and written on the event loop.

The MCP SDK's `stdio_server()` reads each line and writes (and flushes) each message through a
worker thread: three thread hand-offs per `tools/call`, most of what the gateway added to a call
(bench/gateway_latency.py). Where stdin and stdout are pipes or sockets, as when a client starts
the gateway, `event_loop_stdio()` gives `stdio_server()` streams over the same descriptors that
asyncio reads and writes without threads. It claims the descriptors as the SDK does: while
serving, fd 0 reads the null device and fd 1 writes to stderr, so stray output of a library (or
of a child that inherits them) never lands on the wire; both are restored on exit.

Anything else (a regular file as stdin, a platform without pipe support in its loop) keeps the
SDK's own streams.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

# Lines (JSON-RPC messages) of any length: a whole file read by a tool comes as one line.
LINE_LIMIT = 1 << 30


class _Lines:
    """`async for line in stdin`, as stdio_server reads it."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """`await stdout.write(text)` and `await stdout.flush()`, as stdio_server writes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _streamable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[Any, Any] | None]:
    """(stdin, stdout) for `stdio_server(stdin, stdout)`, or None where the SDK's own must serve."""
    if sys.platform == "win32" or not (_streamable(0) and _streamable(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    transports: list[asyncio.BaseTransport] = []
    try:
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0))
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0))
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _Lines(reader), _Writer(writer)
    finally:
        for transport in transports:
            transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out):
            with suppress(OSError):
                os.close(fd)
