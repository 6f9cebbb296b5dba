"""toolscope-mcp: the MCP gateway (see server.py), installed with `pip install "toolscope-agent[gateway]"`."""

from toolscope_agent.gateway.config import ConfigError, GatewayConfig, ServerConfig, ToolscopeConfig, load_config
from toolscope_agent.gateway.server import Gateway

__all__ = ["ConfigError", "Gateway", "GatewayConfig", "ServerConfig", "ToolscopeConfig", "load_config"]
