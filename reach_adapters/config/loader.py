"""Validate a whole configuration directory before anything is built from it.

Validation has no side effects beyond importing the modules that agent files name: nothing is
started, so a directory that fails here leaves nothing half-running.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from reach_adapters.config.directory import (
    POLICY_STEM,
    SECURITY_STEM,
    config_files,
    file_stems,
    read_config_dir,
)
from reach_adapters.config.errors import ConfigError, ConfigFileError
from reach_adapters.config.models import (
    AGENT_KINDS,
    A2AAgentFile,
    AgentFileModel,
    ChainFile,
    FunctionAgentFile,
    LangChainAgentFile,
    MCPAgentFile,
    PolicyFile,
)
from reach_adapters.config.registry import RegistrySettings
from reach_adapters.config.source import Document, Loc, parse_document
from reach_adapters.config.validation import mapping_of, validate
from reach_adapters.errors import InvalidDeclarationError, InvalidPolicyError
from reach_adapters.extras import require_extra
from reach_adapters.mcp.options import resolve_command
from reach_adapters.router.capability import Capability
from reach_adapters.router.chains import ChainAgent, Step
from reach_adapters.router.chains.model import graph_problem
from reach_adapters.router.imports import ImportPathError, import_object, required_parameters
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.schemas import check_schema
from reach_adapters.security.spec import SecuritySpec

__all__ = [
    "INSECURE_CONFIG_FLAG",
    "AgentSpec",
    "GatewayConfig",
    "check_permissions",
    "load_config",
    "missing_program",
    "parse_config",
    "resolve_command",
    "server_cwd",
]

INSECURE_CONFIG_FLAG = "--allow-insecure-config"
_GROUP_OR_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH
_LANGCHAIN_EXTRA = "kind 'langchain' needs the langchain extra: pip install 'agent-reach[langchain]'"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One valid agent file: its model, and the object its import path names (None for MCP, A2A)."""

    agent_id: str
    document: Document
    model: AgentFileModel
    target: Any = None

    @property
    def file(self) -> Path:
        return self.document.path

    def error(self, loc: Loc, problem: str) -> ConfigFileError:
        """An error about this file, located at `loc` (for problems found while building)."""
        return self.document.error(loc, problem)

    def same_as(self, other: AgentSpec) -> bool:
        """Whether `other` declares the same agent the same way (comments and layout aside)."""
        return self.model == other.model


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A valid configuration directory: the policy, the agents by id, ``security.yaml`` (None
    without one: no authentication) and the policy file's ``registry`` (None: not a cluster node)."""

    directory: Path
    files: Mapping[str, bytes]
    policy: RoutingPolicy
    agents: Mapping[str, AgentSpec]
    security: SecuritySpec | None = None
    registry: RegistrySettings | None = None


def load_config(directory: str | Path, *, allow_insecure: bool = False) -> GatewayConfig:
    """Read and validate `directory`; raises `ConfigError` (`ConfigFileError` naming file and line).

    `allow_insecure` skips `check_permissions`, for directories only their owner can reach anyway.
    """
    path = Path(directory)
    if not allow_insecure:
        check_permissions(path)
    return parse_config(path, read_config_dir(path))


def check_permissions(directory: Path) -> None:
    """Refuse a config directory, or a config file in it, that other users may write.

    Config runs code (``kind: function`` imports, ``kind: mcp`` commands), so whoever may write
    the directory may run code as the server's user.
    """
    for path in [directory, *config_files(directory)]:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            continue  # removed since it was listed: nothing to run from it
        if mode & _GROUP_OR_OTHER_WRITE:
            msg = (
                f"{path} is writable by other users (mode {stat.filemode(mode)}) and config runs code; "
                f"run 'chmod go-w {path}', or pass {INSECURE_CONFIG_FLAG} if only trusted users share it"
            )
            raise ConfigError(msg)


