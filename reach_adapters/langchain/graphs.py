"""What LangGraph graphs need beyond any runnable: optional state keys, threads, interrupts, nodes.

LangGraph is not a dependency of the adapter: a graph is recognised by what it carries, the
methods and settings of LangGraph's `Pregel` (``aget_state``, ``checkpointer``, ``stream_mode``).
Compiled `StateGraph`s and `create_agent` agents are such graphs, and so are the workflows of
LangGraph's Functional API (``@entrypoint``), which have threads, interrupts and stream modes
alike but no ``builder`` (no state schema: their input is the function's first parameter). A
graph is found wherever it sits in the runnable: under bindings (`.with_config()`,
`.with_retry()`), as the primary or a fallback of `.with_fallbacks()`, or as a step of a chain.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import typing_extensions
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSequence, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase

from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, chat_input
from reach_adapters.langchain.config import thread_of
from reach_adapters.langchain.savers import state_of
from reach_adapters.langchain.typed_dicts import typed_dict_schema

__all__ = [
    "INTERRUPT_KEY",
    "STREAM_MODES",
    "check_stream_options",
    "checkpointed",
    "checkpointed_graphs",
    "find_graph",
    "graph_schemas",
    "holds_value",
    "interrupts",
    "invalid_resume",
    "is_graph",
    "last_moved_by",
    "leading",
    "leading_graph",
    "message_keys_of",
    "resumable_graphs",
    "resume_command",
    "stop_marker",
    "thread_config",
    "trailing",
    "unwrap",
    "visible_graphs",
]

# The key under which a graph stopped at ``interrupt()`` reports its interrupts in its output.
INTERRUPT_KEY = "__interrupt__"
# What `Pregel.astream(stream_mode=...)` takes.
STREAM_MODES = frozenset({"values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"})

logger = logging.getLogger(__name__)

# What every LangGraph `Pregel` has (a StateGraph's or an @entrypoint's): its thread's state, its
# checkpointer (None when it keeps none) and its default stream mode.
_PREGEL = ("aget_state", "checkpointer", "stream_mode")

# Input schemas LangChain generates for the state of its own agents: not the author's declaration.
_GENERATED = "langchain.agents"


def unwrap(runnable: Runnable[Any, Any]) -> list[Runnable[Any, Any]]:
    """`runnable` and the runnables its bindings wrap (`.with_retry()`, `.bind()`,
    `.with_config()`, `.with_types()`), outermost first. A `.map()` is no binding: it takes a
    list of what it wraps, so it stops here."""
    chain = [runnable]
    while isinstance(chain[-1], RunnableBindingBase):
        chain.append(chain[-1].bound)
    return chain


def leading(runnable: Runnable[Any, Any], *, chains: bool = True) -> list[Runnable[Any, Any]]:
    """`runnable` and the runnables its input goes to as it is, outermost first: what its
    bindings wrap, a `.with_fallbacks()`'s primary and, with `chains`, a chain's first step."""
    found = [runnable]
    while True:
        last = found[-1]
        if isinstance(last, RunnableBindingBase):
            found.append(last.bound)
        elif isinstance(last, RunnableWithFallbacks):
            found.append(last.runnable)
        elif chains and isinstance(last, RunnableSequence):
            found.append(last.first)
        else:
            return found


def trailing(runnable: Runnable[Any, Any]) -> list[Runnable[Any, Any]]:
    """`runnable` and the runnables whose output is its own, outermost first: what its bindings
    wrap and a chain's last step. Not a `.with_fallbacks()`: any of its runnables may answer."""
    found = [runnable]
    while True:
        last = found[-1]
        if isinstance(last, RunnableBindingBase):
            found.append(last.bound)
        elif isinstance(last, RunnableSequence):
            found.append(last.last)
        else:
            return found


def thread_config(config: RunnableConfig, layers: list[Runnable[Any, Any]]) -> RunnableConfig:
    """`config` naming the thread, which a binding among `layers` (`.with_config(configurable=...)`)
    may hold instead: a graph's state is read from the graph itself, outside the bindings."""
    if thread_of(config) is not None:
        return config
    for layer in layers:
        bound = getattr(layer, "config", None)
        if isinstance(bound, Mapping) and thread_of(bound) is not None:
            return cast(RunnableConfig, {**config, "configurable": dict(bound["configurable"])})
    return config


