"""The intermediate format: what every adapter converts to and from.

Pure pydantic, no framework imports, so agents written in other languages can follow the same
shape through the exported JSON Schema.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from middleware.configurable import Configurable
from middleware.errors import error_for
from middleware.ids import MAX_ID_LENGTH, new_task_id, new_trace_id

__all__ = [
    "ConsensusHint",
    "ConsensusVote",
    "DeliveryPath",
    "Fault",
    "MergePolicy",
    "MetaInfo",
    "ReachMessage",
    "ReachMode",
    "ReachResult",
    "ResultStatus",
    "RoutingHint",
    "Timings",
]

ReachMode = Literal["unicast", "broadcast", "directed", "consensus"]
MergePolicy = Literal["all", "first", "first_success"]
DeliveryPath = Literal["candidate", "fallback", "default", "deduplicated", "none"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class MetaInfo(_Model):
    """Who asked for what, when, and under which limits."""

    task_id: str = Field(default_factory=new_task_id, min_length=1, max_length=MAX_ID_LENGTH)
    trace_id: str = Field(default_factory=new_trace_id, min_length=1, max_length=MAX_ID_LENGTH)
    capability: str | None = Field(None, description="Requested capability name.")
    version: str | None = Field(None, description="Required capability version (exact match).")
    namespace: str | None = Field(None, description="Only agents in this namespace may serve.")
    source: str | None = Field(None, description="Agent id of the caller, when an agent calls.")
    principal: str | None = Field(
        None,
        max_length=256,
        description=(
            "Who the call is made for, as the gateway authenticated it (security.yaml); None for "
            "the program that owns the router. A gateway sets it itself, never from the request."
        ),
    )
    caller_token: str | None = Field(
        None,
        max_length=4096,
        description=(
            "Signed short-lived token naming the calling agent, the target and an expiry, carried "
            "when an agent's call passes from one gateway to another."
        ),
    )
    text: str | None = Field(None, description="Task text, matched when no capability is named.")
    tags: list[str] = Field(default_factory=list)
    attributes: dict[str, JsonValue] = Field(
        default_factory=dict, description="Free fields that capability triggers test."
    )
    priority: int = Field(0, ge=0, le=9, description="0 lowest .. 9 highest.")
    created_at: float = Field(default_factory=time.time, description="Unix time, seconds.")
    timeout_ms: int | None = Field(None, gt=0, description="Budget for this task.")
    deadline: float | None = Field(None, description="Absolute Unix time the task must end by.")
    depth: int = Field(0, ge=0, description="How many routed calls enclose this one.")
    lineage: list[str] = Field(
        default_factory=list, description="Agent ids of the enclosing routed calls, outermost first."
    )
    configurable: Configurable | None = Field(
        None,
        description=(
            "Per-call settings of the agent's run, e.g. {'thread_id': 'alice'} for a conversation "
            "kept per thread; LangChain agents get them in RunnableConfig['configurable']."
        ),
    )
    context: dict[str, JsonValue] | None = Field(
        None,
        description=(
            "The run's context for a LangGraph graph or create_agent agent (what its nodes, tools "
            "and middleware read as runtime.context), e.g. {'user_id': 'u-1'}."
        ),
    )
    resume: JsonValue = Field(
        None,
        description=(
            "The answer to an agent that stopped for input (status input_required); sent on the "
            "same thread, it continues where the agent stopped. Set only to resume."
        ),
    )
    stream_mode: str | list[str] | None = Field(
        None,
        description="For streamed calls: what to stream, e.g. LangGraph's 'messages', 'updates' or 'values'.",
    )
    subgraphs: bool = Field(
        False,
        description=(
            "For streamed calls to a LangGraph graph: its subgraphs' chunks too, each as [namespace, "
            "chunk] (or [namespace, mode, chunk] for several modes), as LangGraph's subgraphs=True."
        ),
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, JsonValue]:
        # `resume` set, even to null, means "the answer to a question the agent asked": written
        # while unset, a message read back (a task kept in Redis) would answer nothing.
        data: dict[str, JsonValue] = handler(self)
        if "resume" not in self.__pydantic_fields_set__:
            data.pop("resume", None)
        # Written only when asked for: a node of an earlier version, which forbids fields it does
        # not know, still reads every other message.
        if not self.subgraphs:
            data.pop("subgraphs", None)
        if self.context is None:
            data.pop("context", None)
        return data


# How a consensus decides: equal answers, a judge capability, or (in-process only) a function.
ConsensusVote = Literal["majority", "judge", "custom"]
MAX_VOTERS = 16


class ConsensusHint(_Model):
    """How a consensus reach is decided: `n` agents answer, `quorum` must agree. Frozen, like the
    hint holding it. ``custom`` names a Python function given to `Router.consensus`, which never
    travels in a message: a message from elsewhere saying ``custom`` is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(3, ge=1, le=MAX_VOTERS, description="Distinct agents asked.")
    quorum: int = Field(2, ge=1, le=MAX_VOTERS, description="Agreeing answers needed for a decision.")
    vote: ConsensusVote = "majority"
    judge: str | None = Field(
        None, min_length=1, max_length=256, description="With vote 'judge': the capability that judges."
    )

    @model_validator(mode="after")
    def _consistent(self) -> ConsensusHint:
        # Typed errors, so a surface with other names for the fields (the CLI's flags) can say
        # each rule in its own words without checking it again.
        if self.quorum > self.n:
            raise PydanticCustomError(
                "consensus_quorum_above_n",
                "consensus quorum {quorum} is above n {n}: ask at least as many agents as must agree",
                {"quorum": self.quorum, "n": self.n},
            )
        if self.vote == "judge" and self.judge is None:
            raise PydanticCustomError(
                "consensus_judge_missing",
                "vote 'judge' needs judge: the name of the capability that picks among the answers",
            )
        if self.vote != "judge" and self.judge is not None:
            raise PydanticCustomError(
                "consensus_judge_unused",
                "judge {judge} goes with vote 'judge' only, and the vote is {vote}",
                {"judge": repr(self.judge), "vote": repr(self.vote)},
            )
        return self


