"""The `RunnableConfig` of one routed run: who asked for what, visible in traces and callbacks.

No parent is passed explicitly: LangChain finds the enclosing run (a tool that called the router,
say) in a context variable, and the router awaits the agent in the caller's context, so the
routed run nests under it. Only the agent's own callbacks need merging with the parent's, or
they would replace them and cut the run off from its parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import CONFIG_KEYS, merge_configs, var_child_runnable_config

from middleware import ReachMessage
from reach_adapters.errors import InvalidDeclarationError

__all__ = ["TAG", "check_config", "run_config"]

TAG = "agent-reach"
# A fixed run id would give every routed run the same id.
_ALLOWED = frozenset(CONFIG_KEYS) - {"run_id"}


def check_config(config: Mapping[str, Any] | None, agent_id: str) -> RunnableConfig:
    """The agent's base config, checked: only `RunnableConfig` keys, and no run_id."""
    if config is None:
        return RunnableConfig()
    if not isinstance(config, Mapping):
        msg = f"agent {agent_id}: config must be a RunnableConfig dict, got {type(config).__name__}"
        raise InvalidDeclarationError(msg)
    unknown = sorted(set(config) - _ALLOWED)
    if unknown:
        msg = (
            f"agent {agent_id}: config keys {unknown} are not allowed; use {sorted(_ALLOWED)} "
            "(put your own values under 'configurable'; run ids are made per run)"
        )
        raise InvalidDeclarationError(msg)
    return cast(RunnableConfig, dict(config))


def run_config(base: RunnableConfig, message: ReachMessage, agent_id: str) -> RunnableConfig:
    """`base` plus the task's ids in metadata, tags and run name."""
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
    if base.get("callbacks") is not None:
        parent = var_child_runnable_config.get()
        if parent is not None and parent.get("callbacks") is not None:
            merged = merge_configs({"callbacks": parent["callbacks"]}, {"callbacks": base["callbacks"]})
            config["callbacks"] = merged.get("callbacks")
    return config
