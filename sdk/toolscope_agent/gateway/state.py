"""What the gateway keeps per tool and per client connection."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from toolscope_agent.selector import ToolSelector
from toolscope_agent.session import Session


@dataclass(frozen=True)
class Route:
    server: str
    name: str  # the upstream's name for the tool
    tool: dict[str, Any]  # as the upstream listed it, under the name clients see


@dataclass
class ClientState:
    """One client connection's selector, telemetry session and what it was last told."""

    key: str
    selector: ToolSelector
    session: Session | None
    advertised: set[str] = field(default_factory=set)
    # The selector's names when last computed (a list, or after a call): a call that changes them
    # is announced with list_changed.
    selected: tuple[str, ...] = ()
    subscriptions: set[str] = field(default_factory=set)  # resource URIs (as the client knows them)
    server_session: Any = None  # the last request's ServerSession: notifications go through it
    seen: float = field(default_factory=time.monotonic)
    misses: int = 0
