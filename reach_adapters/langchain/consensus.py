"""``reach_consensus``: the router's consensus as a LangChain tool, offered by `ReachToolkit` when
asked (``include_consensus=True``): each call costs n agent calls, so a model is not offered it
unasked. The tool itself (arguments, answer) is the core's (exported by `reach_adapters.router`),
as the MCP server's is."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from middleware import ReachResult
from reach_adapters.langchain.tools import ReachTool, RoutedCall
from reach_adapters.router import (
    CONSENSUS_MODEL_SCHEMA,
    CONSENSUS_MODEL_SCHEMA_KEY,
    CONSENSUS_TOOL_DESCRIPTION,
    CONSENSUS_TOOL_NAME,
    Router,
    consensus_tool_answer,
    consensus_tool_options,
)

__all__ = ["CONSENSUS_TOOL_NAME", "ReachConsensusTool"]


@dataclass(frozen=True, slots=True)
class _ConsensusCall(RoutedCall):
    """A routed call that is decided by a consensus: `how` are `Router.consensus`'s own options."""

    how: dict[str, Any] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        # Named, not `super()`: a slotted dataclass is a new class, which `super()` does not see.
        return {**self.how, **RoutedCall.options(self)}


class ReachConsensusTool(ReachTool):
    """Asks n distinct agents of a capability the same task and answers what they agreed on.

    The capability asked and the judge are both held to the toolkit's filters (`refuse`), as
    `ReachAnyTool`'s targets are.
    """

    @classmethod
    def build(
        cls,
        router: Router,
        *,
        handle_tool_error: bool,
        refuse: Callable[[str, str | None], str | None] | None = None,
        namespace: str | None = None,
        home: Callable[[str], str | None] | None = None,
        principal: str | None = None,
        resume_with: str | None = None,
    ) -> ReachConsensusTool:
        tool = cls(
            router=router,
            name=CONSENSUS_TOOL_NAME,
            description=CONSENSUS_TOOL_DESCRIPTION,
            args_schema=CONSENSUS_MODEL_SCHEMA,
            handle_tool_error=handle_tool_error,
            refuse=refuse,
            namespace=namespace,
            home=home,
            principal=principal,
            resume_with=resume_with,
        )
        tool._schema_key = CONSENSUS_MODEL_SCHEMA_KEY
        return tool

    def _request(self, arguments: dict[str, Any]) -> RoutedCall:
        self._check(arguments)
        for asked in (arguments["capability"], arguments.get("judge")):
            if asked is not None:
                self._hold(asked)
        return _ConsensusCall(
            "route",
            arguments["capability"],
            arguments.get("payload"),
            namespace=self._namespace_of(arguments["capability"]),
            principal=self.principal,
            how=consensus_tool_options(arguments),
        )

    def _reach_sync(self, call: RoutedCall) -> ReachResult:
        return self.router.consensus_sync(call.target, call.payload, **call.options())

    async def _reach(self, call: RoutedCall) -> ReachResult:
        return await self.router.consensus(call.target, call.payload, **call.options())

    def _answer(self, result: ReachResult) -> tuple[str, ReachResult]:
        if not result.ok:
            # Raises, with the result kept as the error message's artifact.
            return super()._answer(result)
        return json.dumps(consensus_tool_answer(result), ensure_ascii=False), result
