"""Routing policy: every tunable of selection and delivery, checked when it is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reach_adapters.errors import InvalidPolicyError, describe_validation_error

__all__ = ["MAX_RETRIES_CAP", "BreakerSettings", "RoutingPolicy", "ScoringWeights", "StrategyName"]

StrategyName = Literal["weighted", "least_wait", "rating"]

# More than three retries makes the worst case of one task unacceptably long (seed 000 §3.3).
MAX_RETRIES_CAP = 3


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
        0.2, ge=0, le=1, strict=True, description="Retries allowed per call, over recent calls."
    )
    retry_budget_floor: float = Field(10.0, ge=0, strict=True, description="Retries available at start.")
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    max_waiting: int = Field(
        1000, ge=0, strict=True, description="Callers that may wait for capacity, per capability."
    )
    dedupe_window_s: float = Field(300.0, ge=0, strict=True, allow_inf_nan=False)
    dedupe_max_entries: int = Field(100_000, ge=1, strict=True)
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
