"""`ChainAgent`: serves a declared chain as one capability, each step a reach through the router.

Steps are nested calls made inside the chain's own delivery, so each inherits its trace, a share
of its deadline, its depth and lineage (a step that reaches the chain again is a loop, refused),
and is selected, retried, failed over and recorded like any call. Steps that do not wait for each
other run at once. When a step fails, no further step starts, the running ones finish, and the
compensable steps that succeeded are undone, newest first (`saga`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.errors import InvalidDeclarationError, ReachError
from reach_adapters.router.agent import ok_result
from reach_adapters.router.capability import Capability
from reach_adapters.router.chains.journal import ChainRun, Done
from reach_adapters.router.chains.model import Chain, Step, dependencies
from reach_adapters.router.chains.saga import SagaHost, compensate, derived_id
from reach_adapters.router.chains.template import (
    Template,
    TemplateError,
    compile_template,
    render,
)
from reach_adapters.router.compensation import ABANDONED
from reach_adapters.router.outcomes import ErrorKind, error_result

__all__ = ["CHAIN_NAMESPACE", "ChainAgent", "ChainHost"]

CHAIN_NAMESPACE = "chain"
# Refusals of a step that are the chain's caller's doing: its principal may not, or not now.
_CALLERS_REFUSALS = frozenset({ErrorKind.PERMISSION_DENIED.value, ErrorKind.QUOTA_EXCEEDED.value})


class ChainHost(SagaHost, Protocol):
    """What a chain needs of the router besides calls: the journal of what can be undone."""

    def _compensable(self, task_id: str) -> Done | None: ...

    def _keep(self, entry: Done | ChainRun) -> None: ...


class _Planned:
    """A step with its input template compiled and what it waits for."""

    __slots__ = ("from_input_only", "step", "template", "waits")

    def __init__(self, step: Step) -> None:
        self.step = step
        self.template: Template = compile_template(step.input)
        self.waits = dependencies(step)
        # A step fed by the chain's input alone fails on a bad input by the caller's mistake.
        self.from_input_only = not self.waits


class ChainAgent:
    """Serves `chain` as the capability of its name, under agent id ``chain:<name>:0``.

    `Router.add_chain` builds and registers one; a gateway builds one per ``kind: chain`` file.
    """

    def __init__(self, chain: Chain, host: ChainHost | None = None) -> None:
        if not isinstance(chain, Chain):
            msg = f"add_chain() takes a Chain, got {type(chain).__name__}"
            raise InvalidDeclarationError(msg)
        self.chain = chain
        self._host = host
        self._agent_id = f"{CHAIN_NAMESPACE}:{chain.name}:0"
        self._capabilities = (
            Capability(
                name=chain.name,
                description=chain.description or _describe(chain),
                input_schema=chain.input_schema,
                output_schema=chain.output_schema,
                keywords=chain.keywords,
                examples=chain.examples,
                version=chain.version,
                timeout_ms=chain.timeout_ms,
                max_concurrency=chain.max_concurrency,
            ),
        )
        self._plan = [_Planned(step) for step in chain.steps]
        self._answer = chain.answer
        # Compensations still running after the chain's call was cancelled.
        self._background: set[asyncio.Task[dict[str, JsonValue]]] = set()

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    def bind(self, host: ChainHost) -> None:
        """Route the steps through `host` (a router); for chains built before their router."""
        self._host = host

    def __repr__(self) -> str:
        return f"ChainAgent({self.chain.name!r}, steps={[step.id for step in self.chain.steps]})"

    async def invoke(self, message: ReachMessage) -> ReachResult:
        host = self._host
        if host is None:
            msg = f"chain {self.chain.name!r} is not bound to a router; register it with router.add_chain()"
            raise ReachError(msg)
        meta = message.meta_info
        chain_input = message.raw_payload
        outputs: dict[str, Any] = {}
        steps: list[JsonValue] = []
        done: list[Done] = []
        failed: dict[str, JsonValue] | None = None
        failed_at: _Planned | None = None
        started: set[str] = set()
        running: dict[asyncio.Task[tuple[dict[str, JsonValue], Any]], _Planned] = {}
        try:
            while True:
                if failed is None:
                    for planned in self._plan:
                        if planned.step.id not in started and planned.waits <= outputs.keys():
                            started.add(planned.step.id)
                            call = self._step(host, planned, chain_input, outputs, meta.task_id)
                            running[asyncio.ensure_future(call)] = planned
                if not running:
                    break
                ready, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in ready:
                    planned = running.pop(task)
                    summary, output = task.result()
                    steps.append(summary)
                    if summary["status"] == ResultStatus.OK:
                        outputs[planned.step.id] = output
                        entry = host._compensable(str(summary["task_id"]))
                        if entry is not None:
                            done.append(entry)
                    elif failed is None:
                        failed, failed_at = summary, planned
            answer: Any = None
            if failed is None:
                try:
                    answer = render(self._answer, chain_input, outputs)
                except TemplateError as exc:
                    failed = {
                        "step": None,
                        "status": ResultStatus.ERROR,
                        "fault": Fault.TASK,
                        "error": f"output: {exc}",
                    }
        except asyncio.CancelledError as cancelled:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            if cancelled.args[:1] != (ABANDONED,):
                self._undo(host, done, message)
            host._keep(ChainRun(meta.task_id, self.chain.name, meta.principal, meta.trace_id, done))
            raise
        record: dict[str, JsonValue] = {"name": self.chain.name, "steps": steps}
        host._keep(ChainRun(meta.task_id, self.chain.name, meta.principal, meta.trace_id, done))
        if failed is None:
            return ok_result(message, self._agent_id, answer, extra={"chain": record})
        record["failed"] = failed
        report = await asyncio.shield(self._undo(host, done, message))
        return self._failure(message, failed, failed_at, {"chain": record, "compensation": report})

    def _undo(
        self, host: ChainHost, done: list[Done], message: ReachMessage
    ) -> asyncio.Task[dict[str, JsonValue]]:
        """Compensate `done` in a task of its own, in a context of its own: outside the chain's
        call, so neither its deadline nor its cancellation cuts the undoing short."""
        meta = message.meta_info
        work = compensate(host, done, meta.principal, meta.trace_id)
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _step(
        self, host: ChainHost, planned: _Planned, chain_input: Any, outputs: dict[str, Any], chain_task: str
    ) -> tuple[dict[str, JsonValue], Any]:
        step = planned.step
        task_id = derived_id(chain_task, step.id)
        summary: dict[str, JsonValue] = {"step": step.id, "capability": step.capability, "task_id": task_id}
        try:
            payload = render(planned.template, chain_input, outputs)
        except TemplateError as exc:
            caller = exc.root == "input"
            summary.update(
                status=(ResultStatus.INVALID if caller else ResultStatus.ERROR).value,
                fault=(Fault.CALLER if caller else Fault.TASK).value,
                error_type=ErrorKind.PAYLOAD_VALIDATION.value if caller else "ChainTemplateError",
                error=f"input of step {step.id!r}: {exc}",
                agent_id=None,
            )
            return summary, None
        result = await host.route(step.capability, payload, task_id=task_id, **step.options())
        summary.update(status=result.status.value, agent_id=result.agent_id)
        if result.status is not ResultStatus.OK:
            fault = None if result.fault is None else result.fault.value
            summary.update(fault=fault, error_type=result.error_type, error=result.error)
        return summary, result.payload

    def _failure(
        self,
        message: ReachMessage,
        failed: dict[str, JsonValue],
        planned: _Planned | None,
        extra: dict[str, JsonValue],
    ) -> ReachResult:
        status = ResultStatus(str(failed["status"]))
        fault = _blame(failed, planned)
        step = failed.get("step")
        where = (
            "its output"
            if step is None
            else f"step {step!r} ({failed.get('capability')}, task {failed.get('task_id')})"
        )
        whose = f"the {failed.get('fault')}'s fault" if failed.get("fault") else "no fault named"
        error = f"chain {self.chain.name!r}: {where} failed: {status}, {whose}: {failed.get('error')}"
        result = error_result(
            message,
            status if fault is Fault.CALLER else ResultStatus.ERROR,
            str(failed.get("error_type") or "ChainStepFailed"),
            error,
            fault=fault,
            agent_id=self._agent_id,
        )
        amend(result, {"extra": extra})
        return result


def _blame(failed: dict[str, JsonValue], planned: _Planned | None) -> Fault:
    """Whose fault the chain's failure is (DESIGN §6). The chain's caller's when the failing step
    was refused for the caller's principal, or given a bad input made from the caller's input
    alone; otherwise the chain's own (`task`): its agent did its work and the task could not be
    done, so the chain is neither retried nor counted against. The step's own fault, which moved
    the failing agent's breaker where it should, stays in ``extra["chain"]["failed"]``."""
    if failed.get("fault") != Fault.CALLER or planned is None:
        return Fault.TASK
    if failed.get("error_type") in _CALLERS_REFUSALS or failed.get("status") == ResultStatus.CANCELLED:
        return Fault.CALLER
    invalid = failed.get("status") == ResultStatus.INVALID
    return Fault.CALLER if invalid and planned.from_input_only else Fault.TASK


def _describe(chain: Chain) -> str:
    return f"Chain of {len(chain.steps)} steps: " + ", ".join(f"{s.id} ({s.capability})" for s in chain.steps)
