"""``reach check``: validate a config directory without starting anything."""

from __future__ import annotations

import argparse

from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.cli.render import render_check, render_json
from reach_adapters.config import (
    A2AAgentFile,
    AgentSpec,
    ChainFile,
    LangChainAgentFile,
    MCPAgentFile,
    load_config,
)
from reach_adapters.config.registry import RegistrySettings
from reach_adapters.security import redact_args, redact_url
from reach_adapters.security.spec import SecuritySpec

__all__ = ["run_check"]


def run_check(args: argparse.Namespace) -> int:
    config = load_config(args.config_dir, allow_insecure=args.allow_insecure_config)
    report = {
        "config_dir": str(config.directory),
        "policy": config.policy.model_dump(mode="json"),
        "agents": [_described(spec) for spec in config.agents.values()],
        "security": None if config.security is None else _security(config.security),
        "registry": None if config.registry is None else _registry(config.registry),
    }
    print(render_json(report) if args.json else render_check(report))
    return EXIT_OK


def _described(spec: AgentSpec) -> dict[str, str]:
    model = spec.model
    if isinstance(model, MCPAgentFile):
        # Shown to whoever runs the check: a key in the command line or URL stays in the file.
        source = (
            redact_url(model.url) if model.url else " ".join(redact_args([model.command or "", *model.args]))
        )
    elif isinstance(model, A2AAgentFile):
        source = redact_url(model.url)
    elif isinstance(model, LangChainAgentFile):
        source = model.runnable
    elif isinstance(model, ChainFile):
        source = " → ".join(step.capability for step in model.declaration().steps)
    else:
        source = model.function
    return {"agent_id": spec.agent_id, "kind": model.kind, "source": source, "file": spec.file.name}


def _registry(settings: RegistrySettings) -> dict[str, object]:
    # A password in the URL stays in the file.
    return {**settings.model_dump(mode="json"), "url": redact_url(settings.url)}


def _security(spec: SecuritySpec) -> dict[str, object]:
    # Names only: which principals exist, not how their tokens are given.
    return {
        "principals": sorted(spec.principals),
        "jwt_issuer": None if spec.jwt is None else spec.jwt.issuer,
        "open": list(spec.open),
    }
