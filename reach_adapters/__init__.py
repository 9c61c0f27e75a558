"""Agent Reach: find agents, deliver tasks to the right one, survive when one fails."""

from middleware import Fault
from reach_adapters.errors import (
    AgentCallError,
    DuplicateAgentError,
    IdempotencyConflictError,
    InputRequiredError,
    InvalidDeclarationError,
    InvalidMessageError,
    InvalidPolicyError,
    LoopDetectedError,
    NoCandidateError,
    PayloadValidationError,
    ReachError,
    ReachTimeoutError,
    RouterClosedError,
    SyncCallError,
    UnknownAgentError,
    UnknownTaskError,
    raise_for_status,
)
from reach_adapters.router.agent import Agent, FunctionAgent
from reach_adapters.router.breaker import BreakerState
from reach_adapters.router.capability import Capability, Trigger
from reach_adapters.router.catalog import AgentInfo
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.handle import AgentHandle
from reach_adapters.router.identity import AgentId, parse_agent_id
from reach_adapters.router.outcomes import AgentBusyError
from reach_adapters.router.policy import BreakerSettings, RoutingPolicy, ScoringWeights
from reach_adapters.router.router import Router
from reach_adapters.router.state import AgentState

__all__ = [
    "Agent",
    "AgentBusyError",
    "AgentCallError",
    "AgentHandle",
    "AgentId",
    "AgentInfo",
    "AgentState",
    "BreakerSettings",
    "BreakerState",
    "Capability",
    "DecisionRecord",
    "DuplicateAgentError",
    "Fault",
    "FunctionAgent",
    "IdempotencyConflictError",
    "InputRequiredError",
    "InvalidDeclarationError",
    "InvalidMessageError",
    "InvalidPolicyError",
    "LoopDetectedError",
    "NoCandidateError",
    "PayloadValidationError",
    "ReachError",
    "ReachTimeoutError",
    "Router",
    "RouterClosedError",
    "RoutingPolicy",
    "ScoringWeights",
    "SyncCallError",
    "Trigger",
    "UnknownAgentError",
    "UnknownTaskError",
    "parse_agent_id",
    "raise_for_status",
]
