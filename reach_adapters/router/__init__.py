"""The router core, and the surface adapters are written against.

Adapters (LangChain, MCP, and the coming A2A and remote ones) import from this package only, never
from its modules: the names below are the stable, adapter-facing surface. Everything else in
`reach_adapters.router.*` is private to the core and may change. The core imports no adapter.
"""

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.router.adapter_options import checked_options
from reach_adapters.router.agent import Agent, CallStyle, close_agent, input_required_result, ok_result
from reach_adapters.router.capability import Capability, cautious, validate_capabilities
from reach_adapters.router.carry import META_PREFIX, meta_from_request, request_meta
from reach_adapters.router.catalog import AgentInfo
from reach_adapters.router.compensation import ABANDONED
from reach_adapters.router.consensus.tool import MODEL_SCHEMA as CONSENSUS_MODEL_SCHEMA
from reach_adapters.router.consensus.tool import MODEL_SCHEMA_KEY as CONSENSUS_MODEL_SCHEMA_KEY
from reach_adapters.router.consensus.tool import SCHEMA as CONSENSUS_TOOL_SCHEMA
from reach_adapters.router.consensus.tool import SCHEMA_KEY as CONSENSUS_TOOL_SCHEMA_KEY
from reach_adapters.router.consensus.tool import TOOL_DESCRIPTION as CONSENSUS_TOOL_DESCRIPTION
from reach_adapters.router.consensus.tool import TOOL_NAME as CONSENSUS_TOOL_NAME
from reach_adapters.router.consensus.tool import tool_answer as consensus_tool_answer
from reach_adapters.router.consensus.tool import tool_options as consensus_tool_options
from reach_adapters.router.decisions import DecisionRecord, ExclusionKind
from reach_adapters.router.delivery import resumes
from reach_adapters.router.faults import REFUSED_STATUS_CODES, refused
from reach_adapters.router.guard import Guard, Refusal
from reach_adapters.router.handle import AgentHandle
from reach_adapters.router.hops import CallerWait
from reach_adapters.router.identity import AgentId, agent_id_part, parse_agent_id
from reach_adapters.router.imports import ImportPathError, import_object, required_parameters
from reach_adapters.router.messages import onward, time_left
from reach_adapters.router.naming import numbered
from reach_adapters.router.observe import Access
from reach_adapters.router.options import CallOptions
from reach_adapters.router.outcomes import (
    FIX_OPTIONS,
    UNKNOWN_OUTCOME,
    AgentBusyError,
    ErrorKind,
    StreamEnded,
    TaskError,
    error_result,
)
from reach_adapters.router.portal import Portal, on_loop, running_loop
from reach_adapters.router.reconnect import ReconnectPolicy, reconnect_until
from reach_adapters.router.router import Router
from reach_adapters.router.schemas import (
    DEFINITIONS,
    NAMED,
    check_schema,
    compiled_validator,
    first_error,
    schema_key,
    text_of_task,
    unwrap_field,
    wrap_field,
)
from reach_adapters.router.state import UNUSABLE_STATES, AgentState
from reach_adapters.router.thread_scope import id_text, own_thread, scoped_id
from reach_adapters.router.threads import newest_turn, thread_of
from reach_adapters.router.workers import Hold, WorkerPool

__all__ = [
    "ABANDONED",
    "CONSENSUS_MODEL_SCHEMA",
    "CONSENSUS_MODEL_SCHEMA_KEY",
    "CONSENSUS_TOOL_DESCRIPTION",
    "CONSENSUS_TOOL_NAME",
    "CONSENSUS_TOOL_SCHEMA",
    "CONSENSUS_TOOL_SCHEMA_KEY",
    "DEFINITIONS",
    "FIX_OPTIONS",
    "META_PREFIX",
    "NAMED",
    "REFUSED_STATUS_CODES",
    "UNKNOWN_OUTCOME",
    "UNUSABLE_STATES",
    "Access",
    "Agent",
    "AgentBusyError",
    "AgentHandle",
    "AgentId",
    "AgentInfo",
    "AgentState",
    "CallOptions",
    "CallStyle",
    "CallerWait",
    "Capability",
    "DecisionRecord",
    "ErrorKind",
    "ExclusionKind",
    "Fault",
    "Guard",
    "Hold",
    "ImportPathError",
    "Portal",
    "ReachMessage",
    "ReachResult",
    "ReconnectPolicy",
    "Refusal",
    "ResultStatus",
    "Router",
    "StreamEnded",
    "TaskError",
    "WorkerPool",
    "agent_id_part",
    "cautious",
    "check_schema",
    "checked_options",
    "close_agent",
    "compiled_validator",
    "consensus_tool_answer",
    "consensus_tool_options",
    "error_result",
    "first_error",
    "id_text",
    "import_object",
    "input_required_result",
    "meta_from_request",
    "newest_turn",
    "numbered",
    "ok_result",
    "on_loop",
    "onward",
    "own_thread",
    "parse_agent_id",
    "reconnect_until",
    "refused",
    "request_meta",
    "required_parameters",
    "resumes",
    "running_loop",
    "schema_key",
    "scoped_id",
    "text_of_task",
    "thread_of",
    "time_left",
    "unwrap_field",
    "validate_capabilities",
    "wrap_field",
]
