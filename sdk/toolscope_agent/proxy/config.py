"""toolscope-proxy's settings: command-line flags, each with an environment variable."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

MODES = ("observe", "shadow", "enforce")
DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}


def routes_parse(text: str) -> tuple[tuple[str, str], ...]:
    """`GLOB=URL` pairs, comma-separated (TOOLSCOPE_PROXY_ROUTES) or one per --route."""
    routes = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        glob, sep, url = part.partition("=")
        if not sep or not glob.strip() or not url.strip():
            raise ValueError(f"a route is MODEL_GLOB=URL (e.g. 'llama-*=http://127.0.0.1:8000'), not {part!r}")
        routes.append((glob.strip(), url.strip()))
    return tuple(routes)


@dataclass(frozen=True)
class ProxyConfig:
    mode: str = "observe"
    upstreams: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    # (model glob, base URL), first match wins: a model served elsewhere (an OpenAI-compatible
    # server, another region) than its API's default upstream.
    routes: tuple[tuple[str, str], ...] = ()
    toolscope_url: str = ""
    toolscope_key: str = ""
    label: str = "production"
    agent_name: str | None = None
    spool_dir: str | None = None
    timeout: float = 600.0  # a long generation streams for minutes

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for provider, url in [*self.upstreams.items(), *self.routes]:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"the {provider} upstream must be an http(s) URL, not {url!r}")
        if bool(self.toolscope_url) != bool(self.toolscope_key):
            raise ValueError("give both the toolscope URL and its API key (TOOLSCOPE_URL, TOOLSCOPE_API_KEY), "
                             "or neither")

    @classmethod
    def from_env(cls, **overrides: object) -> ProxyConfig:
        env = os.environ
        values: dict[str, object] = {
            "mode": env.get("TOOLSCOPE_PROXY_MODE", "observe"),
            "upstreams": {"openai": env.get("TOOLSCOPE_PROXY_OPENAI_BASE_URL", DEFAULT_UPSTREAMS["openai"]),
                          "anthropic": env.get("TOOLSCOPE_PROXY_ANTHROPIC_BASE_URL", DEFAULT_UPSTREAMS["anthropic"])},
            "toolscope_url": env.get("TOOLSCOPE_URL", ""),
            "toolscope_key": env.get("TOOLSCOPE_API_KEY", ""),
            "label": env.get("TOOLSCOPE_POLICY_LABEL", "production"),
            "agent_name": env.get("TOOLSCOPE_AGENT_NAME") or None,
            "spool_dir": env.get("TOOLSCOPE_SPOOL_DIR") or None,
            "routes": routes_parse(env.get("TOOLSCOPE_PROXY_ROUTES", "")),
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]