def find_graph(runnable: Runnable[Any, Any]) -> Any | None:
    """The LangGraph graph `runnable` is, wraps or falls back from: its input and output are the
    graph's. None for any other runnable."""
    return _graph_in(leading(runnable, chains=False))


def leading_graph(runnable: Runnable[Any, Any]) -> Any | None:
    """The LangGraph graph that gets `runnable`'s input as it is (`find_graph`, or the graph a
    chain starts with, `graph | step`): its input, thread and interrupts are the graph's."""
    return _graph_in(leading(runnable))


def _graph_in(layers: list[Runnable[Any, Any]]) -> Any | None:
    return next((inner for inner in layers if is_graph(inner)), None)


def is_graph(runnable: Runnable[Any, Any]) -> bool:
    # A `.with_fallbacks()` hands unknown attributes on to its primary: it has them too.
    return not isinstance(runnable, RunnableWithFallbacks) and all(
        hasattr(runnable, name) for name in _PREGEL
    )


def visible_graphs(runnable: Runnable[Any, Any], *, bound: bool = False) -> Iterator[tuple[Any, bool]]:
    """Each LangGraph graph in `runnable` the adapter can see (itself, what its bindings wrap, the
    runnables of a `.with_fallbacks()`, a chain's steps; not one a function runs), with whether a
    binding around it (or the graph's own config) names its thread."""
    bound = bound or thread_of(getattr(runnable, "config", None)) is not None
    if is_graph(runnable):
        yield runnable, bound
        return
    if isinstance(runnable, RunnableBindingBase):
        inner: list[Runnable[Any, Any]] = [runnable.bound]
    elif isinstance(runnable, RunnableWithFallbacks):
        inner = list(runnable.runnables)
    else:
        inner = list(runnable.steps) if isinstance(runnable, RunnableSequence) else []
    for each in inner:
        yield from visible_graphs(each, bound=bound)


def checkpointed_graphs(runnable: Runnable[Any, Any]) -> Iterator[tuple[Any, bool]]:
    """Each graph with a checkpointer in `runnable` (`visible_graphs`), with whether its thread is
    bound: any of them fails without one."""
    return ((graph, bound) for graph, bound in visible_graphs(runnable) if checkpointed(graph))


def resumable_graphs(runnable: Runnable[Any, Any]) -> list[tuple[Any, Runnable[Any, Any]]]:
    """Each checkpointed graph whose interrupts a call of `runnable` can answer, with the runnable
    that takes the answer: `runnable` itself for the graph that gets its input, and for a graph
    that is a later step of its chain (`prep | graph | post`), the chain from that step on, which
    is what the rest of the run would have been had the graph not stopped."""
    found: list[tuple[Any, Runnable[Any, Any]]] = []
    first = leading_graph(runnable)
    if first is not None and checkpointed(first):
        found.append((first, runnable))
    layers = leading(runnable, chains=False)
    depth = next((at for at, layer in enumerate(layers) if isinstance(layer, RunnableSequence)), None)
    chain = layers[depth] if depth is not None else None
    steps = chain.steps if isinstance(chain, RunnableSequence) else []
    for at in range(1, len(steps)):
        graph = leading_graph(steps[at])
        if graph is not None and checkpointed(graph):
            rest = steps[at:]
            tail = rest[0] if len(rest) == 1 else RunnableSequence(*rest)
            found.append((graph, _rebound(tail, layers[:depth])))
    return found


def _rebound(tail: Runnable[Any, Any], outer: list[Runnable[Any, Any]]) -> Runnable[Any, Any]:
    """`tail` under the bindings `outer` has around the chain (a thread, callbacks, retries), so
    the resumed run is configured as the agent's own; a fallback around it is left out, as the
    answer is no input for another runnable."""
    for layer in reversed(outer):
        if isinstance(layer, RunnableBindingBase):
            tail = layer.model_copy(update={"bound": tail})
    return tail