class RoutingHint(_Model):
    """How the caller wants the task delivered. Frozen: the router shares common hints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ReachMode = "unicast"
    target: str | None = Field(None, description="Agent id for directed delivery.")
    fallback: list[str] = Field(
        default_factory=list, description="Agent ids to try when no candidate can serve."
    )
    merge: MergePolicy = "all"
    strategy: str | None = Field(None, description="Override the policy's selection strategy.")
    consensus: ConsensusHint | None = Field(
        None, description="Consensus mode: how many agents answer and how the answers are decided."
    )
    defer: bool = Field(
        False,
        description=(
            "When no agent can serve now (none declares the capability or none is usable, and the "
            "fallback agents found nothing), wait in the deferred queue for one, within the deadline."
        ),
    )

    @model_validator(mode="after")
    def _directed_needs_target(self) -> RoutingHint:
        if self.mode == "directed" and not self.target:
            msg = "routing_hint.mode is 'directed' but routing_hint.target is empty; name the agent id"
            raise ValueError(msg)
        return self


class ReachMessage(_Model):
    """One task on its way to an agent."""

    raw_payload: JsonValue = None
    meta_info: MetaInfo = Field(default_factory=MetaInfo)
    routing_hint: RoutingHint = Field(default_factory=RoutingHint)


class ResultStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    NO_CANDIDATE = "no_candidate"
    INVALID = "invalid"
    CANCELLED = "cancelled"
    PARTIAL = "partial"
    # The agent stopped to ask for something (a human's answer): resume on the same thread.
    INPUT_REQUIRED = "input_required"
    # A consensus reach in which fewer than the quorum of answers agreed.
    NO_CONSENSUS = "no_consensus"


class Fault(StrEnum):
    """Whose doing a failed outcome is; only `AGENT` counts against an agent's health.

    ``caller``: the request was wrong (a payload that fails the schema, a loop, a reused task id).
    ``task``: the agent ran the task and answered with an application error (an MCP ``isError``).
    ``agent``: the agent or its connection failed (it raised, hung, answered malformed output).
    ``router``: the router could not deliver in time, or found no capacity; nobody failed.
    """

    CALLER = "caller"
    TASK = "task"
    AGENT = "agent"
    ROUTER = "router"


class Timings(_Model):
    """Where the time went, in milliseconds. Frozen, so one zero instance can be shared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    routing_ms: float = 0.0
    queueing_ms: float = 0.0
    agent_ms: float = 0.0
    total_ms: float = 0.0


class ReachResult(_Model):
    """The outcome of one reach: a payload, or an error that says what went wrong."""

    status: ResultStatus
    task_id: str
    payload: JsonValue = None
    agent_id: str | None = None
    trace_id: str | None = None
    capability: str | None = None
    attempts: int = Field(0, ge=0, description="Deliveries made to agents for this task.")
    served_by: DeliveryPath = "candidate"
    timings: Timings = Field(default_factory=Timings)
    error_type: str | None = None
    error: str | None = None
    fault: Fault | None = Field(None, description="Whose doing a failed outcome is; None when ok.")
    delivered: bool = Field(
        False,
        description=(
            "True once an agent received the task: a failed result that was delivered may have done "
            "its work (a timeout or lost connection leaves the outcome unknown)."
        ),
    )
    retryable: bool = Field(False, description="True when another agent might succeed.")
    extra: dict[str, JsonValue] = Field(
        default_factory=dict, description="Adapter-specific output kept beside the payload."
    )
    results: list[ReachResult] | None = Field(None, description="Broadcast only: one result per target.")

    @property
    def ok(self) -> bool:
        return self.status is ResultStatus.OK

    def raise_for_status(self) -> Self:
        """Return the result if it is ok, else raise the `ReachError` subclass that matches it
        (`ReachTimeoutError`, `NoCandidateError`, `InvalidMessageError`, `InputRequiredError`...).

        Returns the result, so calls chain: ``(await router.route(...)).raise_for_status().payload``.
        """
        if self.status is ResultStatus.OK:
            return self
        raise error_for(self)
