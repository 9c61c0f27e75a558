"""The `RunnableConfig` of one routed run: who asked for what, visible in traces and callbacks.

No parent is passed explicitly: LangChain finds the enclosing run (a tool that called the router,
say) in a context variable, and the router awaits the agent in the caller's context, so the
routed run nests under it. Only the agent's own callbacks need merging with the parent's, or
they would replace them and cut the run off from its parent.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs, var_child_runnable_config

from middleware import ReachMessage
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError
from reach_adapters.langchain.histories import scope_histories
from reach_adapters.router import newest_turn

__all__ = ["TAG", "check_config", "detached", "newest", "run_config", "thread_of"]

TAG = "agent-reach"


def _strings(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _metadata(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(key, str) for key in value)


def _callbacks(value: object) -> bool:
    if isinstance(value, list):
        return all(isinstance(handler, BaseCallbackHandler) for handler in value)
    return value is None or isinstance(value, BaseCallbackManager)


# The `RunnableConfig` keys allowed, each with its check: every run merges these values, so a bad
# one would fail each run rather than the declaration. run_id is not among them: a fixed run id
# would give every routed run the same id.
_VALUES: dict[str, tuple[Callable[[object], bool], str]] = {
    "tags": (_strings, "a list of strings"),
    "metadata": (_metadata, "a dict with str keys"),
    "callbacks": (_callbacks, "None, a list of callback handlers or a callback manager"),
    "run_name": (lambda v: isinstance(v, str), "a string"),
    "max_concurrency": (lambda v: v is None or _positive(v), "a positive int or None"),
    "recursion_limit": (_positive, "a positive int"),
    "configurable": (lambda v: isinstance(v, dict), "a dict"),
}


def check_config(config: Mapping[str, Any] | None, agent_id: str) -> RunnableConfig:
    """The agent's base config, checked: only `RunnableConfig` keys and values, and no run_id."""
    if config is None:
        return RunnableConfig()
    if not isinstance(config, Mapping):
        msg = f"agent {agent_id}: config must be a RunnableConfig dict, got {type(config).__name__}"
        raise InvalidDeclarationError(msg)
    unknown = sorted(set(config) - _VALUES.keys())
    if unknown:
        msg = (
            f"agent {agent_id}: config keys {unknown} are not allowed; use {sorted(_VALUES)} "
            "(put your own values under 'configurable'; run ids are made per run)"
        )
        raise InvalidDeclarationError(msg)
    for key, value in config.items():
        valid, wanted = _VALUES[key]
        if not valid(value):
            msg = f"agent {agent_id}: config[{key!r}] must be {wanted}, got {reprlib.repr(value)}"
            raise InvalidDeclarationError(msg)
    return cast(RunnableConfig, dict(config))


def run_config(
    base: RunnableConfig, message: ReachMessage, agent_id: str, histories: frozenset[str] = frozenset()
) -> RunnableConfig:
    """`base` plus the task's ids in metadata, tags and run name, and the call's `configurable`.

    `histories`: the ids the agent's chat histories are kept per (`history_ids`); those the call
    gives are made its principal's own, when it is made for one (`scope_histories`). The call's
    message keeps the ids as the caller named them, so what is shown to the caller names them so.
    """
    meta = message.meta_info
    capability = meta.capability or ""
    config = base.copy()
    config["metadata"] = {
        **base.get("metadata", {}),
        "reach_task_id": meta.task_id,
        "reach_trace_id": meta.trace_id,
        "reach_capability": capability,
        "reach_agent_id": agent_id,
    }
    config["tags"] = [
        *base.get("tags", ()),
        TAG,
        f"reach:capability:{capability}",
        f"reach:agent:{agent_id}",
    ]
    config.setdefault("run_name", f"{capability}@{agent_id}")
    configurable = meta.configurable
    if configurable:
        if not _CHECKPOINT_KEYS.isdisjoint(configurable):
            check_checkpoint_keys(configurable)
        if histories and meta.principal is not None:
            configurable = scope_histories(configurable, histories, meta.principal)
        # The caller's per-call settings (a thread id, say) over the agent's own.
        config["configurable"] = {**base.get("configurable", {}), **configurable}
    if base.get("callbacks") is not None:
        parent = var_child_runnable_config.get()
        if parent is not None and parent.get("callbacks") is not None:
            merged = merge_configs({"callbacks": parent["callbacks"]}, {"callbacks": base["callbacks"]})
            config["callbacks"] = merged.get("callbacks")
    return config


# LangGraph's checkpoint keys of ``configurable`` (`langgraph._internal._constants`), beside the
# thread: which checkpoint of the thread a run starts from. Keys starting with "__" are refused
# for every agent (`middleware.configurable`).
_CHECKPOINT_KEYS = frozenset({"checkpoint_id", "checkpoint_ns", "checkpoint_map"})


def check_checkpoint_keys(configurable: Mapping[str, Any]) -> None:
    """Refuse checkpoint keys a caller may not give, as the caller's mistake (``invalid``): a
    graph handed them would fail, or write where its subgraphs keep their state, as the agent.

    ``checkpoint_id`` is allowed, a string: LangGraph's time travel, a run from an earlier
    checkpoint of the caller's own thread (threads are per principal). ``checkpoint_ns`` only
    as ``""``, the graph's own namespace (what LangGraph's snapshots carry); another names a
    subgraph's, which LangGraph sets itself, as it sets ``checkpoint_map``.
    """
    if "checkpoint_map" in configurable:
        msg = "configurable['checkpoint_map'] is LangGraph's own (set for subgraphs): leave it out"
        raise InvalidMessageError(msg)
    namespace = configurable.get("checkpoint_ns", "")
    if namespace != "":
        msg = (
            f"configurable['checkpoint_ns'] is {reprlib.repr(namespace)}: only '' (the graph's own "
            "checkpoints) may be given; a subgraph's namespace is LangGraph's to set"
        )
        raise InvalidMessageError(msg)
    checkpoint = configurable.get("checkpoint_id")
    if checkpoint is not None and not isinstance(checkpoint, str):
        msg = (
            f"configurable['checkpoint_id'] must be a string, the id of a checkpoint of the thread "
            f"(LangGraph's time travel), got {reprlib.repr(checkpoint)}"
        )
        raise InvalidMessageError(msg)


def thread_of(config: Mapping[str, Any] | None) -> str | None:
    """The ``thread_id`` a run config names (LangGraph takes str, int or UUID ids), else None."""
    configurable = config.get("configurable") if config else None
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    if thread is None or thread == "" or isinstance(thread, bool):
        return None
    return str(thread)


def newest(config: RunnableConfig) -> RunnableConfig:
    """`config` naming its thread's newest checkpoint: a run from a named ``checkpoint_id`` (time
    travel, or the checkpoint its thread waits at) writes its own after it, so the one it named
    says only where it began."""
    configurable = config.get("configurable")
    latest = newest_turn(configurable)
    return config if latest is configurable else cast(RunnableConfig, {**config, "configurable": latest})


@contextmanager
def detached() -> Iterator[None]:
    """Run the agent as a run of its own, not a subgraph of the LangGraph graph whose node called
    the router: the enclosing run's callbacks stay (traces nest as before), its ``configurable``
    (the graph's thread, checkpoint namespace and internals) does not reach the agent."""
    parent = var_child_runnable_config.get()
    if not parent or not parent.get("configurable"):
        yield
        return
    token = var_child_runnable_config.set(cast(RunnableConfig, {**parent, "configurable": {}}))
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)
