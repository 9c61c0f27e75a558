"""Real agents for the chain tests: LangChain runnables and a fake chat model, an MCP server in
this process that keeps a ledger of reservations (and undoes them), and plain functions that
`reach serve` can import from a config file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from middleware import ReachResult
from reach_adapters import Capability
from reach_adapters.gateway.overrides import PatchedAgent
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent

TEXT_IN = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOPIC_IN = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}


def extra(result: ReachResult) -> Any:
    """`result.extra`, untyped: the tests read into it by the keys they expect."""
    return result.extra


def drafter(agent_id: str = "write:draft:01") -> LangChainAgent:
    """A runnable that drafts a text on a topic."""

    async def draft(payload: dict[str, Any]) -> dict[str, Any]:
        return {"text": f"a draft on {payload['topic']}"}

    capability = Capability(name="write_draft", input_schema=TOPIC_IN)
    return LangChainAgent(RunnableLambda(draft), agent_id=agent_id, capabilities=[capability])


def reviewer(answers: list[str], agent_id: str = "ai:review:01") -> LangChainAgent:
    """A fake chat model answering `answers` in turn: a chat agent taking the text to review."""
    model = GenericFakeChatModel(messages=iter([AIMessage(answer) for answer in answers]))
    return LangChainAgent(model, agent_id=agent_id, capabilities=[Capability(name="review_text")])


class Reservation(BaseModel):
    reservation: str
    item: str


class Released(BaseModel):
    released: str


class Ledger:
    """An MCP server in this process holding reservations: ``reserve`` adds one, ``release``
    (its declared undo) takes it out again. `entries` is its state, for the tests to read."""

    def __init__(self, name: str = "ledger", *, fail_releases: int = 0) -> None:
        self.entries: dict[str, str] = {}
        self.released: list[str] = []
        self.release_calls = 0
        self._fail_releases = fail_releases
        self._next = 0
        self.name = name
        server = MCPServer(name)

        @server.tool()
        def reserve(item: str) -> Reservation:
            """Reserve one item; answers the reservation id."""
            self._next += 1
            rid = f"{name}-{self._next}"
            self.entries[rid] = item
            return Reservation(reservation=rid, item=item)

        @server.tool()
        def release(task_id: str, capability: str, input: dict[str, Any], output: dict[str, Any]) -> Released:
            """Undo a reservation: given the reserve call's task id, input and output."""
            self.release_calls += 1
            if self.release_calls <= self._fail_releases:
                msg = "ledger busy, try again"
                raise ConnectionError(msg)
            rid = output["reservation"]
            del self.entries[rid]
            self.released.append(rid)
            return Released(released=rid)

        self.server = server

    async def agent(self) -> PatchedAgent:
        """The server connected in this process, its ``reserve`` declaring ``release`` its undo."""
        connected = await MCPServerAgent.connect(self.name, server=self.server)
        return PatchedAgent(connected, {"reserve": {"compensate_with": "release"}})


# -- for config files (reach serve imports these) ----------------------------------------------


def _ledger_file() -> Path:
    return Path(os.environ["REACH_TEST_LEDGER"])


def _read() -> dict[str, int]:
    path = _ledger_file()
    return json.loads(path.read_text()) if path.exists() else {}


def charge(account: str, amount: int) -> dict[str, Any]:
    """Charge an account (kept in the file $REACH_TEST_LEDGER)."""
    ledger = _read()
    ledger[account] = ledger.get(account, 0) + amount
    _ledger_file().write_text(json.dumps(ledger))
    return {"account": account, "charged": amount}


def refund(task_id: str, capability: str, input: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    """Undo a charge."""
    ledger = _read()
    ledger[output["account"]] -= output["charged"]
    _ledger_file().write_text(json.dumps(ledger))
    return {"refunded": output["charged"]}


def ship(account: str) -> dict[str, Any]:
    """Ship to an account; the carrier refuses account 'nowhere'."""
    if account == "nowhere":
        msg = "no carrier serves 'nowhere'"
        raise ValueError(msg)
    return {"shipped_to": account}
