"""The SDK's request handler, with what a message must pass before the SDK queues it.

The SDK queues every message for a task behind the one running and runs it when that ends, on
whatever state the task is in then: a second message on a working task ran as a new reach after
the first and overwrote its end state, and two answers to one input-required task both resumed
it. Here a message naming a task is refused (an A2A error, before any event) unless the task is
input-required and no other answer to it is being handled, here or on another node (`Claims`).

It answers ``GetExtendedAgentCard`` with the caller's own card (`extended_card`).

It also takes the caller's hop token (``agent-reach/caller_token``) out of the message before the
SDK stores the message in the task's history: a credential is not kept at rest. The executor finds
it in the call's state.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from a2a.server.cluster.task_store import VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetExtendedAgentCardRequest,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError

from reach_adapters.a2a.executor import CALLER_TOKEN, busy_task
from reach_adapters.a2a.parts import data_value

__all__ = ["Claims", "ReachRequestHandler"]

logger = logging.getLogger(__name__)


class Claims(Protocol):
    """Who is answering which input-required task: one answer at a time."""

    async def claim(self, task_id: str) -> bool:
        """Take the task's claim; False when another answer holds it."""

    async def release(self, task_id: str) -> None:
        """Give the claim back."""


class ReachRequestHandler(DefaultRequestHandler):
    """`DefaultRequestHandler` refusing messages a task cannot take (see the module)."""

    def __init__(
        self, *, claims: Claims, extended_card: Callable[[ServerCallContext], AgentCard], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._claims = claims
        self._extended_card = extended_card

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        return self._extended_card(context)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        async with self._admitted(params, context):
            answer: Message | Task = await super().on_message_send(params, context)
            return answer

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        async with self._admitted(params, context):
            async for event in super().on_message_send_stream(params, context):
                yield event

    @asynccontextmanager
    async def _admitted(self, params: SendMessageRequest, context: ServerCallContext) -> AsyncIterator[None]:
        _take_token(params.message, context)
        task_id = params.message.task_id
        if not task_id:
            yield
            return
        if not await self._claims.claim(task_id):
            msg = f"task {task_id} is taking another answer already: only one answer resumes it"
            raise UnsupportedOperationError(message=msg)
        try:
            task = await _stored(self.task_store, task_id, context)
            # A task not found is the SDK's to answer (TaskNotFoundError), as it is for any call.
            if task is not None and task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                raise UnsupportedOperationError(message=busy_task(task))
            yield
        finally:
            await self._claims.release(task_id)


async def _stored(
    store: TaskStore | VersionedTaskStore, task_id: str, context: ServerCallContext
) -> Task | None:
    if isinstance(store, TaskStore):
        return await store.get(task_id, context)
    stored = await store.get(task_id, context)
    return None if stored is None else stored.task


def _take_token(message: Message, context: ServerCallContext) -> None:
    if CALLER_TOKEN in message.metadata.fields:
        context.state[CALLER_TOKEN] = data_value(message.metadata.fields[CALLER_TOKEN])
        del message.metadata.fields[CALLER_TOKEN]