def checkpointed(graph: Any) -> bool:
    """Whether the graph keeps its state per thread: it has a checkpointer of its own."""
    saver = getattr(graph, "checkpointer", None)
    return saver is not None and not isinstance(saver, bool)


def resume_command(value: Any) -> Any:
    """LangGraph's ``Command(resume=value)``: the input that continues a graph stopped at
    ``interrupt()`` with `value` as the interrupt's answer."""
    from langgraph.types import Command

    return Command(resume=value)


def invalid_resume(error: BaseException) -> bool:
    """Whether LangGraph refused a resume value that does not match its interrupt's
    ``response_schema``: it saved nothing, so the interrupt can be answered again."""
    try:
        from langgraph.errors import is_invalid_resume
    except ImportError:  # a LangGraph before response schemas never checks a resume value
        return False
    return is_invalid_resume(error)


def interrupts(output: Any) -> list[Any] | None:
    """The interrupts a graph's output reports when the run stopped for input, else None."""
    if isinstance(output, dict):
        found = output.get(INTERRUPT_KEY)
        if found:
            return list(found)
    return None


def check_stream_options(
    mode: str | list[str] | None, subgraphs: bool, graph: Any | None, agent_id: str
) -> None:
    """Refuses a stream mode LangGraph does not have, or a mode or ``subgraphs`` given to a
    runnable that is no graph (`graph` None), for unary calls too: a unary call returns the run's
    answer whatever the mode, but a misspelt mode is a mistake to say at once, not a setting to
    drop silently."""
    if subgraphs and graph is None:
        msg = f"subgraphs is for LangGraph graphs; agent {agent_id} is not one"
        raise InvalidMessageError(msg)
    if mode is None:
        return
    if graph is None:
        msg = f"stream_mode is for LangGraph graphs; agent {agent_id} is not one"
        raise InvalidMessageError(msg)
    modes = [mode] if isinstance(mode, str) else mode
    unknown = sorted(set(modes) - STREAM_MODES)
    if unknown or not modes:
        msg = f"stream_mode {unknown or modes} is not one of LangGraph's: {sorted(STREAM_MODES)}"
        raise InvalidMessageError(msg)


def stop_marker(chunk: Any) -> bool:
    """Whether a streamed chunk is LangGraph's own mark of a stop, ``{"__interrupt__": ...}``:
    the interrupts, or nothing at a static breakpoint. The stream's end says it instead."""
    return isinstance(chunk, dict) and INTERRUPT_KEY in chunk


async def last_moved_by(graph: Any, config: Any, task_id: str) -> bool:
    """Whether the graph's thread (in `config`) last moved in a run of the task `task_id`: a run
    that resumed it, then failed after the interrupt's step, in the graph or in a step after it.
    LangGraph keeps a run's metadata (the adapter's ``reach_task_id``) with each checkpoint."""
    snapshot = await state_of(graph, config)
    metadata = getattr(snapshot, "metadata", None) or {}
    return metadata.get("reach_task_id") == task_id


