"""toolscope_agent: the agent side of toolscope. No Django, one HTTP client dependency.

from toolscope_agent import Client

client = Client("https://toolscope.example.com", api_key="ts_...")
with client.session(agent_name="coder", model="gpt-4o") as s:
    s.turn(tools=tools, usage=response.usage, messages=new_messages)
    s.tool_call("read_file", {"path": "src/api.py"}, output=text, duration_ms=12.5)
"""

import logging

from ._version import __version__
from .artifacts import ArtifactStore
from .client import Client
from .errors import AuthenticationError, ScopeError, ToolscopeError, UnreachableError
from .exporter import ExporterStats
from .policy import PolicyCache
from .selector import ToolSelector
from .session import Session, current_session

# A library logs and lets the application decide where that goes (no "last resort" stderr output).
logging.getLogger("toolscope_agent").addHandler(logging.NullHandler())

__all__ = [
    "ArtifactStore",
    "AuthenticationError",
    "Client",
    "ExporterStats",
    "PolicyCache",
    "ScopeError",
    "Session",
    "ToolSelector",
    "ToolscopeError",
    "UnreachableError",
    "__version__",
    "current_session",
]
