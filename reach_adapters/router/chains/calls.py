"""The chains half of `Router`'s API: declare a chain as a capability, undo finished work."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import JsonValue

from middleware import ReachMessage, ReachResult
from reach_adapters.router.agent import Agent
from reach_adapters.router.chains.agent import CHAIN_NAMESPACE, ChainAgent
from reach_adapters.router.chains.journal import ChainRun, Done, Journal
from reach_adapters.router.chains.model import Chain
from reach_adapters.router.chains.saga import compensate
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.dispatcher import Dispatcher
from reach_adapters.router.planning import slot_for
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.portal import Portal
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import UNUSABLE_STATES, Slot

__all__ = ["ChainCalls"]

logger = logging.getLogger(__name__)

_CHAIN_PREFIX = f"{CHAIN_NAMESPACE}:"


class ChainCalls:
    """Mixed into `Router`, which holds what these methods use (its registry, dispatcher, portal
    and rules on who sees which tasks); `_init_chains` wires them in."""

    _registry: Registry
    _dispatcher: Dispatcher
    _portal: Portal
    _check_open: Callable[[], None]
    owner_scope: Callable[[str | None], str | None]
    policy: RoutingPolicy
    register: Callable[[Agent], None]
    deregister: Callable[..., Coroutine[Any, Any, None]]
    _journal: Journal

    _chain_records: _ChainRecords | None

    def _init_chains(self) -> None:
        self._journal = Journal()
        self._dispatcher.on_compensable = self._journal_reach
        # Watching every reach for chains' is left to the first chain that runs (`_chains_run`).
        self._chain_records = None

    def add_chain(self, chain: Chain) -> str:
        """Declare `chain` as a capability of its name, served by agent ``chain:<name>:0``: it is
        routable, listed in the catalog, and offered as an MCP tool, a LangChain tool and an A2A
        skill like any other. Returns the agent id (`deregister` it to remove the chain)."""
        self._check_open()
        agent = ChainAgent(chain, self)  # type: ignore[arg-type]
        self.register(agent)
        return agent.agent_id

    def chains(self) -> dict[str, Chain]:
        """The chains registered, by name."""
        return {
            runtime.agent.chain.name: runtime.agent.chain
            for runtime in self._registry
            if isinstance(runtime.agent, ChainAgent)
        }

    async def compensate(self, task_id: str, *, principal: str | None = None) -> dict[str, JsonValue]:
        """Undo a finished task: a succeeded reach of a capability that declares
        ``compensate_with``, or a finished chain (its compensable steps, newest first).

        Answers what was undone, what could not be (with errors) and what had been undone already:
        compensating a second time does nothing and says so (``already_compensated``); what failed
        to be undone is tried again. `UnknownTaskError` when the task is not kept (see
        ``RoutingPolicy.compensation_journal_size``) or, for a `principal`, not its own.
        """
        self._check_open()
        size = self.policy.compensation_journal_size
        entry = self._journal.find(task_id, self.owner_scope(principal), size)
        done = entry.steps if isinstance(entry, ChainRun) else [entry]
        report = await compensate(self, done, entry.principal, entry.trace_id)  # type: ignore[arg-type]
        report = {"task_id": task_id, **report}
        try:
            record = self._dispatcher.decisions.get(task_id)
        except Exception:  # noqa: BLE001 - the record may have left the log; the report stands
            logger.debug("no decision record left for compensated task %s", task_id)
        else:
            record.compensations = [*record.compensations, *_outcomes(report)]
        return report

    def compensate_sync(self, task_id: str, *, principal: str | None = None) -> dict[str, JsonValue]:
        return self._portal.call(self.compensate(task_id, principal=principal), method="compensate_sync")

    # -- for chains and compensation ---------------------------------------------------------

    def _serves(self, agent_id: str, capability: str) -> bool:
        """Whether agent `agent_id` is registered, usable and declares `capability`."""
        runtime = self._registry.get(agent_id)
        if runtime is None or runtime.state in UNUSABLE_STATES:
            return False
        # As `send(agent_id, capability=...)` finds it, so the check and the send agree.
        return slot_for(runtime.slots, capability) is not None

    def _safe_to_repeat(self, agent_id: str | None, capability: str) -> bool:
        """Whether agent `agent_id` declares `capability` safe to repeat (idempotent or read-only)."""
        runtime = None if agent_id is None else self._registry.get(agent_id)
        slot = None if runtime is None else slot_for(runtime.slots, capability)
        return slot is not None and slot.capability.safe_to_repeat

    def _compensable(self, task_id: str) -> list[Done]:
        """What undoing task `task_id` would undo, in the order it was done: the reach itself, or
        a chain's compensable steps (a chain run as a step of another is undone with it)."""
        entry = self._journal.get(task_id)
        if entry is None:
            return []
        return entry.steps if isinstance(entry, ChainRun) else [entry]

    def _chains_run(self) -> None:
        """A chain is about to run: from now on, link chains' decision records to their steps'.
        Routers that run no chain pay nothing for it on their reaches."""
        if self._chain_records is None:
            self._chain_records = _ChainRecords()
            self._dispatcher.observers.append(self._chain_records)

    def _keep(self, entry: Done | ChainRun) -> None:
        self._journal.keep(entry, self.policy.compensation_journal_size)

    def _journal_reach(self, message: ReachMessage, slot: Slot, result: ReachResult) -> None:
        """Keep a succeeded reach of a capability that names its undo, for `compensate`."""
        meta = message.meta_info
        compensate_with = slot.capability.compensate_with
        assert compensate_with is not None, "the dispatcher calls this for such capabilities only"
        self._keep(
            Done(
                meta.task_id,
                meta.capability or slot.capability.name,
                compensate_with,
                slot.runtime.agent_id,
                meta.principal,
                meta.trace_id,
                message.raw_payload,
                result.payload,
            )
        )


class _ChainRecords:
    """Links a chain's decision record to its steps' records, and notes what was undone."""

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None:
        # Most reaches carry no extra at all: one test, and they are out.
        if not result.extra:
            return
        agent_id = result.agent_id
        if agent_id is None or not agent_id.startswith(_CHAIN_PREFIX):
            return
        chain = result.extra.get("chain")
        steps = chain.get("steps") if isinstance(chain, dict) else None
        if not isinstance(steps, list):
            return
        record.steps = [str(step["task_id"]) for step in steps if isinstance(step, dict)]
        report = result.extra.get("compensation")
        if isinstance(report, dict):
            record.compensations = _outcomes(report)


def _outcomes(report: dict[str, JsonValue]) -> list[dict[str, Any]]:
    """The undos a compensation report says were made, done or failed."""
    made = [report.get("undone"), report.get("not_undone")]
    return [item for items in made if isinstance(items, list) for item in items if isinstance(item, dict)]