def parse_config(directory: Path, files: Mapping[str, bytes]) -> GatewayConfig:
    """Validate the config files `files` (name → bytes) read from `directory`."""
    policy_name = _single(directory, files, POLICY_STEM, "the routing policy")
    security_name = _single(directory, files, SECURITY_STEM, "the security settings")
    policy = RoutingPolicy()
    policy_doc: Document | None = None
    registry = None
    if policy_name is not None:
        policy_doc, policy, registry = _policy(directory / policy_name, files[policy_name])
    security = None if security_name is None else _security(directory, security_name, files[security_name])
    agents: dict[str, AgentSpec] = {}
    for name, raw in files.items():
        if name in (policy_name, security_name):
            continue
        spec = _agent(directory, directory / name, raw)
        twin = agents.get(spec.agent_id)
        if twin is not None:
            problem = f"agent '{spec.agent_id}' is also declared in {twin.file.name}; keep one file per agent"
            raise spec.error(_id_loc(spec.model), problem)
        agents[spec.agent_id] = spec
    if policy_doc is not None and policy.default_agent is not None and policy.default_agent not in agents:
        problem = (
            f"names agent '{policy.default_agent}', which no file in {directory} declares; "
            "add that agent's file or remove default_agent"
        )
        raise policy_doc.error(("default_agent",), problem)
    return GatewayConfig(directory, dict(files), policy, agents, security, registry)


def _single(directory: Path, files: Mapping[str, bytes], stem: str, what: str) -> str | None:
    """The one file named `stem` (any suffix), or None; two of them are an error."""
    names = [name for name in files if Path(name).stem == stem]
    if len(names) > 1:
        msg = f"{directory}: {' and '.join(names)} both hold {what}; keep one"
        raise ConfigError(msg)
    return names[0] if names else None


def server_cwd(directory: Path, model: MCPAgentFile) -> Path | None:
    """The working directory of a stdio server: relative paths start at the config directory."""
    return None if model.cwd is None else (directory / model.cwd).resolve()


# -- the policy --------------------------------------------------------------------------------


def _policy(path: Path, raw: bytes) -> tuple[Document, RoutingPolicy, RegistrySettings | None]:
    doc = parse_document(path, raw)
    data = mapping_of(doc)
    registry = validate(doc, PolicyFile, data).registry
    data.pop("registry", None)
    try:
        return doc, RoutingPolicy(**data), registry
    except InvalidPolicyError as exc:
        raise ConfigFileError(path, str(exc)) from None


# -- security ---------------------------------------------------------------------------------


def _security(directory: Path, name: str, raw: bytes) -> SecuritySpec:
    """The typed ``security.yaml``, checked further by building its authenticator and guard: every
    token variable and the hop secret set, every key file there (``reach check`` says so before
    ``reach serve`` starts)."""
    # Imported here: the JWT and crypto libraries only load for a directory that needs them.
    require_extra("gateway", f"{name} (authentication)")
    from reach_adapters.security.credentials import Authenticator
    from reach_adapters.security.errors import SecurityConfigError
    from reach_adapters.security.guard import SecurityGuard

    doc = parse_document(directory / name, raw)
    spec = validate(doc, SecuritySpec, mapping_of(doc))
    try:
        Authenticator.from_spec(spec, directory)
        SecurityGuard(spec)
    except SecurityConfigError as exc:
        raise doc.error(exc.loc, exc.problem) from None
    return spec


# -- agent files -------------------------------------------------------------------------------


def _agent(directory: Path, path: Path, raw: bytes) -> AgentSpec:
    doc = parse_document(path, raw)
    data = mapping_of(doc)
    kind = data.get("kind")
    kinds = ", ".join(AGENT_KINDS)
    if kind is None:
        raise doc.error(("kind",), f"missing; give the agent's kind: one of {kinds}")
    model_cls = AGENT_KINDS.get(kind) if isinstance(kind, str) else None
    if model_cls is None:
        raise doc.error(("kind",), f"unknown kind {kind!r}; give one of {kinds}")
    model = validate(doc, model_cls, data)
    stems = file_stems(model.agent_id)
    if path.stem not in stems:
        problem = (
            f"declares agent '{model.agent_id}' but the file is named '{path.name}'; rename the file "
            f"to '{stems[0]}{path.suffix}' (or '{stems[1]}{path.suffix}')"
        )
        raise doc.error(_id_loc(model), problem)
    if isinstance(model, ChainFile):
        _check_chain(doc, model)
        return AgentSpec(model.agent_id, doc, model)
    _check_overrides(doc, model.overrides)
    if isinstance(model, MCPAgentFile):
        _check_server(directory, doc, model)
        return AgentSpec(model.agent_id, doc, model)
    if isinstance(model, A2AAgentFile):
        _check_headers(doc, model)
        return AgentSpec(model.agent_id, doc, model)
    _check_capabilities(doc, model.capabilities)
    if isinstance(model, LangChainAgentFile):
        return AgentSpec(model.agent_id, doc, model, _runnable(doc, model.runnable))
    return AgentSpec(model.agent_id, doc, model, _function(doc, model))


