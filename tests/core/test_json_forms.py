"""Values JSON has no type for but pydantic serialises (datetime, UUID, Decimal, Enum...) travel
in pydantic's JSON form, the one the schemas pydantic derives describe: in a routed agent's
output, in a streamed chunk, in a caller's payload. Only a value with no JSON form at all fails."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import TypeAdapter
from typing_extensions import TypedDict

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router

pytestmark = pytest.mark.timeout(20)

OPENED = datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.UTC)


@dataclasses.dataclass
class Quote:
    price: decimal.Decimal
    valid_until: datetime.date


QUOTE = Quote(decimal.Decimal("9.90"), datetime.date(2024, 6, 1))


class Ticket(TypedDict):
    id: uuid.UUID
    opened_at: datetime.datetime


def declared(name: str, kind: Any) -> Capability:
    """A capability whose output schema is pydantic's for `kind` (``format: date``, ``uuid``)."""
    return Capability(name=name, output_schema=TypeAdapter(kind).json_schema())


async def test_a_function_agents_dataclass_and_dict_outputs_route_in_their_json_form(router: Router) -> None:
    async def quote(payload: Any) -> Quote:
        return QUOTE

    async def ticket(payload: Any) -> Ticket:
        return {"id": uuid.UUID(int=7), "opened_at": OPENED}

    router.register(FunctionAgent(quote, agent_id="shop:quote:01", capabilities=[declared("quote", Quote)]))
    router.register(
        FunctionAgent(ticket, agent_id="desk:ticket:01", capabilities=[declared("ticket", Ticket)])
    )

    quoted = await router.route("quote", {})
    opened = await router.route("ticket", {})

    # Ok: the output was checked against the declared schema, whose formats it meets.
    schema = router.catalog()[0].capabilities[0].output_schema or {}
    assert schema["properties"]["valid_until"]["format"] == "date"
    assert (quoted.status, quoted.payload) == (
        ResultStatus.OK,
        {"price": "9.90", "valid_until": "2024-06-01"},
    )
    assert (opened.status, opened.payload) == (
        ResultStatus.OK,
        {"id": "00000000-0000-0000-0000-000000000007", "opened_at": "2024-05-01T09:30:00Z"},
    )
    # The form pydantic gives it, as for a pydantic model's fields.
    assert quoted.payload == TypeAdapter(Quote).dump_python(QUOTE, mode="json")


async def test_a_callers_payload_and_a_streamed_chunk_take_the_same_form(router: Router) -> None:
    seen: list[Any] = []

    async def keep(payload: Any) -> Any:
        seen.append(payload)
        return "kept"

    class Ticks(FunctionAgent):
        async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
            yield {"at": OPENED}

    router.register(FunctionAgent(keep, agent_id="util:keep:01", capabilities=[Capability(name="keep")]))
    router.register(Ticks(keep, agent_id="util:ticks:01", capabilities=[Capability(name="ticks")]))

    assert (await router.route("keep", {"at": OPENED, "price": decimal.Decimal("1.5")})).ok
    assert seen == [{"at": "2024-05-01T09:30:00Z", "price": "1.5"}]
    assert [chunk async for chunk in router.stream("ticks", {})] == [{"at": "2024-05-01T09:30:00Z"}]


async def test_an_output_with_no_json_form_in_a_dataclass_is_named_by_its_field(router: Router) -> None:
    @dataclasses.dataclass
    class Leaky:
        price: decimal.Decimal
        handle: object

    async def leaky(payload: Any) -> Leaky:
        return Leaky(decimal.Decimal(1), object())

    router.register(FunctionAgent(leaky, agent_id="x:leak:01", capabilities=[Capability(name="leak")]))
    result = await router.route("leak", {})
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.ERROR,
        Fault.AGENT,
        "NotJsonSafeError",
    )
    assert "output.handle is a builtins.object, which has no JSON form" in (result.error or "")
