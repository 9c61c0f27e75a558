"""`LangChainAgent`: any LangChain Runnable as a routable agent, the runnable left as it is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import JsonValue

from middleware import Converter, ReachMessage, ReachResult
from middleware.fast import amend
from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.langchain.config import check_config, run_config
from reach_adapters.langchain.convert import ChunkConverter, LangChainConverter
from reach_adapters.langchain.derive import derive_capability
from reach_adapters.router.capability import Capability, validate_capabilities
from reach_adapters.router.identity import parse_agent_id

__all__ = ["LangChainAgent"]


class LangChainAgent:
    """Wraps a Runnable: a `RunnableLambda`, an LCEL chain, a LangGraph graph, a `create_agent` agent.

    Without `capabilities`, one is derived from the runnable's name (or the agent id's type when
    the name is generic), description and input/output JSON Schemas. `converter` moves payloads
    to and from the runnable's native shapes (`LangChainConverter` by default); `config` is a base
    `RunnableConfig` for every run, to which each task adds its ids as metadata, tags and run
    name. Streaming agents: the router's ``stream`` yields the runnable's ``astream`` chunks.
    """

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        *,
        agent_id: str,
        capabilities: Sequence[Capability | Mapping[str, Any]] | None = None,
        converter: Converter[Any, Any] | None = None,
        config: RunnableConfig | None = None,
    ) -> None:
        parse_agent_id(agent_id)
        if not isinstance(runnable, Runnable):
            msg = (
                f"agent {agent_id}: LangChainAgent wraps a LangChain Runnable, got "
                f"{type(runnable).__name__}; wrap plain functions in RunnableLambda or FunctionAgent"
            )
            raise InvalidDeclarationError(msg)
        if converter is None:
            converter = LangChainConverter()
        elif not isinstance(converter, Converter):
            msg = (
                f"agent {agent_id}: converter {type(converter).__name__} lacks the Converter methods "
                "to_middleware, from_middleware, result_to_middleware and result_from_middleware"
            )
            raise InvalidDeclarationError(msg)
        self._agent_id = agent_id
        self._runnable = runnable
        self._converter: Converter[Any, Any] = converter
        self._chunks = converter if isinstance(converter, ChunkConverter) else None
        self._config = check_config(config, agent_id)
        if capabilities is None:
            # The runnable's schemas describe its native shapes; only the default converter is
            # known to keep them, so a custom one gets an open declaration.
            schemas = isinstance(converter, LangChainConverter)
            capabilities = [derive_capability(runnable, agent_id, schemas=schemas)]
        self._capabilities = validate_capabilities(agent_id, capabilities)

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    @property
    def runnable(self) -> Runnable[Any, Any]:
        return self._runnable

    @property
    def converter(self) -> Converter[Any, Any]:
        return self._converter

    def __repr__(self) -> str:
        return f"LangChainAgent({self._runnable.get_name()!r}, agent_id={self._agent_id!r})"

    async def invoke(self, message: ReachMessage) -> ReachResult:
        native = self._converter.from_middleware(message)
        output = await self._runnable.ainvoke(native, run_config(self._config, message, self._agent_id))
        result = self._converter.result_to_middleware(output, message)
        amend(result, {"agent_id": self._agent_id})
        return result

    async def astream(self, message: ReachMessage) -> AsyncIterator[JsonValue]:
        """The runnable's `astream` chunks as JSON (a runnable that cannot stream yields once)."""
        native = self._converter.from_middleware(message)
        config = run_config(self._config, message, self._agent_id)
        chunks = self._chunks
        async for chunk in self._runnable.astream(native, config):
            if chunks is not None:
                yield chunks.chunk_to_middleware(chunk, message)
            else:
                yield self._converter.result_to_middleware(chunk, message).payload
