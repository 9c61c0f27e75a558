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
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.errors import InvalidDeclarationError, ReachError
from reach_adapters.router.agent import ok_result
from reach_adapters.router.capability import Capability
from reach_adapters.router.chains.journal import ChainRun, Done
from reach_adapters.router.chains.model import Chain, Step, dependencies
from reach_adapters.router.chains.saga import SagaHost, compensate, new_report, undo_summary
from reach_adapters.router.chains.template import (
    Template,
    TemplateError,
    compile_template,
    from_input_alone,
    references,
    render,
)
from reach_adapters.router.compensation import abandoned
from reach_adapters.router.messages import derived_task_id
from reach_adapters.router.outcomes import ErrorKind, error_result

__all__ = ["CHAIN_NAMESPACE", "ChainAgent", "ChainHost"]

CHAIN_NAMESPACE = "chain"
# Refusals of a step that are the chain's caller's doing: its principal may not, or not now.
_CALLERS_REFUSALS = frozenset({ErrorKind.PERMISSION_DENIED.value, ErrorKind.QUOTA_EXCEEDED.value})
# A chain answers a little before its deadline, so that the caller hears the chain's own account
# (which step was late, what was undone) rather than the router's timeout of the chain agent,
# which would count against a chain that did its work. Its steps get the deadline less the
# margin; the undoing of what they did is waited for until half of it is left.
_MARGIN_SHARE = 0.1
_MARGIN_MIN_S = 0.01
_MARGIN_MAX_S = 1.0
# How close to the steps' deadline a step's timeout must end to say the chain ran out of time.
_LATE_S = 0.005


class ChainHost(SagaHost, Protocol):
    """What a chain needs of the router besides calls: the journal of what can be undone."""

    def _compensable(self, task_id: str) -> list[Done]: ...

    def _keep(self, entry: Done | ChainRun) -> None: ...

    def _chains_run(self) -> None: ...


class _Ran(NamedTuple):
    """One step's end: its summary, its output, and whether its failure is the chain's caller's."""

    summary: dict[str, JsonValue]
    output: Any
    callers: bool = False


