"""``reach_consensus``: the router's consensus as a LangChain tool, offered by `ReachToolkit` when
asked (``include_consensus=True``): each call costs n agent calls, so a model is not offered it
unasked."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.tools import ToolException
from pydantic import Field

from middleware import ReachResult
from middleware.models import MAX_VOTERS
from reach_adapters.errors import ReachError, SyncCallError
from reach_adapters.langchain.tools import ReachTool, RoutedCall
from reach_adapters.router import Router, schema_key

__all__ = ["CONSENSUS_TOOL_NAME", "ReachConsensusTool"]

CONSENSUS_TOOL_NAME = "reach_consensus"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "capability": {"type": "string", "minLength": 1, "description": "What every agent is asked."},
        "payload": {"description": "The task, shaped as the capability's input schema."},
        # Optional arguments take null too: strict function calling makes a model send them all.
        "n": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_VOTERS}, {"type": "null"}]},
        "quorum": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_VOTERS}, {"type": "null"}]},
        "vote": {"anyOf": [{"type": "string", "enum": ["majority", "judge"]}, {"type": "null"}]},
        "judge": {
            "anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}],
            "description": "With vote 'judge': the capability that picks among the answers.",
        },
    },
    "required": ["capability"],
}
_KEY = schema_key(_SCHEMA)


class ReachConsensusTool(ReachTool):
    """Asks n distinct agents of a capability the same task and answers what they agreed on.

    `refuse` says why a capability is outside what the toolkit offers (its filters), else None:
    the capability asked and the judge are both held to it, as `ReachAnyTool`'s targets are.
    """

    refuse: Callable[[str, str | None], str | None] | None = Field(None, exclude=True)
    namespace: str | None = None

    @classmethod
    def build(
        cls,
        router: Router,
        *,
        handle_tool_error: bool,
        refuse: Callable[[str, str | None], str | None] | None = None,
        namespace: str | None = None,
        principal: str | None = None,
    ) -> ReachConsensusTool:
        tool = cls(
            router=router,
            name=CONSENSUS_TOOL_NAME,
            description=(
                "Ask n (default 3) distinct agents offering a capability the same task at once and get "
                "what at least quorum (default 2) of them agreed on, or with vote 'judge' what the "
                "judge capability picked. Use it when one agent's answer is not trusted enough; it "
                "costs n agent calls. The answer has the decision and every agent's vote."
            ),
            args_schema=_SCHEMA,
            handle_tool_error=handle_tool_error,
            refuse=refuse,
            namespace=namespace,
            principal=principal,
        )
        tool._schema_key = _KEY
        return tool

    def _request(self, arguments: dict[str, Any]) -> RoutedCall:
        self._check(arguments)
        if self.refuse is not None:
            for asked in (arguments["capability"], arguments.get("judge")):
                refused = None if asked is None else self.refuse(asked, None)
                if refused is not None:
                    msg = f"{self.name} may not reach {asked!r}: {refused}"
                    raise ToolException(msg)
        return RoutedCall(
            "route",
            arguments["capability"],
            arguments.get("payload"),
            namespace=self.namespace,
            principal=self.principal,
        )

    def _options(self, arguments: dict[str, Any], call: RoutedCall) -> dict[str, Any]:
        how = {
            key: arguments[key] for key in ("n", "quorum", "vote", "judge") if arguments.get(key) is not None
        }
        return {**how, **call.options()}

    def _run(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        call = self._request(arguments)
        try:
            result = self.router.consensus_sync(call.target, call.payload, **self._options(arguments, call))
        except SyncCallError:
            raise
        except ReachError as exc:
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        return self._decided(result)

    async def _arun(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        call = self._request(arguments)
        try:
            result = await self.router.consensus(call.target, call.payload, **self._options(arguments, call))
        except ReachError as exc:
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        return self._decided(result)

    def _decided(self, result: ReachResult) -> tuple[str, ReachResult]:
        if not result.ok:
            # Raises, with the result kept as the error message's artifact.
            return self._answer(result)
        decided = {"decision": result.payload, "votes": result.extra.get("votes", [])}
        return json.dumps(decided, ensure_ascii=False), result