def graph_schemas(graph: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The input and output JSON Schemas of a graph as LangGraph treats them.

    LangGraph writes only the state keys a caller gives and returns only those that hold a
    value, so neither schema of a TypedDict state requires a key; except the keys of an input
    schema the graph's author declared (``StateGraph(State, input_schema=Input)``), which stay
    as declared. A key that LangGraph's ``add_messages`` reduces holds chat messages, however
    loosely its items are typed (the quickstart's ``Annotated[list, add_messages]``), and takes
    as input whatever ``add_messages`` reads: a list, one message, or a string.

    A graph without a state schema (an ``@entrypoint`` workflow) takes and gives what its
    function does, as any runnable (`_function_schemas`).
    """
    builder: Any = getattr(graph, "builder", None)
    if not hasattr(builder, "state_schema"):
        return _function_schemas(graph)
    state = builder.state_schema
    declared_input = builder.input_schema is not state and not _generated(builder.input_schema)
    inputs = _schema(graph.get_input_jsonschema, builder.input_schema, required=declared_input)
    outputs = _schema(graph.get_output_jsonschema, builder.output_schema, required=False)
    # Only a TypedDict state takes partial input and gives partial output: a pydantic model or a
    # dataclass state refuses a missing key as LangGraph builds it.
    if inputs is not None and not declared_input and _is_typed_dict(builder.input_schema):
        inputs.pop("required", None)
    if outputs is not None and _is_typed_dict(builder.output_schema):
        outputs.pop("required", None)
    outputs = _with_required(outputs, _always_given(builder))
    chat = message_keys_of(builder)
    return _with_messages(inputs, chat, chat_input), _with_messages(outputs, chat, _message_list)


def _function_schemas(graph: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The input and output JSON Schemas of a graph with no state: LangGraph hands an
    ``@entrypoint`` function the input as given (its first parameter) and returns what it returns,
    so both are as the function is typed, its TypedDicts' keys required as they say."""
    return (
        _schema(graph.get_input_jsonschema, graph.InputType, required=True),
        _schema(graph.get_output_jsonschema, graph.OutputType, required=True),
    )


def _always_given(builder: Any) -> frozenset[str]:
    """The state keys whose channel holds a value from the start (a reducer's over a list, such
    as ``add_messages``): LangGraph's output always has them, written to or not."""
    channels = getattr(builder, "channels", None)
    if not isinstance(channels, dict):
        return frozenset()
    return frozenset(name for name, channel in channels.items() if holds_value(channel))


def holds_value(channel: Any) -> bool:
    """Whether a LangGraph channel holds a value (one that cannot say is not counted on)."""
    try:
        return bool(channel.is_available())
    except Exception:  # noqa: BLE001 - a channel that cannot say is not counted on
        return False


def _with_required(schema: dict[str, Any] | None, keys: frozenset[str]) -> dict[str, Any] | None:
    """`schema` with those of `keys` that it has as properties required as well."""
    properties = schema.get("properties") if schema else None
    if schema is None or not isinstance(properties, dict) or not keys & properties.keys():
        return schema
    required = sorted({*schema.get("required", ()), *(keys & properties.keys())})
    return {**schema, "required": required}


def message_keys_of(builder: Any) -> frozenset[str]:
    """The state keys LangGraph's ``add_messages`` reduces: it makes a message of every item."""
    from langgraph.graph.message import add_messages

    channels = getattr(builder, "channels", None)
    if not isinstance(channels, dict):
        return frozenset()
    return frozenset(
        name for name, channel in channels.items() if getattr(channel, "operator", None) is add_messages
    )


def _with_messages(
    schema: dict[str, Any] | None, keys: frozenset[str], describe: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any] | None:
    """`schema` with `keys` described as chat messages by `describe` (given their title and
    description), whatever their annotation says (``list``, ``list[dict]``, ``Any``...):
    ``add_messages`` makes a message of every item, and the converter and the payload schema of
    a chat output take them so."""
    properties = schema.get("properties") if schema else None
    if schema is None or not keys or not isinstance(properties, dict):
        return schema
    typed = {
        name: describe(_said(field)) if name in keys and isinstance(field, dict) else field
        for name, field in properties.items()
    }
    return {**schema, "properties": typed}


def _said(field: dict[str, Any]) -> dict[str, Any]:
    """The title and description `field` has."""
    return {key: field[key] for key in ("title", "description") if key in field}


def _message_list(said: dict[str, Any]) -> dict[str, Any]:
    """A list of chat messages: what an output's ``add_messages`` key holds."""
    return {**said, "type": "array", "items": dict(MESSAGE_SCHEMA)}


def _is_typed_dict(schema: Any) -> bool:
    return typing.is_typeddict(schema) or typing_extensions.is_typeddict(schema)


def _generated(schema: Any) -> bool:
    return str(getattr(schema, "__module__", "")).startswith(_GENERATED)


def _schema(getter: Callable[[], dict[str, Any]], state: Any, *, required: bool) -> dict[str, Any] | None:
    try:
        return getter()
    except Exception:  # noqa: BLE001 - LangGraph cannot describe some states; build it here then
        # A `typing.TypedDict` state before Python 3.12: pydantic refuses the class, not its keys.
        return typed_dict_schema(state, required=required)
