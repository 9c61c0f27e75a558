"""A2A adapter: agents that speak the Agent2Agent protocol as routable agents, and the router
served as an A2A agent.

Names load on first use, so `reach_adapters.a2a.options` (what config files validate against)
is importable without the SDK, and a missing ``a2a`` extra is reported in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reach_adapters.extras import lazy_names

if TYPE_CHECKING:
    from reach_adapters.a2a.agent import A2AAgent
    from reach_adapters.a2a.errors import (
        A2ABusyError,
        A2ACallTimeoutError,
        A2ACardError,
        A2AClosedError,
        A2AConnectionError,
        A2ADeniedError,
        A2ANotHereError,
        A2AOfflineError,
        A2AOverridesError,
        A2AProtocolError,
        A2ATimeoutError,
    )
    from reach_adapters.a2a.executor import RouterExecutor
    from reach_adapters.a2a.memory_store import MemoryA2ATaskStore
    from reach_adapters.a2a.options import A2AOptions, ReconnectPolicy
    from reach_adapters.a2a.router_card import RouterCard
    from reach_adapters.a2a.serve import A2A_PATH, A2AService
    from reach_adapters.a2a.taskstore import RedisA2ATaskStore

__all__: list[str] = [
    "A2A_PATH",
    "A2AAgent",
    "A2ABusyError",
    "A2ACallTimeoutError",
    "A2ACardError",
    "A2AClosedError",
    "A2AConnectionError",
    "A2ADeniedError",
    "A2ANotHereError",
    "A2AOfflineError",
    "A2AOptions",
    "A2AOverridesError",
    "A2AProtocolError",
    "A2AService",
    "A2ATimeoutError",
    "MemoryA2ATaskStore",
    "ReconnectPolicy",
    "RedisA2ATaskStore",
    "RouterCard",
    "RouterExecutor",
]

_MODULES: dict[str, str] = {
    "A2AAgent": "agent",
    "A2ACardError": "errors",
    "A2ANotHereError": "errors",
    "A2ADeniedError": "errors",
    "A2AClosedError": "errors",
    "A2ACallTimeoutError": "errors",
    "A2ABusyError": "errors",
    "A2AConnectionError": "errors",
    "A2AOfflineError": "errors",
    "A2AOverridesError": "errors",
    "A2AProtocolError": "errors",
    "A2ATimeoutError": "errors",
    "A2AOptions": "options",
    "ReconnectPolicy": "options",
    "RouterExecutor": "executor",
    "MemoryA2ATaskStore": "memory_store",
    "RouterCard": "router_card",
    "A2A_PATH": "serve",
    "A2AService": "serve",
    "RedisA2ATaskStore": "taskstore",
}


__getattr__, __dir__ = lazy_names(globals(), "a2a", _MODULES)
