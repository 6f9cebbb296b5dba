"""`toolscope-mcp`: run the gateway over stdio (a client starts it as its MCP server) or over
Streamable HTTP (clients connect to http://HOST:PORT/mcp).

    toolscope-mcp --config ~/.config/toolscope/gateway.json
    toolscope-mcp --config gateway.json --transport http --port 8765
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import anyio

from toolscope_agent._version import __version__
from toolscope_agent.gateway.config import ConfigError, load_config
from toolscope_agent.gateway.server import Gateway


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolscope-mcp", description="An MCP gateway that applies toolscope's "
                                     "published policy to any MCP client and records what passes through.")
    parser.add_argument("--config", required=True, help="the gateway's JSON file (mcpServers, toolscope, names)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="how clients reach the gateway (default: stdio)")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP: the port (default 8765)")
    parser.add_argument("--path", default="/mcp", help="HTTP: the endpoint's path (default /mcp)")
    parser.add_argument("--log-level", default="WARNING", help="on stderr (default WARNING)")
    parser.add_argument("--version", action="version", version=f"toolscope-mcp {__version__}")
    args = parser.parse_args(argv)
    # stdout carries the protocol on stdio: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"toolscope-mcp: {exc}\n")
        return 2
    gateway = Gateway(config, transport=args.transport)
    if args.transport == "stdio":
        anyio.run(serve_stdio, gateway)
    else:
        serve_http(gateway, args.host, args.port, args.path)
    return 0


async def serve_stdio(gateway: Gateway) -> None:
    from mcp.server.stdio import stdio_server

    from toolscope_agent.gateway.stdio import event_loop_stdio

    server = gateway.server()
    async with event_loop_stdio() as streams, stdio_server(*(streams or ())) as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(gateway: Gateway, host: str, port: int, path: str) -> None:
    import uvicorn

    app = gateway.server().streamable_http_app(streamable_http_path=path, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


if __name__ == "__main__":
    raise SystemExit(main())
