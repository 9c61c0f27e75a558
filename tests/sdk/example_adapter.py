"""An adapter written against the adapter surface only: an HTTP service as an agent.

It is the example docs/adapters.md walks through, and test_layers checks it imports nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from reach_adapters.router import (
    Capability,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    error_result,
    ok_result,
    parse_agent_id,
    time_left,
    validate_capabilities,
)

# Tells the service how long the caller will wait, so it can give up when the caller does.
TIMEOUT_HEADER = "reach-timeout-ms"


class HTTPServiceAgent:
    """Capability ``name`` of the agent is ``POST /name`` on the client's base URL, the payload its
    JSON body and the JSON answer its result.

    Whose doing a failure is (DESIGN §6) decides what the router does with it: a 422 says the
    caller's payload was wrong (``invalid``: nothing is retried); another 4xx is the task's own
    error (``error``: the agent is healthy); a 5xx, a 429 or a broken connection raise, so the router
    counts them against the agent and may try another.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        agent_id: str,
        capabilities: Sequence[Capability | Mapping[str, Any]],
        timeout_s: float = 30.0,
    ) -> None:
        parse_agent_id(agent_id)
        self._client = client
        self._agent_id = agent_id
        self._capabilities = validate_capabilities(agent_id, capabilities)
        self._timeout_s = timeout_s

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    async def invoke(self, message: ReachMessage) -> ReachResult:
        name = message.meta_info.capability  # the router always says which capability it delivers
        budget_s = time_left(message, self._timeout_s)
        response = await self._client.post(
            f"/{name}",
            json=message.raw_payload,
            headers={TIMEOUT_HEADER: str(round(budget_s * 1000))},
            timeout=budget_s,
        )
        status = response.status_code
        if status == 422:
            return self._failed(message, ResultStatus.INVALID, "InvalidPayload", response, Fault.CALLER)
        if 400 <= status < 500 and status != 429:
            return self._failed(message, ResultStatus.ERROR, "TaskError", response, Fault.TASK)
        response.raise_for_status()
        return ok_result(message, self._agent_id, response.json())

    async def aclose(self) -> None:
        await self._client.aclose()

    def _failed(
        self, message: ReachMessage, status: ResultStatus, kind: str, response: httpx.Response, fault: Fault
    ) -> ReachResult:
        error = f"{self._agent_id} answered {response.status_code}: {response.text}"
        return error_result(message, status, kind, error, fault=fault, agent_id=self._agent_id)
