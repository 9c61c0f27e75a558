"""Build the agents that validated config files describe: all of them, or none."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from reach_adapters.config import (
    A2AAgentFile,
    AgentSpec,
    ChainFile,
    ConfigError,
    FunctionAgentFile,
    LangChainAgentFile,
    MCPAgentFile,
    server_cwd,
)
from reach_adapters.config.source import Loc
from reach_adapters.errors import ReachError
from reach_adapters.gateway.overrides import PatchedAgent
from reach_adapters.mcp import MCPServerAgent, ServerParameters
from reach_adapters.router import Agent, Capability, close_agent
from reach_adapters.router.agent import FunctionAgent
from reach_adapters.router.chains import ChainAgent
from reach_adapters.router.chains.agent import ChainHost

__all__ = ["build_agent", "build_agents", "close_agents"]


async def build_agents(
    specs: Iterable[AgentSpec], directory: Path, router: ChainHost | None = None
) -> list[Agent]:
    """Build every agent at once; if one fails, close the others and raise its `ConfigError`.

    `router`: the router the agents join, through which chains (``kind: chain``) route their steps.
    """
    specs = list(specs)
    outcomes = await asyncio.gather(
        *(build_agent(spec, directory, router) for spec in specs), return_exceptions=True
    )
    agents = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failures:
        await close_agents(agents)
        raise failures[0]
    return agents


async def build_agent(spec: AgentSpec, directory: Path, router: ChainHost | None = None) -> Agent:
    """One agent from its file; errors name the file and, when one is to blame, the field."""
    model = spec.model
    if isinstance(model, ChainFile):
        return ChainAgent(model.declaration(), router)
    if isinstance(model, A2AAgentFile):
        # Its overrides are the agent's own: they hold for the skills of a card fetched again.
        return await _a2a_agent(spec, model)
    if isinstance(model, MCPAgentFile):
        agent: Agent = await _mcp_agent(spec, model, directory)
        patches = {model.prefix + tool: patch for tool, patch in model.overrides.items()}
    else:
        agent = (
            _langchain_agent(spec, model) if isinstance(model, LangChainAgentFile) else _function(spec, model)
        )
        patches = dict(model.overrides)
    if not patches:
        return agent
    try:
        return _patched(spec, agent, {name: p.model_dump(exclude_unset=True) for name, p in patches.items()})
    except ConfigError:
        await close_agents([agent])
        raise


async def close_agents(agents: Sequence[Agent]) -> None:
    """Close agents that hold something open (MCP sessions, server processes)."""
    for agent in agents:
        await close_agent(agent)


def _patched(spec: AgentSpec, agent: Agent, patches: dict[str, dict[str, Any]]) -> Agent:
    declared = [cap.name for cap in agent.capabilities]
    for name in patches:
        if name not in declared:
            problem = f"the agent declares no capability {name!r}; it declares {declared}"
            raise spec.error(("overrides", _override_key(spec, name)), problem)
    try:
        return PatchedAgent(agent, patches)
    except ReachError as exc:
        raise spec.error(("overrides",), str(exc)) from None


def _override_key(spec: AgentSpec, name: str) -> str:
    model = spec.model
    return name.removeprefix(model.prefix) if isinstance(model, MCPAgentFile) else name


def _declarations(spec: AgentSpec) -> list[Capability] | None:
    model = spec.model
    if isinstance(model, MCPAgentFile | A2AAgentFile | ChainFile) or model.capabilities is None:
        return None
    return [Capability(**decl.model_dump(exclude_unset=True)) for decl in model.capabilities]


def _langchain_agent(spec: AgentSpec, model: LangChainAgentFile) -> Agent:
    from langchain_core.runnables import Runnable

    from reach_adapters.langchain import LangChainAgent

    runnable = spec.target
    if not isinstance(runnable, Runnable):
        runnable = _call_factory(spec, ("runnable",), model.runnable)
        if not isinstance(runnable, Runnable):
            problem = f"factory '{model.runnable}' returned a {type(runnable).__name__}, not a Runnable"
            raise spec.error(("runnable",), problem)
    try:
        return LangChainAgent(runnable, agent_id=spec.agent_id, capabilities=_declarations(spec))
    except ReachError as exc:
        raise spec.error((), str(exc)) from None


def _function(spec: AgentSpec, model: FunctionAgentFile) -> Agent:
    try:
        return FunctionAgent(
            spec.target, agent_id=spec.agent_id, capabilities=_declarations(spec), call_style=model.call_style
        )
    except ReachError as exc:
        raise spec.error((), str(exc)) from None


def _call_factory(spec: AgentSpec, loc: Loc, path: str) -> Any:
    try:
        return spec.target()
    except Exception as exc:  # noqa: BLE001 - a failing factory is reported against its file
        raise spec.error(loc, f"factory '{path}' failed: {type(exc).__name__}: {exc}") from None


async def _mcp_agent(spec: AgentSpec, model: MCPAgentFile, directory: Path) -> Agent:
    loc: Loc = ("url",) if model.url is not None else ("command",)
    try:
        headers = model.http_headers(os.environ)
    except ValueError as exc:
        raise spec.error(("bearer_token_env",), str(exc)) from None
    try:
        env = model.server_env(os.environ)
    except ValueError as exc:
        raise spec.error(("pass_env",), str(exc)) from None
    try:
        return await MCPServerAgent.connect(
            model.name, _server(model, directory, env), headers=headers or None, options=model.options()
        )
    except ReachError as exc:
        raise spec.error(loc, str(exc)) from None


async def _a2a_agent(spec: AgentSpec, model: A2AAgentFile) -> Agent:
    from reach_adapters.a2a import A2AAgent, A2AOverridesError

    try:
        headers = model.http_headers(os.environ)
    except ValueError as exc:
        raise spec.error(("bearer_token_env",), str(exc)) from None
    overrides = {skill: patch.model_dump(exclude_unset=True) for skill, patch in model.overrides.items()}
    try:
        # An agent that is down now starts OFFLINE, re-probed: one dead remote agent must not
        # keep the others from being served.
        return await A2AAgent.connect(
            model.url,
            model.name,
            headers=headers or None,
            options=model.options(),
            overrides=overrides,
            offline_ok=True,
        )
    except A2AOverridesError as exc:
        raise spec.error(("overrides",), str(exc)) from None
    except ReachError as exc:
        raise spec.error(("url",), str(exc)) from None


def _server(model: MCPAgentFile, directory: Path, env: dict[str, str] | None) -> ServerParameters:
    if model.url is not None:
        return model.url
    assert model.command is not None, "the file model requires command or url"
    # 'python' is resolved where the server is started, as for MCPServerAgent.connect.
    return StdioServerParameters(
        command=model.command, args=model.args, env=env, cwd=server_cwd(directory, model)
    )