def _id_loc(model: AgentFileModel) -> Loc:
    return ("name",) if isinstance(model, MCPAgentFile | A2AAgentFile | ChainFile) else ("agent_id",)


def _runnable(doc: Document, path: str) -> Any:
    try:
        from langchain_core.runnables import Runnable
    except ImportError:
        raise doc.error(("kind",), _LANGCHAIN_EXTRA) from None
    target = _import(doc, ("runnable",), path)
    if isinstance(target, Runnable):
        return target
    if not callable(target):
        problem = f"'{path}' is a {type(target).__name__}, not a Runnable or a factory returning one"
        raise doc.error(("runnable",), problem)
    _zero_arguments(doc, ("runnable",), path, target)
    return target


def _function(doc: Document, model: FunctionAgentFile) -> Any:
    target = _import(doc, ("function",), model.function)
    if not callable(target):
        problem = f"'{model.function}' is a {type(target).__name__}, not a callable"
        raise doc.error(("function",), problem)
    return target


def _import(doc: Document, loc: Loc, path: str) -> Any:
    try:
        return import_object(path)
    except ImportPathError as exc:
        raise doc.error(loc, str(exc)) from None


def _zero_arguments(doc: Document, loc: Loc, path: str, factory: Any) -> None:
    needed = required_parameters(factory)
    if needed:
        problem = (
            f"factory '{path}' needs arguments ({', '.join(needed)}); point to a Runnable or to a "
            "factory that takes none"
        )
        raise doc.error(loc, problem)


def _check_headers(doc: Document, model: MCPAgentFile | A2AAgentFile) -> None:
    try:
        model.http_headers(os.environ)
    except ValueError as exc:
        raise doc.error(("bearer_token_env",), str(exc)) from None


def _check_server(directory: Path, doc: Document, model: MCPAgentFile) -> None:
    if model.command is None:
        _check_headers(doc, model)
        return
    cwd = server_cwd(directory, model)
    if cwd is not None and not cwd.is_dir():
        raise doc.error(("cwd",), f"directory {cwd} does not exist; fix the path (relative to {directory})")
    problem = missing_program(model.command, cwd=cwd, env=model.env)
    if problem is not None:
        raise doc.error(("command",), problem)


def missing_program(
    command: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """What is wrong with a server command that cannot be run, or None when it can.

    A relative path counts from `cwd`; a bare name is looked up on `env`'s PATH when it sets one.
    """
    program = resolve_command(command)
    if "/" in program and not Path(program).is_absolute():
        program = str((cwd or Path.cwd()) / program)
    if shutil.which(program, path=(env or {}).get("PATH")) is None:
        return (
            f"program '{command}' is not found or not executable; install it, fix the name, "
            "or give its full path"
        )
    return None


def _check_capabilities(doc: Document, declared: Sequence[BaseModel] | None) -> None:
    seen: set[str] = set()
    for index, decl in enumerate(declared or ()):
        fields = decl.model_dump(exclude_unset=True)
        name = fields["name"]
        if name in seen:
            raise doc.error(("capabilities", index, "name"), f"capability {name!r} is declared twice")
        seen.add(name)
        try:
            Capability(**fields)
        except InvalidDeclarationError as exc:
            raise doc.error(("capabilities", index), str(exc)) from None


def _check_chain(doc: Document, model: ChainFile) -> None:
    """The chain as a whole: its steps' references and order, then its declaration as a capability."""
    steps = [Step(**step.model_dump(exclude_unset=True)) for step in model.steps]
    problem = graph_problem(steps, model.output)
    if problem is not None:
        raise doc.error(*problem)
    try:
        ChainAgent(model.declaration())
    except InvalidDeclarationError as exc:
        raise doc.error((), str(exc)) from None


def _check_overrides(doc: Document, overrides: Mapping[str, BaseModel]) -> None:
    for name, patch in overrides.items():
        for field in ("input_schema", "output_schema"):
            schema = getattr(patch, field)
            problem = None if schema is None else check_schema(schema)
            if problem is not None:
                raise doc.error(("overrides", name, field), f"not a valid JSON Schema: {problem}")
