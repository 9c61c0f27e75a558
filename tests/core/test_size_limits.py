"""Names, ids and option lists a caller sends are bounded, and each refusal names its limit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router.messages import MAX_NAME_LENGTH, MAX_OPTION_ITEMS

pytestmark = pytest.mark.timeout(30)

LONG = "c" * (MAX_NAME_LENGTH + 1)


def echo(payload: object) -> object:
    return payload


@pytest.fixture
async def router() -> AsyncIterator[Router]:
    async with Router() as router:
        router.register(FunctionAgent(echo, agent_id="util:echo:01", capabilities=[Capability(name="echo")]))
        yield router


async def test_long_names_are_refused_with_the_limit(router: Router) -> None:
    with pytest.raises(
        InvalidMessageError, match=rf"capability is {len(LONG)} characters long, over the limit of 256"
    ):
        await router.route(LONG, {})
    with pytest.raises(InvalidMessageError, match=r"agent_id is .* over the limit of 256"):
        await router.send(LONG, {})
    with pytest.raises(InvalidMessageError, match=r"namespace is .* over the limit of 256"):
        await router.route("echo", {}, namespace=LONG)
    with pytest.raises(InvalidMessageError, match=r"strategy is .* over the limit of 256"):
        await router.route("echo", {}, strategy=LONG)
    with pytest.raises(InvalidMessageError, match=r"capability is .* over the limit of 256"):
        await router.dispatch({"meta_info": {"capability": LONG}})
    assert (await router.route("c" * MAX_NAME_LENGTH, {})).status == "no_candidate"


async def test_long_task_ids_are_refused(router: Router) -> None:
    with pytest.raises(InvalidMessageError, match=r"task_id.*128"):
        await router.route("echo", {}, task_id="t" * 129)


async def test_option_counts_are_bounded(router: Router) -> None:
    many = MAX_OPTION_ITEMS + 1
    with pytest.raises(InvalidMessageError, match=f"attributes has {many} entries, over the limit of 256"):
        await router.route("echo", {}, attributes={str(i): i for i in range(many)})
    with pytest.raises(InvalidMessageError, match=f"fallback has {many} entries"):
        await router.route("echo", {}, fallback=[f"a:b:{i}" for i in range(many)])
    with pytest.raises(InvalidMessageError, match=f"tags has {many} entries"):
        await router.dispatch({"meta_info": {"capability": "echo", "tags": ["t"] * many}})
    fine = await router.route("echo", {"x": 1}, attributes={str(i): i for i in range(MAX_OPTION_ITEMS)})
    assert fine.ok
