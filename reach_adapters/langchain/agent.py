"""`LangChainAgent`: any LangChain Runnable as a routable agent, the runnable left as it is."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import JsonValue

from middleware import Converter, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError
from reach_adapters.langchain.chat_schemas import (
    message_fields,
    message_keys,
    one_message,
    plain_fields,
    text_to_chat,
    with_message_schema,
)
from reach_adapters.langchain.config import check_config, detached, run_config, thread_of
from reach_adapters.langchain.configurable import Configurables
from reach_adapters.langchain.convert import ChunkConverter, LangChainConverter
from reach_adapters.langchain.derive import completed, derive_capability, input_type, native_schemas
from reach_adapters.langchain.graphs import (
    check_stream_options,
    checkpointed,
    checkpointed_graphs,
    find_graph,
    interrupts,
    invalid_resume,
    stop_marker,
    visible_graphs,
)
from reach_adapters.langchain.histories import history_ids
from reach_adapters.langchain.injected import refuse_injected
from reach_adapters.langchain.policy import judged
from reach_adapters.langchain.refusals import mark_refused, one_request
from reach_adapters.langchain.resuming import Resuming, same_interrupts
from reach_adapters.langchain.run_context import NO_CONTEXT, RunContext, refuse_context
from reach_adapters.langchain.stops import NO_STOP, Stop, stop_result
from reach_adapters.langchain.sync_only import Runner
from reach_adapters.langchain.turns import ThreadTurns
from reach_adapters.langchain.unanswerable import (
    Watch,
    interrupted,
    refuse_unsaved_breakpoints,
    unanswerable,
    watched,
)
from reach_adapters.langchain.unwritten import Unwritten
from reach_adapters.router import (
    Capability,
    Hold,
    StreamEnded,
    parse_agent_id,
    text_of_task,
    validate_capabilities,
)

__all__ = ["LangChainAgent"]

# The payloads of a call that gives a graph no input: the router sends {} for none to an object.
_NO_INPUT: tuple[None, dict[str, Any]] = (None, {})

logger = logging.getLogger(__name__)


class LangChainAgent:
    """Wraps a Runnable: a `RunnableLambda`, an LCEL chain, a LangGraph graph, a `create_agent` agent.

    Without `capabilities`, one is derived from the runnable's name (or the agent id's type when
    the name is generic), description and input/output JSON Schemas. `converter` moves payloads
    to and from the runnable's native shapes (`LangChainConverter` by default); `config` is a base
    `RunnableConfig` for every run, to which each task adds its ids as metadata, tags and run
    name. Streaming agents: the router's ``stream`` yields the runnable's ``astream`` chunks (its
    ``stream`` chunks for one LangChain runs only synchronously, see `sync_only`).
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
        refuse_injected(runnable, agent_id)
        # The runnable's schemas describe its native shapes; only the default converter is known
        # to keep them, so a custom one gets an open declaration.
        native = None
        if (
            converter is None
            or type(converter) is LangChainConverter
            or (capabilities is None and isinstance(converter, LangChainConverter))
        ):
            native = native_schemas(runnable, agent_id)
        native_input = with_message_schema(native[0] or {}) if native else {}
        if converter is None:
            converter = LangChainConverter(
                plain_fields=plain_fields(native_input),
                message_fields=message_fields(native_input),
                one_message=one_message(native_input),
                input_type=input_type(runnable),
                message_keys=message_keys(native_input),
            )
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
        self._one_request = one_request(runnable)
        # The graph whose stream modes a call may ask for; and the checkpointed graphs a call can
        # resume, read on their threads (see `Resuming`), None when it has none.
        self._graph = find_graph(runnable)
        self._unwritten = Unwritten.of(runnable)
        unsaved = [graph for graph, _ in visible_graphs(runnable) if not checkpointed(graph)]
        for graph in unsaved:
            refuse_unsaved_breakpoints(runnable, graph, agent_id)
        self._resuming = Resuming.of(runnable, self._graph, agent_id)
        # Every checkpointed graph, wherever it sits, needs a thread: a call must name one unless
        # a binding around each graph (`.with_config(configurable=...)`) does.
        graphs = list(checkpointed_graphs(runnable))
        self._graph_unreachable = bool(graphs) and self._resuming is None
        # Whether a run that stops at interrupt() asks what no resume= can answer (`unanswerable`):
        # only of graphs the adapter sees; a function running a graph may answer it itself.
        self._unanswerable = self._resuming is None and (bool(unsaved) or self._graph_unreachable)
        # Beside checkpointed graphs (`saved | unsaved`): their threads say whose interrupt it was.
        self._unsaved = bool(unsaved)
        self._thread_required = not all(bound for _, bound in graphs)
        # One call at a time on each of their threads (see `turns`).
        self._turns = ThreadTurns.of([graph for graph, _ in graphs], thread_of(self._config), agent_id)
        if self._thread_required and not thread_of(self._config):
            logger.warning(
                "agent %s is a LangGraph graph with a checkpointer: each call must name its "
                "conversation with configurable={'thread_id': ...}, or it is refused",
                agent_id,
            )
        self._configurables = Configurables.of(runnable, self._config, agent_id)
        self._histories = history_ids(runnable)  # made the principal's own in each call
        self._run_context = RunContext.of(runnable, agent_id)
        if capabilities is None:
            capabilities = [derive_capability(runnable, agent_id, native=native)]
        elif native is not None:
            capabilities = completed(capabilities, runnable, native)
        self._capabilities = validate_capabilities(agent_id, capabilities)
        # On the event loop, or in threads of its own, as many as it takes calls (`sync_only`).
        savers = list({id(graph.checkpointer): graph.checkpointer for graph, _ in graphs}.values())
        self._runner = Runner(
            runnable, agent_id, savers, sum(cap.max_concurrency for cap in self._capabilities)
        )
        self._from_text: dict[str, Callable[[str], JsonValue]] = {}
        # Where a text task (`{"text": ...}`, what A2A text parts become) is text too: a messages
        # state is an open object, so it would take the task as a state without messages. A
        # state that declares `text` itself takes it as it is.
        self._task_text: set[str] = set()
        for cap in self._capabilities:
            schema = cap.input_schema
            if shape := text_to_chat(schema):
                self._from_text[cap.name] = shape
                if "text" not in schema.get("properties", {}):
                    self._task_text.add(cap.name)

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

    @property
    def adapt_payload(self) -> Callable[[str, JsonValue], JsonValue] | None:
        """The router's hook for payloads of another shape (see `Agent`): a plain text task for a
        chat-shaped capability becomes one user message. None when no capability is chat-shaped,
        so the router has nothing to call."""
        return self._adapt if self._from_text else None

    def _adapt(self, capability: str, payload: JsonValue) -> JsonValue:
        shape = self._from_text.get(capability)
        if shape is None:
            return payload
        if type(payload) is str:
            return shape(payload)
        if capability in self._task_text and (text := text_of_task(payload)) is not None:
            return shape(text)
        return payload

    def invoke(self, message: ReachMessage) -> Coroutine[Any, Any, ReachResult]:
        """The runnable's run for `message` (`_invoke`), its thread held meanwhile."""
        return self._invoke(message) if self._turns is None else self._turns.call(message, self._invoke)

    def astream(self, message: ReachMessage) -> AsyncIterator[JsonValue]:
        """The runnable's `astream` chunks as JSON (`_astream`), its thread held meanwhile."""
        return self._astream(message) if self._turns is None else self._turns.stream(message, self._astream)

    async def _invoke(self, message: ReachMessage) -> ReachResult:
        if self._runner.unasked:
            await self._runner.ready()
        config = run_config(self._config, message, self._agent_id, self._histories)
        context = self._context(message)
        native, runnable = await self._input(message, config)
        with detached():
            try:
                output = await self._runner.invoke(runnable, native, config, context, self._hold(message))
            except Exception as exc:
                stopped = await self._judge(exc, message, config, started=False)
                if stopped is None:
                    raise
                return stopped
            resuming = self._resuming
            stop = NO_STOP if resuming is None else await resuming.stopped(output, config)
            if output is None and self._unwritten is not None:
                output = await self._unwritten.state(config)
        # The first graph of the chain that stopped asks: a resume answers it (`answer`), even
        # when a later graph, handed its interrupted state, stopped too. Only when it is the graph
        # whose output this is does the output say more (its state so far).
        if stop and not same_interrupts(interrupts(output), stop.interrupts):
            result = stop_result(stop, message, output if self._graph is not None else None)
        else:
            result = self._converter.result_to_middleware(output, message)
            if (
                result.status is ResultStatus.INPUT_REQUIRED
                and interrupts(output)
                and await self._in_vain(output, stop, config)
            ):
                # A question no resume= can answer (see `unanswerable`).
                raise unanswerable(self._agent_id, unreachable=self._graph_unreachable)
        amend(result, {"agent_id": self._agent_id})
        return result

    async def _astream(self, message: ReachMessage) -> AsyncGenerator[JsonValue, None]:
        """The runnable's `astream` chunks as JSON (a runnable that cannot stream yields once).

        A graph streams in the call's ``stream_mode`` (LangGraph's ``messages``, ``updates``,
        ``values``, ``custom``, or a list of them), when it gives one, and with ``subgraphs``
        its subgraphs' chunks too, each after its namespace.
        """
        if self._runner.unasked:
            await self._runner.ready()
        config = run_config(self._config, message, self._agent_id, self._histories)
        options = {**self._context(message)}
        native, runnable = await self._input(message, config)
        meta = message.meta_info
        mode = meta.stream_mode
        # Whether an interrupt() may be one nothing can resume: the stream's end says (below).
        in_vain = self._unanswerable or self._unsaved
        if mode is not None:
            # Such a graph streams the updates that say an interrupt() as well (`Watch`).
            options["stream_mode"] = watched(mode) if in_vain else mode
        if meta.subgraphs:
            options["subgraphs"] = True
        chunks = self._chunks
        stream = source = self._runner.stream(runnable, native, config, options, self._hold(message))
        watching = Watch(stream, mode) if mode is not None and in_vain else None
        if watching is not None:
            stream = aiter(watching)
        unanswered = started = False
        try:
            while True:
                # Detached for each step only: the caller's code between chunks keeps its context.
                with detached():
                    try:
                        chunk = await anext(stream)
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        stopped = await self._judge(exc, message, config, started=started)
                        if stopped is None:
                            raise
                        raise StreamEnded(stopped) from exc
                started = True
                if mode is None and stop_marker(marked := chunk[-1] if meta.subgraphs else chunk):
                    # LangGraph's own marker: the stream's end below says what the graph asks.
                    unanswered = unanswered or interrupted(marked)
                    continue
                if chunks is not None:
                    yield chunks.chunk_to_middleware(chunk, message)
                else:
                    yield self._converter.result_to_middleware(chunk, message).payload
        finally:
            # Now, while the call holds its thread: a run going on past it keeps it (`_hold`).
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()
        resuming = self._resuming
        if resuming is not None:
            # Whatever the stream mode showed, the threads' state says whether it stopped to ask.
            with detached():
                stop = await resuming.ended(config)
            if stop:
                raise StreamEnded(stop_result(stop, message))
        if in_vain and (unanswered or (watching is not None and watching.asked)):
            # No checkpointed graph waits: the interrupt was one no resume= can answer.
            raise unanswerable(self._agent_id, unreachable=self._graph_unreachable)

    async def aclose(self) -> None:
        """Stop the threads a sync-only agent runs in; runs still going finish on their own."""
        self._runner.close()

    def _hold(self, message: ReachMessage) -> Hold | None:
        """What a run left in a worker past its call holds: the call's conversation thread."""
        turns = self._turns
        return None if turns is None else partial(turns.hold, message)

    def _context(self, message: ReachMessage) -> Mapping[str, Any]:
        """The keyword arguments giving the run its context (LangGraph's ``context=``), checked."""
        asked = message.meta_info.context
        if self._run_context is not None:
            return self._run_context.kwargs(asked, self._agent_id)
        if asked is not None:
            raise refuse_context(self._agent_id)
        return NO_CONTEXT

    async def _in_vain(self, output: Any, stop: Stop, config: RunnableConfig) -> bool:
        """Whether the interrupts a run's `output` reports ask what no resume= can answer: the
        agent has no checkpointed graph a call can resume (`unanswerable`), or has graphs without
        one beside them (`saved | unsaved`) and no checkpointed graph's thread waits."""
        resuming = self._resuming
        if resuming is None:
            return self._unanswerable
        if not self._unsaved or stop:
            return False
        if resuming.reads_after(output):
            return True  # `stop` was read on the threads, and none waits
        with detached():
            return not await resuming.ended(config)

    async def _judge(
        self, error: Exception, message: ReachMessage, config: RunnableConfig, *, started: bool
    ) -> ReachResult | None:
        """What the run's `error` says before the router judges it: a refused request is marked
        never delivered (`mark_refused`) when the agent is that one request (`one_request`) and
        streamed nothing yet. Raises `InvalidMessageError` when `error` is LangGraph refusing the
        call's resume value (it does not match the interrupt's ``response_schema``): the caller's
        mistake, not the agent's failure. LangGraph saved nothing of that answer, so its
        interrupt can be answered again; of several answers, those taken before it stay taken.
        Then what LangChain's own failures mean (`policy.judged`): a reach tool's failed call,
        a tool's report of its task's error, a run stopped by one of LangChain's rules; None when
        the failure is the agent's."""
        if self._one_request and not started:
            mark_refused(error)
        meta = message.meta_info
        resuming = self._resuming
        if resuming is not None and "resume" in meta.__pydantic_fields_set__ and invalid_resume(error):
            raise await resuming.refused(error, meta.resume, config) from error
        return judged(error, message, self._agent_id)

    async def _input(self, message: ReachMessage, config: RunnableConfig) -> tuple[Any, Runnable[Any, Any]]:
        """The input for `message` and the runnable that takes it: the payload for the agent's
        runnable, or the answer to an interrupt for the runnable that resumes its graph.

        The caller's mistakes are `InvalidMessageError`s, never failures of the agent.
        """
        meta = message.meta_info
        if meta.stream_mode is not None or meta.subgraphs:
            check_stream_options(meta.stream_mode, meta.subgraphs, self._graph, self._agent_id)
        if self._thread_required and not thread_of(config):
            msg = (
                f"agent {self._agent_id} keeps one conversation per thread (a LangGraph checkpointer): "
                "call it with configurable={'thread_id': ...}"
            )
            raise InvalidMessageError(msg, fix_options={"configurable": {"thread_id": "<thread id>"}})
        if self._configurables is not None:
            self._configurables.check(config.get("configurable", {}), meta.configurable, self._agent_id)
        if "resume" not in meta.__pydantic_fields_set__:
            if (
                message.raw_payload in _NO_INPUT
                and "checkpoint_id" in (meta.configurable or ())
                and self._resuming is not None
                and await self._resuming.replays(config)
            ):
                # LangGraph's replay, ``ainvoke(None, <a checkpoint>)``: it goes on from there; any
                # input, {} too, would start a new run from START at that checkpoint.
                return None, self._runnable
            return self._converter.from_middleware(message), self._runnable
        if self._graph_unreachable:
            msg = (
                f"agent {self._agent_id} runs its checkpointed LangGraph graph where resume= cannot "
                "reach it (inside a parallel step, a fallback or a nested runnable); register the "
                "graph itself, or a chain that has it as a step, to resume"
            )
            raise InvalidMessageError(msg)
        resuming = self._resuming
        if resuming is None:
            msg = (
                f"resume= answers a LangGraph graph stopped at interrupt() on its thread; agent "
                f"{self._agent_id} is not a graph with a checkpointer, so there is nothing to resume"
            )
            raise InvalidMessageError(msg)
        return await resuming.answer(meta.resume, config, meta.principal)
