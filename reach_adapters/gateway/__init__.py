"""The gateway: a router run from a config directory and served over MCP and a small HTTP API.

Needs the ``gateway`` extra: ``pip install 'agent-reach[gateway]'``. ``reach serve`` is the usual
way in (docs/cli.md); these are the pieces it is made of.
"""

from reach_adapters.gateway.api import API_PREFIX, GatewayAPI, RouteRequest, SendRequest
from reach_adapters.gateway.auth import Authentication
from reach_adapters.gateway.build import build_agent, build_agents, close_agents
from reach_adapters.gateway.errors import GatewayError, LimitExceededError
from reach_adapters.gateway.gateway import Gateway, GatewaySecurity, GatewayStatus
from reach_adapters.gateway.limits import ServerLimits
from reach_adapters.gateway.overrides import PatchedAgent, patch_capabilities
from reach_adapters.gateway.server import (
    MCP_PATH,
    GatewayEndpoint,
    beyond_loopback,
    listen,
    serve_http,
    unprotected_exposure,
)

__all__ = [
    "API_PREFIX",
    "MCP_PATH",
    "Authentication",
    "Gateway",
    "GatewayAPI",
    "GatewayEndpoint",
    "GatewayError",
    "GatewaySecurity",
    "GatewayStatus",
    "LimitExceededError",
    "PatchedAgent",
    "RouteRequest",
    "SendRequest",
    "ServerLimits",
    "beyond_loopback",
    "build_agent",
    "build_agents",
    "close_agents",
    "listen",
    "patch_capabilities",
    "serve_http",
    "unprotected_exposure",
]
