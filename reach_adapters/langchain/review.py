"""The answer `HumanInTheLoopMiddleware` takes in its default (batched) mode, checked before
LangGraph saves it.

In ``per_call`` mode each interrupt carries a ``response_schema``, which LangGraph checks a lone
answer against, and the adapter several before any is sent (`resuming.check_schemas`). In batched
mode the interrupt carries none: its value is a plain `HITLRequest` (the actions to review, and the
decisions each allows) and the middleware checks the answer itself, inside the graph, once
LangGraph has saved it as the interrupt's answer. A refused answer (a decision the action does not
allow, a decision list of the wrong length, no ``decisions`` at all) then raises `ValueError` or
`KeyError` in the middleware's node, which would count against the agent, and every later resume of
the thread gets the saved answer again instead of its own: the interrupt could never be answered.

LangChain gives no signal to tell that `ValueError` from the agent's own, and the value carries no
marker at run time (`HITLRequest` is a TypedDict), so the request is recognised narrowly by its
shape: exactly LangChain's own `HITLRequest` keys, with one review config per action. Its answer
is checked against the middleware's own decision types before the graph sees it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from typing import Annotated, Any, Union

from pydantic import BaseModel, Discriminator, JsonValue, TypeAdapter, ValidationError, create_model

from reach_adapters.errors import InvalidMessageError, describe_validation_error

__all__ = ["check_answers", "review_json_schema", "review_schema"]

# The keys of LangChain's `HITLRequest`, and nothing else: a graph's own interrupt that merely
# looks alike is not the middleware's.
_REQUEST_KEYS = frozenset({"action_requests", "review_configs"})


@cache
def _middleware_types() -> tuple[TypeAdapter[Any], dict[str, Any]] | None:
    """LangChain's `HITLRequest` (as a validator) and its decision types by name, or None when the
    `langchain` package, which only the middleware needs, is not installed."""
    try:
        from langchain.agents.middleware.human_in_the_loop import (
            ApproveDecision,
            EditDecision,
            HITLRequest,
            RejectDecision,
            RespondDecision,
        )
    except ImportError:
        return None
    decisions = {
        "approve": ApproveDecision,
        "edit": EditDecision,
        "reject": RejectDecision,
        "respond": RespondDecision,
    }
    return TypeAdapter(HITLRequest), decisions


def review_schema(value: Any) -> type[BaseModel] | None:
    """The answer a batched `HumanInTheLoopMiddleware` interrupt with this `value` takes (one
    allowed decision per action, in order, under ``decisions``), or None when `value` is not
    such a request."""
    types = _middleware_types()
    if types is None or not isinstance(value, Mapping) or set(value) != _REQUEST_KEYS:
        return None
    try:
        checked = types[0].validate_python(value)
    except ValidationError:
        return None
    configs = checked["review_configs"]
    if not configs or len(configs) != len(checked["action_requests"]):
        return None
    return _answer_model(tuple(tuple(dict.fromkeys(config["allowed_decisions"])) for config in configs))


def review_json_schema(value: Any) -> dict[str, Any] | None:
    """`review_schema` as JSON Schema, for the interrupt's ``response_schema``."""
    model = review_schema(value)
    return None if model is None else copy.deepcopy(_json_schema(model))


@lru_cache(maxsize=256)
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


@lru_cache(maxsize=256)
def _answer_model(allowed: tuple[tuple[str, ...], ...]) -> type[BaseModel] | None:
    """The answer model for actions allowing these decisions, built once per shape: building a
    pydantic model costs milliseconds, and a review asks the same few shapes again and again."""
    types = _middleware_types()
    if types is None:
        return None
    decisions = types[1]
    positions: list[Any] = []
    for kinds in allowed:
        known = tuple(decisions[kind] for kind in kinds if kind in decisions)
        if not known:
            return None
        if len(known) == 1:
            positions.append(known[0])
            continue
        # Checked only against the decision its `type` names: one precise error, not one per kind.
        # A union built at run time, which type checkers cannot follow.
        union: Any = Union[known]  # noqa: UP007
        positions.append(Annotated[union, Discriminator("type")])
    decided: Any = tuple.__class_getitem__(tuple(positions))
    return create_model("ReviewAnswer", decisions=(decided, ...))


def check_answers(
    answered: Sequence[tuple[Any, Any]], agent_id: str, tools: frozenset[str] | None = None
) -> None:
    """Raises `InvalidMessageError` when a batched `HumanInTheLoopMiddleware` interrupt among the
    `answered` (each interrupt with its answer) is given an answer it refuses: the caller's
    mistake, and since nothing is sent, the interrupt can be answered again. `tools`: the agent's
    tools, which an edit may turn a call to (the middleware refuses any other, once the answer is
    saved); None when they are not known."""
    for item, answer in answered:
        schema = review_schema(getattr(item, "value", None))
        if schema is None:
            continue
        try:
            decided = schema.model_validate(answer)
        except ValidationError as exc:
            problems = describe_validation_error(exc, limit=3)
            actions = len(getattr(item, "value", {})["action_requests"])
            msg = (
                f"resume= does not match what the interrupt of agent {agent_id} takes (its "
                f"response_schema: {{'decisions': [...]}}, one allowed HumanInTheLoopMiddleware "
                f"decision for each of its {actions} actions, in order): {problems}; nothing was "
                "saved, answer it again on the same thread"
            )
            shape: dict[str, JsonValue] = {"decisions": [{"type": "<an allowed decision>"}] * actions}
            raise InvalidMessageError(msg, fix_options={"resume": shape}) from None
        if tools is not None:
            _check_edits(item.value["action_requests"], getattr(decided, "decisions", ()), tools, agent_id)


def _check_edits(
    actions: Sequence[Mapping[str, Any]], decisions: Sequence[Any], tools: frozenset[str], agent_id: str
) -> None:
    """Refuses an edit that turns a call to a tool the agent does not have."""
    for i, (action, decision) in enumerate(zip(actions, decisions, strict=True)):
        if not isinstance(decision, Mapping) or decision.get("type") != "edit":
            continue
        name = decision["edited_action"]["name"]
        if name != action["name"] and name not in tools:
            msg = (
                f"resume= edits action {i} of agent {agent_id}'s review into a call to {name!r}, "
                f"which is not one of its tools ({', '.join(sorted(tools))}); nothing was saved, "
                "answer it again on the same thread"
            )
            raise InvalidMessageError(
                msg, fix_options={"resume": {"decisions": ["<decision>"] * len(actions)}}
            )
