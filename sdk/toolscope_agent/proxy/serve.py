"""A proxy with its policy cache and telemetry client made from its configuration."""

from __future__ import annotations

from collections.abc import Callable

from toolscope_agent.client import Client
from toolscope_agent.policy import PolicyCache
from toolscope_agent.proxy.app import Proxy
from toolscope_agent.proxy.config import ProxyConfig
from toolscope_agent.proxy.recorder import Recorder


def build(config: ProxyConfig) -> tuple[Proxy, Callable[[], None]]:
    """The proxy, and what to call when it stops (ends open sessions, flushes telemetry). Without
    a toolscope URL it forwards and records nothing (and `enforce` has no policy to apply)."""
    if not config.toolscope_url:
        proxy = Proxy(config)
        return proxy, lambda: None
    client = Client(config.toolscope_url, config.toolscope_key, spool_dir=config.spool_dir)
    policy = PolicyCache(config.toolscope_url, config.toolscope_key, label=config.label)
    recorder = Recorder(client, mode=config.mode, agent_name=config.agent_name)
    proxy = Proxy(config, policy=policy, recorder=recorder, client=client)

    def closing() -> None:
        recorder.close()
        client.close()

    return proxy, closing
