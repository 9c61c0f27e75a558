"""Routing policy: every tunable of selection and delivery, checked when it is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from reach_adapters.errors import InvalidPolicyError, describe_validation_error
from reach_adapters.router.imports import ImportPathError, import_object

__all__ = [
    "AGENT_ERRORS",
    "MAX_RETRIES_CAP",
    "AgentErrors",
    "BreakerSettings",
    "RatingPolicy",
    "RoutingPolicy",
    "ScoringWeights",
    "StrategyName",
]

StrategyName = Literal["weighted", "least_wait", "rating"]

# More than three retries makes the worst case of one task unacceptably long (seed 000 §3.3).
MAX_RETRIES_CAP = 3


@dataclass(frozen=True, slots=True)
class AgentErrors:
    """What the policy says of an agent's exception, handed to each delivery in one piece:
    the exception types worth retrying elsewhere beside those recognised already, and whether
    callers read its text (`RoutingPolicy.expose_agent_errors`)."""

    transient: tuple[type[BaseException], ...] = ()
    expose: bool = True


AGENT_ERRORS = AgentErrors()


class _Strict(BaseModel):
    """Raises `InvalidPolicyError` naming the full field path, also for nested settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, /, **data: Any) -> None:
        for name, value in data.items():
            field = type(self).model_fields.get(name)
            nested = field.annotation if field is not None else None
            if isinstance(value, Mapping) and isinstance(nested, type) and issubclass(nested, _Strict):
                try:
                    data[name] = nested(**value)
                except InvalidPolicyError as exc:
                    detail = str(exc).split(": ", 1)[1].replace("field '", f"field '{name}.")
                    msg = f"invalid {type(self).__name__}: {detail}"
                    raise InvalidPolicyError(msg) from None
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"invalid {type(self).__name__}: {describe_validation_error(exc)}"
            raise InvalidPolicyError(msg) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, new settings checked like any others."""
        if not update:
            return super().model_copy(deep=deep)
        return type(self)(**{**dict(self), **update})


class BreakerSettings(_Strict):
    """Defaults from the design brief: >30 % errors in 60 s, or 2 failures in a row → 30 s out."""

    window_s: int = Field(60, ge=1, le=3600, strict=True, description="Rolling window, 1 s buckets.")
    min_calls: int = Field(10, ge=1, strict=True, description="Calls in the window before the rate counts.")
    error_rate: float = Field(0.3, gt=0, le=1, strict=True, allow_inf_nan=False)
    consecutive_failures: int = Field(2, ge=1, strict=True)
    quarantine_s: float = Field(30.0, gt=0, strict=True, allow_inf_nan=False)
    max_quarantine_s: float = Field(300.0, gt=0, strict=True, allow_inf_nan=False)


class ScoringWeights(_Strict):
    """Coefficients of the `weighted` strategy:
    ``weight·w/max_w + health·h − load·in_flight/max_concurrency + affinity·a``."""

    weight: float = Field(0.4, ge=0, strict=True, allow_inf_nan=False)
    health: float = Field(0.3, ge=0, strict=True, allow_inf_nan=False)
    load: float = Field(0.2, ge=0, strict=True, allow_inf_nan=False)
    affinity: float = Field(0.1, ge=0, strict=True, allow_inf_nan=False)


class RatingPolicy(_Strict):
    """How feedback moves an agent's rating for one capability (docs/consensus.md).

    Each score moves the rating by ``alpha·(score − rating)``; between scores it decays back to
    1.0, the capability as declared, losing half its distance every ``half_life_s``. Consensus
    voters that agree are scored ``agreed``, dissenters ``dissent``; an output that breaks the
    capability's output schema is scored ``output_failure``.
    """

    alpha: float = Field(0.2, gt=0, le=1, strict=True, allow_inf_nan=False)
    half_life_s: float = Field(600.0, gt=0, strict=True, allow_inf_nan=False)
    agreed: float = Field(1.0, ge=0, le=1, strict=True, allow_inf_nan=False)
    dissent: float = Field(0.0, ge=0, le=1, strict=True, allow_inf_nan=False)
    output_failure: float = Field(0.0, ge=0, le=1, strict=True, allow_inf_nan=False)


class RoutingPolicy(_Strict):
    """How the router selects and delivers. Defaults follow the design brief."""

    strategy: StrategyName = "weighted"
    weights: ScoringWeights = Field(default_factory=ScoringWeights)
    busy_ratio: float = Field(
        0.8,
        gt=0,
        le=1,
        strict=True,
        description="Above this share of max_concurrency an agent's score drops.",
    )
    high_priority: int = Field(
        7, ge=0, le=9, strict=True, description="Priority from which BUSY agents serve."
    )
    default_agent: str | None = Field(None, description="Agent that serves when nothing else can.")
    decision_log_size: int = Field(
        10_000, ge=1, strict=True, description="Decision records kept for explain()."
    )
    max_retries: int = Field(2, ge=0, le=MAX_RETRIES_CAP, strict=True)
    backoff_ms: float = Field(200.0, ge=0, strict=True, allow_inf_nan=False)
    backoff_multiplier: float = Field(2.0, ge=1, strict=True, allow_inf_nan=False)
    jitter_ms: float = Field(50.0, ge=0, strict=True, allow_inf_nan=False)
    retry_budget_ratio: float = Field(
        0.2,
        ge=0,
        le=1,
        strict=True,
        description="Retries allowed per call of a capability, over its recent calls.",
    )
    retry_budget_floor: float = Field(
        10.0, ge=0, strict=True, description="Retries each capability has at start."
    )
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    sample_above: int = Field(
        32,
        ge=1,
        strict=True,
        description=(
            "Candidates above which a unicast call screens and scores a random sample of them instead "
            "of every one (power of d choices), so selection among thousands of replicas stays bounded; "
            "up to this many, every candidate is ranked."
        ),
    )
    sample_size: int = Field(
        8,
        ge=1,
        strict=True,
        description=(
            "Usable candidates a sampled call draws and scores (at most sample_above): the best "
            "serves, the others take retries (max_retries is at most 3, so 4 are ever tried)."
        ),
    )
    max_waiting: int = Field(
        1000, ge=0, strict=True, description="Callers that may wait for capacity, per capability."
    )
    dedupe_window_s: float = Field(300.0, ge=0, strict=True, allow_inf_nan=False)
    dedupe_max_entries: int = Field(100_000, ge=1, strict=True)
    dedupe_max_bytes: int = Field(
        64 << 20, ge=1, strict=True, description="Total size of the results kept for task ids, in bytes."
    )
    dedupe_max_result_bytes: int = Field(
        1 << 20,
        ge=1,
        strict=True,
        description="Larger results are not kept: a repeat of their task id is refused, not run again.",
    )
    max_depth: int = Field(5, ge=1, strict=True, description="Deepest nesting of routed calls.")
    match_direct: float = Field(
        0.85, ge=0, le=1, strict=True, description="Match score from which a task goes to that capability."
    )
    match_confirm: float = Field(
        0.70, ge=0, le=1, strict=True, description="Match score from which the top matches are all tried."
    )
    match_top: int = Field(3, ge=1, strict=True, description="Capabilities tried when no match is sure.")
    probe_interval_s: float = Field(10.0, gt=0, strict=True, allow_inf_nan=False)
    probe_timeout_s: float = Field(2.0, gt=0, strict=True, allow_inf_nan=False)
    probe_failures: int = Field(2, ge=1, strict=True, description="Failed probes that take an agent out.")
    attempt_timeout_share: float = Field(
        0.5,
        gt=0,
        le=1,
        strict=True,
        allow_inf_nan=False,
        description=(
            "Share of the time left that one attempt of a task safe to repeat (idempotent or read-only) "
            "may take while another candidate could take over, so a hung replica cannot use up the "
            "whole deadline (Envoy's per-try timeout); 1 gives every attempt all the time left."
        ),
    )
    transient_errors: tuple[str, ...] = Field(
        (),
        description=(
            "Import paths ('module:Class') of more exception types that mean 'try again elsewhere', "
            "beside timeouts, connection errors, HTTP 429/502/503/504 and the transport and "
            "rate-limit errors of HTTP clients and LLM SDKs, which are recognised already."
        ),
    )
    sync_start_timeout_s: float = Field(
        5.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "How long a sync call (route_sync, a reach tool's invoke) waits for the router's running "
            "event loop to take it before SyncCallError: a loop that does not is blocked, most often "
            "by code waiting for this very call."
        ),
    )
    record_payloads: bool = Field(
        False,
        strict=True,
        description=(
            "Whether decision records keep each task's payload and its result's. Records are read "
            "through explain() and /api/decisions by more people than results are; off by default."
        ),
    )
    expose_agent_errors: bool = Field(
        True,
        strict=True,
        description=(
            "Whether callers read the text of an exception an agent raised. When false they get "
            "'agent error (reference <id>)' and the text goes to the server log at WARNING with that "
            "reference; an answer the agent gives as a task error (MCP isError) stays as it is."
        ),
    )

    task_workers: int = Field(
        64, ge=1, strict=True, description="Async tasks (router.submit, POST /api/tasks) run at once."
    )
    task_queue_size: int = Field(
        10_000,
        ge=0,
        strict=True,
        description="Async tasks that may wait for a worker; a submit beyond them is refused.",
    )
    task_result_ttl_s: float = Field(
        3600.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description="How long a finished async task and its result are kept for polling.",
    )
    task_max_kept: int = Field(
        10_000, ge=1, strict=True, description="Finished async tasks kept at most; the oldest go first."
    )
    # -- chains and compensation (issue 17) --
    compensation_journal_size: int = Field(
        10_000,
        ge=1,
        strict=True,
        description="Succeeded compensable reaches and finished chains kept for router.compensate(task_id); "
        "the oldest go first.",
    )

    ratings: RatingPolicy = Field(default_factory=RatingPolicy)

    defer_timeout_s: float = Field(
        300.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "How long a call with defer=True waits in the deferred queue for a capable agent when "
            "the caller set no deadline (counted from the call's creation)."
        ),
    )
    defer_look_again_s: float = Field(
        5.0,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description=(
            "How often calls waiting in the deferred queue route again on their own, for what "
            "changes without a catalog event (a busy agent back to online); oldest first."
        ),
    )
    defer_max_waiting: int = Field(
        10_000,
        ge=0,
        strict=True,
        description="Calls that may wait in the deferred queue at once; one more is refused at once.",
    )

    _agent_errors: AgentErrors = PrivateAttr(AGENT_ERRORS)

    @field_validator("transient_errors")
    @classmethod
    def _exception_types(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for path in paths:
            _exception_type(path)
        return paths

    @model_validator(mode="after")
    def _sample_fits(self) -> Self:
        if self.sample_size > self.sample_above:
            msg = (
                f"sample_size {self.sample_size} is above sample_above {self.sample_above}: a sample "
                "is drawn from more candidates than that; lower sample_size or raise sample_above"
            )
            raise ValueError(msg)
        return self

    def model_post_init(self, context: Any, /) -> None:
        transient = tuple(_exception_type(path) for path in self.transient_errors)
        self._agent_errors = AgentErrors(transient, self.expose_agent_errors)

    @property
    def transient_types(self) -> tuple[type[BaseException], ...]:
        """The exception types `transient_errors` names, imported once."""
        return self._agent_errors.transient

    @property
    def agent_errors(self) -> AgentErrors:
        """`transient_types` and `expose_agent_errors`, as each delivery takes them."""
        return self._agent_errors


def _exception_type(path: str) -> type[BaseException]:
    if ":" not in path:
        msg = f"{path!r} is not an import path; write it as 'module:Class', e.g. 'openai:APIError'"
        raise ValueError(msg)
    try:
        found = import_object(path)
    except ImportPathError as exc:
        raise ValueError(str(exc)) from None
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        msg = f"{path!r} is {type(found).__name__}, not an exception class"
        raise ValueError(msg)
    return found
