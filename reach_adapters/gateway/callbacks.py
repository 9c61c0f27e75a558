"""Callbacks of finished async tasks: POSTed to the task's ``callback_url``, signed, retried.

The body is the task as ``GET /api/tasks/{task_id}`` shows it; ``Reach-Signature`` signs it (see
`sign_callback`). Transport failures, 429 and 5xx answers are retried with exponential backoff up
to ``callbacks.max_attempts`` of security.yaml; any other answer ends the delivery. A callback
never changes the task: it has finished, and stays there to be polled.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping

import httpx
import orjson
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from reach_adapters.router.tasks import SIGNATURE_HEADER, TaskRecord, sign_callback
from reach_adapters.security.environ import MIN_HMAC_SECRET_BYTES
from reach_adapters.security.spec import CallbackSpec

__all__ = ["MAX_DELIVERIES", "CallbackSender", "callback_secret"]

logger = logging.getLogger(__name__)

MAX_DELIVERIES = 64


class _RetryableAnswerError(Exception):
    """The receiver answered 429 or 5xx: worth another try."""


def callback_secret(spec: CallbackSpec, environ: Mapping[str, str] = os.environ) -> bytes | str:
    """The signing secret, or what is wrong with it (a sentence saying how to fix it)."""
    secret = environ.get(spec.secret_env, "").encode()
    if len(secret) < MIN_HMAC_SECRET_BYTES:
        state = "is not set" if not secret else f"holds {len(secret)} bytes"
        return (
            f"callback_url needs a signing secret: environment variable {spec.secret_env} {state}; "
            f"set it to {MIN_HMAC_SECRET_BYTES} bytes or more (e.g. 'openssl rand -hex 32') before "
            "starting reach serve, or poll the task instead"
        )
    return secret


class CallbackSender:
    """The router's task notifier in a gateway: reads the settings in force at each delivery.

    At most `MAX_DELIVERIES` deliveries run at once (each with its connection); the others wait
    their turn, so many tasks finishing against a slow receiver cannot open sockets without end.
    """

    def __init__(self, settings: Callable[[], CallbackSpec]) -> None:
        self._settings = settings
        self._turns = asyncio.Semaphore(MAX_DELIVERIES)

    async def __call__(self, record: TaskRecord) -> None:
        if record.callback_url is None:
            return
        async with self._turns:
            await self._deliver(record, record.callback_url)

    async def _deliver(self, record: TaskRecord, url: str) -> None:
        spec = self._settings()
        secret = callback_secret(spec)
        if isinstance(secret, str):
            logger.error("callback of task %s not sent: %s", record.task_id, secret)
            return
        body = orjson.dumps(record.to_dict())
        retrying = AsyncRetrying(
            stop=stop_after_attempt(spec.max_attempts),
            wait=wait_exponential(multiplier=spec.backoff_s, max=60.0),
            retry=retry_if_exception_type((httpx.TransportError, _RetryableAnswerError)),
            reraise=True,
        )
        try:
            async with httpx.AsyncClient(timeout=spec.timeout_s) as client:
                async for attempt in retrying:
                    with attempt:
                        await _post(client, url, body, secret, record.task_id)
        except (httpx.TransportError, _RetryableAnswerError) as exc:
            logger.warning(
                "callback of task %s to %s failed %d times, giving up: %s",
                record.task_id,
                url,
                spec.max_attempts,
                exc,
            )


async def _post(client: httpx.AsyncClient, url: str, body: bytes, secret: bytes, task_id: str) -> None:
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign_callback(secret, body),
        "Reach-Task-Id": task_id,
    }
    response = await client.post(url, content=body, headers=headers)
    if response.status_code == 429 or response.status_code >= 500:
        msg = f"the receiver answered {response.status_code}"
        raise _RetryableAnswerError(msg)
    if not response.is_success:
        logger.warning("callback of task %s refused by %s: %d", task_id, url, response.status_code)
