"""toolscope-proxy: the model API with the published policy applied (see app.py), installed with
`pip install "toolscope-agent[proxy]"`."""

from toolscope_agent.proxy.app import Proxy
from toolscope_agent.proxy.config import ProxyConfig
from toolscope_agent.proxy.recorder import Recorder

__all__ = ["Proxy", "ProxyConfig", "Recorder"]
