"""`ReachResult.raise_for_status()` raises the `ReachError` subclass a failed result stands for."""

from __future__ import annotations

import pytest

from middleware import ReachResult, ResultStatus
from reach_adapters import (
    AgentCallError,
    Capability,
    FunctionAgent,
    InputRequiredError,
    InvalidMessageError,
    LoopDetectedError,
    NoCandidateError,
    PayloadValidationError,
    ReachError,
    ReachTimeoutError,
    Router,
    raise_for_status,
)

CASES: list[tuple[ResultStatus, str | None, type[ReachError]]] = [
    (ResultStatus.ERROR, "ValueError", AgentCallError),
    (ResultStatus.PARTIAL, None, AgentCallError),
    (ResultStatus.TIMEOUT, "ReachTimeoutError", ReachTimeoutError),
    (ResultStatus.NO_CANDIDATE, "NoCandidateError", NoCandidateError),
    (ResultStatus.INVALID, "PayloadValidationError", PayloadValidationError),
    (ResultStatus.INVALID, "MCPRelayError", InvalidMessageError),
    (ResultStatus.REJECTED, "LoopDetectedError", LoopDetectedError),
    (ResultStatus.INPUT_REQUIRED, "InputRequired", InputRequiredError),
]


@pytest.mark.parametrize(("status", "error_type", "raised"), CASES)
def test_method_and_function_raise_the_same_error(
    status: ResultStatus, error_type: str | None, raised: type[ReachError]
) -> None:
    result = ReachResult(status=status, task_id="t-1", agent_id="a:b:c", error_type=error_type, error="boom")
    with pytest.raises(raised) as by_method:
        result.raise_for_status()
    with pytest.raises(raised) as by_function:
        raise_for_status(result)
    assert type(by_method.value) is type(by_function.value) is raised
    assert str(by_method.value) == str(by_function.value)
    assert str(by_method.value) == f"task t-1 ended {status} from agent a:b:c: {error_type}: boom"


async def test_an_ok_result_is_returned_for_chaining(router: Router) -> None:
    async def double(x: int) -> int:
        return 2 * x

    router.register(
        FunctionAgent(double, agent_id="math:double:01", capabilities=[Capability(name="double")])
    )
    assert (await router.route("double", {"x": 21})).raise_for_status().payload == 42
    with pytest.raises(InvalidMessageError, match="takes no argument 'y'"):
        (await router.route("double", {"y": 1})).raise_for_status()
    with pytest.raises(NoCandidateError):
        (await router.route("triple", {"x": 1})).raise_for_status()
