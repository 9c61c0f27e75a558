"""Push notifications of A2A tasks: which receivers are allowed, and sending off the task's path.

A push config's URL is the caller's choice and the server POSTs to it, so an unchecked URL lets
any caller make the server reach 169.254.169.254, a Redis on 127.0.0.1 or a service on 10.x.
The SDK's `validate_push_notification_url` refuses every address that is not public (checked
when the config is set, and again before each send, as DNS may have changed); a deployment whose
receivers are on loopback or a private network opts in (`push_url_validator(private=True)`).

The SDK awaits each push inside the task's event path, so a slow receiver held the task (and a
blocking ``SendMessage``) for its every event. `BackgroundPushSender` hands each push to a
background task instead: in order per task, at most `max_running` at once (the gateway passes its
callbacks' bound), and at most `max_waiting` waiting; beyond that a push is dropped with a warning
(pushes are best effort in A2A; the task can always be polled).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from a2a.server.tasks import PushNotificationSender
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.utils.push_url_validator import validate_push_notification_url

__all__ = ["BackgroundPushSender", "push_url_validator"]

logger = logging.getLogger(__name__)

UrlCheck = Callable[[str], Awaitable[bool]]
_MAX_WAITING = 1024


def push_url_validator(*, private: bool) -> UrlCheck:
    """The SDK's check of public receivers; with `private`, any http(s) URL with a host."""
    return _http_url if private else validate_push_notification_url


async def _http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class BackgroundPushSender(PushNotificationSender):
    """`sender`'s pushes sent in the background, bounded (see the module)."""

    def __init__(
        self, sender: PushNotificationSender, *, max_running: int, max_waiting: int = _MAX_WAITING
    ) -> None:
        self._sender = sender
        self._turns = asyncio.Semaphore(max_running)
        self._max_waiting = max_waiting
        self._pending: set[asyncio.Task[None]] = set()
        # The last push of each task, which its next one waits for.
        self._last: dict[str, asyncio.Task[None]] = {}

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if len(self._pending) >= self._max_waiting:
            logger.warning(
                "push of task %s dropped: %d pushes are waiting for slow receivers",
                task_id,
                len(self._pending),
            )
            return
        # The SDK goes on changing the task it handed over; the push sends this state.
        snapshot = copy.deepcopy(event)
        sending = asyncio.get_running_loop().create_task(
            self._send(task_id, snapshot, self._last.get(task_id))
        )
        self._last[task_id] = sending
        self._pending.add(sending)
        sending.add_done_callback(self._pending.discard)

    async def _send(
        self, task_id: str, event: PushNotificationEvent, before: asyncio.Task[None] | None
    ) -> None:
        try:
            if before is not None:
                await asyncio.wait([before])
            async with self._turns:
                await self._sender.send_notification(task_id, event)
        except Exception:
            # Best effort, as the SDK's own sender: a failed push never touches the task.
            logger.exception("push of task %s failed", task_id)
        finally:
            if self._last.get(task_id) is asyncio.current_task():
                del self._last[task_id]

    async def aclose(self) -> None:
        """Stop the pushes still waiting or running."""
        for sending in list(self._pending):
            sending.cancel()
        if self._pending:
            await asyncio.wait(self._pending)