class _Planned:
    """A step with its input template compiled and what it waits for."""

    __slots__ = ("from_input_alone", "step", "template", "waits")

    def __init__(self, step: Step) -> None:
        self.step = step
        self.template: Template = compile_template(step.input)
        self.waits = dependencies(step, references(self.template))
        # Only a step whose input is the caller's, every value of it, fails its schema by the
        # caller's mistake; a literal the chain's author wrote, or a step's output, may be to blame.
        self.from_input_alone = from_input_alone(self.template)


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
        # A schema the chain left to its default is left so here too (`Capability.object_only`).
        given = {"input_schema": chain.input_schema} if "input_schema" in chain.model_fields_set else {}
        self._capabilities = (
            Capability(
                name=chain.name,
                description=chain.description or _describe(chain),
                **given,
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
        host._chains_run()
        meta = message.meta_info
        chain_input = message.raw_payload
        ends, steps_end = self._deadlines(message)
        outputs: dict[str, Any] = {}
        steps: list[JsonValue] = []
        done: list[Done] = []
        # Kept in the journal however the chain ends: `done` fills in as steps succeed.
        run = ChainRun(meta.task_id, self.chain.name, meta.principal, meta.trace_id, done)
        failed: dict[str, JsonValue] | None = None
        failed_at: _Ran | None = None
        started: set[str] = set()
        running: dict[asyncio.Task[_Ran], _Planned] = {}
        try:
            while True:
                if failed is None:
                    for planned in self._plan:
                        if planned.step.id not in started and planned.waits <= outputs.keys():
                            started.add(planned.step.id)
                            call = self._step(host, planned, chain_input, outputs, meta.task_id, steps_end)
                            running[asyncio.ensure_future(call)] = planned
                if not running:
                    break
                ready, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in ready:
                    planned = running.pop(task)
                    ran = task.result()
                    summary = ran.summary
                    steps.append(summary)
                    if summary["status"] == ResultStatus.OK:
                        outputs[planned.step.id] = ran.output
                        done.extend(host._compensable(str(summary["task_id"])))
                    elif failed is None:
                        failed, failed_at = summary, ran
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
            if not abandoned(cancelled):
                self._undo(host, done, message, new_report())
            host._keep(run)
            raise
        record: dict[str, JsonValue] = {"name": self.chain.name, "steps": steps}
        host._keep(run)
        if failed is None:
            return ok_result(message, self._agent_id, answer, extra={"chain": record})
        record["failed"] = failed
        late = failed["status"] == ResultStatus.TIMEOUT and time.time() >= steps_end - _LATE_S
        report = new_report()
        undoing = self._undo(host, done, message, report)
        # The undo goes on past the chain's answer if it must; the answer says how far it got.
        await asyncio.wait({undoing}, timeout=max(ends - time.time(), 0.0))
        report = _snapshot(report)
        callers = failed_at is not None and failed_at.callers
        failure = self._failure(message, failed, callers, late, {"chain": record, "compensation": report})
        # Said in the error too: a caller reading only the message (a CLI, an MCP client) must
        # learn what was left done.
        amend(failure, {"error": f"{failure.error}; {undo_summary(report)}"})
        return failure

    def _deadlines(self, message: ReachMessage) -> tuple[float, float]:
        """When the chain answers at the latest, and the deadline its steps get: a margin before
        its own (the chain's ``timeout_ms`` or the caller's deadline, whichever is sooner)."""
        now = time.time()
        budget = self.chain.timeout_ms / 1000.0
        deadline = message.meta_info.deadline
        if deadline is not None:
            budget = max(min(budget, deadline - now), 0.0)
        margin = min(max(budget * _MARGIN_SHARE, _MARGIN_MIN_S), _MARGIN_MAX_S, budget / 2)
        return now + budget - margin / 2, now + budget - margin

    def _undo(
        self, host: ChainHost, done: list[Done], message: ReachMessage, report: dict[str, JsonValue]
    ) -> asyncio.Task[dict[str, JsonValue]]:
        """Compensate `done` in a task of its own, in a context of its own: outside the chain's
        call, so neither its deadline nor its cancellation cuts the undoing short. `report` is
        filled in as it goes."""
        meta = message.meta_info
        work = compensate(host, done, meta.principal, meta.trace_id, report)
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _step(
        self,
        host: ChainHost,
        planned: _Planned,
        chain_input: Any,
        outputs: dict[str, Any],
        chain_task: str,
        steps_end: float,
    ) -> _Ran:
        step = planned.step
        task_id = derived_task_id(chain_task, step.id)
        summary: dict[str, JsonValue] = {"step": step.id, "capability": step.capability, "task_id": task_id}
        try:
            payload = render(planned.template, chain_input, outputs)
        except TemplateError as exc:
            # A key missing from the caller's input is the caller's; from a step's output, the chain's.
            caller = exc.root == "input"
            summary.update(
                status=(ResultStatus.INVALID if caller else ResultStatus.ERROR).value,
                fault=(Fault.CALLER if caller else Fault.TASK).value,
                error_type=ErrorKind.PAYLOAD_VALIDATION.value if caller else "ChainTemplateError",
                error=f"input of step {step.id!r}: {exc}",
                agent_id=None,
            )
            return _Ran(summary, None, caller)
        options = step.options()
        deadline = steps_end
        if step.timeout_ms is not None:
            deadline = min(deadline, time.time() + step.timeout_ms / 1000.0)
        result = await host.route(step.capability, payload, task_id=task_id, deadline=deadline, **options)
        summary.update(status=result.status.value, agent_id=result.agent_id)
        if result.status is ResultStatus.OK:
            return _Ran(summary, result.payload)
        summary.update(
            fault=None if result.fault is None else result.fault.value,
            error_type=result.error_type,
            error=result.error,
        )
        return _Ran(summary, result.payload, _callers(result, planned))

    def _failure(
        self,
        message: ReachMessage,
        failed: dict[str, JsonValue],
        callers: bool,
        late: bool,
        extra: dict[str, JsonValue],
    ) -> ReachResult:
        """The chain's failure, whose fault it is by DESIGN §6: the chain's caller's when the
        failing step was refused for the caller's principal, or given a bad input made from the
        caller's input alone; otherwise the chain's own (`task`), also when it ran out of time:
        its agent did its work and the task could not be done, so the chain is neither retried
        nor counted against. The step's own fault, which moved the failing agent's breaker where
        it should, stays in ``extra["chain"]["failed"]``."""
        step = failed.get("step")
        where = (
            "its output"
            if step is None
            else f"step {step!r} ({failed.get('capability')}, task {failed.get('task_id')})"
        )
        whose = f"the {failed.get('fault')}'s fault" if failed.get("fault") else "no fault named"
        error = (
            f"chain {self.chain.name!r}: {where} failed: {failed['status']}, {whose}: {failed.get('error')}"
        )
        if callers:
            status = ResultStatus(str(failed["status"]))
        elif late:
            status = ResultStatus.TIMEOUT
            error = f"chain {self.chain.name!r} ran out of time: {where} was late: {failed.get('error')}"
        else:
            status = ResultStatus.ERROR
        result = error_result(
            message,
            status,
            str(failed.get("error_type") or "ChainStepFailed"),
            error,
            fault=Fault.CALLER if callers else Fault.TASK,
            agent_id=self._agent_id,
        )
        amend(result, {"extra": extra})
        return result


def _callers(result: ReachResult, planned: _Planned) -> bool:
    """Whether a step's failure is the chain's caller's doing: the step was refused for the
    caller's principal (or cancelled for it), or its input, made wholly from the caller's, broke
    the step's schema. A caller's mistake of any other kind was made by the chain's author."""
    if result.fault is not Fault.CALLER:
        return False
    if result.error_type in _CALLERS_REFUSALS or result.status is ResultStatus.CANCELLED:
        return True
    invalid = result.status is ResultStatus.INVALID and result.error_type == ErrorKind.PAYLOAD_VALIDATION
    return invalid and planned.from_input_alone


def _snapshot(report: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """`report` as it is now: the undo it comes from may go on changing it."""
    return {key: list(value) if isinstance(value, list) else value for key, value in report.items()}


def _describe(chain: Chain) -> str:
    return f"Chain of {len(chain.steps)} steps: " + ", ".join(f"{s.id} ({s.capability})" for s in chain.steps)
