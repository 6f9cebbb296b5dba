"""`toolscope-proxy`: serve the model-API proxy.

    toolscope-proxy --mode observe                      # record, change nothing
    toolscope-proxy --mode enforce --port 8788          # send the tools the policy selects

Then point the agent at it: OPENAI_BASE_URL=http://127.0.0.1:8788/v1, or
ANTHROPIC_BASE_URL=http://127.0.0.1:8788 (Claude Code honours it). TOOLSCOPE_URL and
TOOLSCOPE_API_KEY (ingest and policy:read) say where policies come from and telemetry goes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from toolscope_agent._version import __version__
from toolscope_agent.proxy.config import MODES, ProxyConfig, routes_parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolscope-proxy", description="A model-API proxy (OpenAI Chat "
                                     "Completions and Responses, Anthropic Messages) that applies toolscope's "
                                     "published policy and records every request.")
    parser.add_argument("--mode", choices=MODES, help="observe (forward unchanged, record), shadow (forward "
                        "unchanged, record what the policy would have sent too) or enforce (send the tools the "
                        "policy selects); env TOOLSCOPE_PROXY_MODE, default observe")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8788, help="the port (default 8788)")
    parser.add_argument("--openai-base-url", help="env TOOLSCOPE_PROXY_OPENAI_BASE_URL, default https://api.openai.com")
    parser.add_argument("--anthropic-base-url",
                        help="env TOOLSCOPE_PROXY_ANTHROPIC_BASE_URL, default https://api.anthropic.com")
    parser.add_argument("--route", action="append", default=[], metavar="MODEL_GLOB=URL",
                        help="send requests for matching models to URL instead (repeatable; first match wins; "
                        "env TOOLSCOPE_PROXY_ROUTES, comma-separated)")
    parser.add_argument("--label", help="the policy label to apply (env TOOLSCOPE_POLICY_LABEL, default production)")
    parser.add_argument("--agent-name", help="recorded sessions' agent name (env TOOLSCOPE_AGENT_NAME)")
    parser.add_argument("--spool-dir", help="undelivered telemetry kept here across outages (env TOOLSCOPE_SPOOL_DIR)")
    parser.add_argument("--log-level", default="WARNING", help="on stderr (default WARNING)")
    parser.add_argument("--version", action="version", version=f"toolscope-proxy {__version__}")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    upstreams = {provider: url for provider, url in (("openai", args.openai_base_url),
                                                     ("anthropic", args.anthropic_base_url)) if url}
    try:
        config = ProxyConfig.from_env(mode=args.mode, label=args.label, agent_name=args.agent_name,
                                      spool_dir=args.spool_dir)
        routes = routes_parse(",".join(args.route))
        if upstreams or routes:
            config = ProxyConfig(**{**config.__dict__, "upstreams": {**config.upstreams, **upstreams},
                                    "routes": (*routes, *config.routes)})
    except ValueError as exc:
        sys.stderr.write(f"toolscope-proxy: {exc}\n")
        return 2
    import uvicorn

    from toolscope_agent.proxy.serve import build

    proxy, closing = build(config)
    # Open sessions are ended and telemetry flushed as the server stops (the app's lifespan).
    uvicorn.run(proxy.app(on_shutdown=closing), host=args.host, port=args.port, log_level=args.log_level.lower())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
