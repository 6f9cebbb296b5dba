"""toolscope-proxy's settings: command-line flags, each with an environment variable."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

MODES = ("observe", "shadow", "enforce")
DEFAULT_UPSTREAMS = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}


@dataclass(frozen=True)
class ProxyConfig:
    mode: str = "observe"
    upstreams: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    toolscope_url: str = ""
    toolscope_key: str = ""
    label: str = "production"
    agent_name: str | None = None
    spool_dir: str | None = None
    timeout: float = 600.0  # a long generation streams for minutes

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for provider, url in self.upstreams.items():
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
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls(**values)  # type: ignore[arg-type]
