"""The intermediate format: models, ids, JSON safety and the exported schema."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import pathlib
import threading
import uuid
from enum import Enum, IntEnum
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from middleware import (
    MetaInfo,
    NotJsonSafeError,
    ReachMessage,
    ReachResult,
    ResultStatus,
    RoutingHint,
    ensure_json,
    new_task_id,
)
from middleware.schema import SCHEMA_PATH, render_schema


def test_task_ids_are_unique_and_time_ordered() -> None:
    ids = [new_task_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    # The first 48 bits are milliseconds: ids from later milliseconds sort later.
    stamps = [int(i.replace("-", "")[:12], 16) for i in ids]
    assert stamps == sorted(stamps)
    assert all(i[14] == "7" for i in ids)  # UUIDv7 version nibble


def test_meta_info_defaults_and_bounds() -> None:
    meta = MetaInfo()
    assert meta.task_id
    assert len(meta.trace_id) == 32
    assert meta.depth == 0
    assert meta.lineage == []
    with pytest.raises(ValidationError, match="priority"):
        MetaInfo(priority=10)
    with pytest.raises(ValidationError, match="timeout_ms"):
        MetaInfo(timeout_ms=0)
    with pytest.raises(ValidationError, match="colour"):
        MetaInfo.model_validate({"colour": "red"})


def test_directed_hint_needs_target() -> None:
    with pytest.raises(ValidationError, match=r"routing_hint\.target"):
        RoutingHint(mode="directed")
    assert RoutingHint(mode="directed", target="a:b:c").target == "a:b:c"


def test_message_round_trips_through_json() -> None:
    message = ReachMessage(
        raw_payload={"text": "hi", "n": [1, 2.5, None, True]},
        meta_info=MetaInfo(capability="echo", attributes={"user_intent": "refund"}),
        routing_hint=RoutingHint(mode="broadcast", merge="first_success"),
    )
    again = ReachMessage.model_validate_json(message.model_dump_json())
    assert again == message


def test_options_a_call_did_not_ask_for_are_not_written() -> None:
    """A node of an earlier version forbids fields it does not know: `subgraphs` is written only
    when asked for (and `resume` only when set), so it reads every other message."""
    written = MetaInfo(capability="c").model_dump(mode="json")
    assert "subgraphs" not in written
    assert "resume" not in written
    asked = MetaInfo(capability="c", subgraphs=True)
    assert MetaInfo.model_validate_json(asked.model_dump_json()).subgraphs is True


def test_message_rejects_non_json_payload() -> None:
    with pytest.raises(ValidationError):
        ReachMessage(raw_payload={"when": object()})


def test_result_ok_property() -> None:
    assert ReachResult(status=ResultStatus.OK, task_id="t").ok
    assert not ReachResult(status="timeout", task_id="t").ok


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Model(BaseModel):
    name: str
    points: list[int]


@dataclasses.dataclass
class Box:
    item: object


class Opaque:
    pass


class Wrapped(BaseModel, arbitrary_types_allowed=True):
    item: Opaque


class Colour(Enum):
    RED = "red"


@dataclasses.dataclass
class Quote:
    price: decimal.Decimal
    valid_until: datetime.date
    lock: Any = dataclasses.field(default_factory=threading.Lock)


class QuoteModel(BaseModel):
    price: decimal.Decimal
    valid_until: datetime.date


WHEN = datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.UTC)
# Values JSON has no type for, but pydantic serialises, with that JSON form.
PYDANTIC_FORMS = {
    "at": (WHEN, "2024-05-01T09:30:00Z"),
    "day": (WHEN.date(), "2024-05-01"),
    "id": (uuid.UUID(int=7), "00000000-0000-0000-0000-000000000007"),
    "price": (decimal.Decimal("9.90"), "9.90"),
    "colour": (Colour.RED, "red"),
    "raw": (b"abc", "abc"),
    "path": (pathlib.Path("/tmp/x"), "/tmp/x"),
    "took": (datetime.timedelta(hours=1), "PT1H"),
}


def test_ensure_json_converts_known_types() -> None:
    value = {"p": Point(1, 2), "m": Model(name="a", points=[1]), "t": (1, 2), "f": 1.5}
    assert ensure_json(value) == {
        "p": {"x": 1, "y": 2},
        "m": {"name": "a", "points": [1]},
        "t": [1, 2],
        "f": 1.5,
    }


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"a": {1: "x"}}, "payload.a has a key of type int"),
        ({"a": [object()]}, "payload.a[0] is a builtins.object"),
        (float("nan"), "NaN"),
        ({"s": {1, 2}, "b": b"\xff"}, "payload.b is a builtins.bytes that is not UTF-8 text"),
        ({"p": Box(object())}, "payload.p.item is a builtins.object, which has no JSON form"),
        ({"g": (n for n in range(3))}, "payload.g is a builtins.generator, an iterator"),
        ({"w": Wrapped(item=Opaque())}, "payload.w is a tests.core.test_format.Wrapped holding a value"),
    ],
)
def test_ensure_json_names_the_offending_place(value: object, fragment: str) -> None:
    with pytest.raises(NotJsonSafeError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        ensure_json(value)


def test_ensure_json_gives_values_pydantic_serialises_their_json_form() -> None:
    """A datetime, UUID, Decimal... in a dict or a dataclass takes the form it has in a pydantic
    model's JSON dump, which the schemas pydantic derives describe (``format: date-time``)."""
    values = {key: value for key, (value, _) in PYDANTIC_FORMS.items()}
    forms = {key: form for key, (_, form) in PYDANTIC_FORMS.items()}

    assert ensure_json(values) == forms
    assert ensure_json([values["at"], (values["id"],)]) == [forms["at"], [forms["id"]]]
    assert ensure_json(QuoteModel(price=decimal.Decimal("9.90"), valid_until=WHEN.date())) == {
        "price": "9.90",
        "valid_until": "2024-05-01",
    }
    # asdict() would have copied the lock, and failed.
    assert ensure_json(Quote(decimal.Decimal("9.90"), WHEN.date(), lock="ok")) == {
        "price": "9.90",
        "valid_until": "2024-05-01",
        "lock": "ok",
    }
    with pytest.raises(NotJsonSafeError, match=r"payload\.lock is a _thread\.lock, which has no JSON form"):
        ensure_json(Quote(decimal.Decimal("9.90"), WHEN.date()))


def test_checked_in_schema_matches_models() -> None:
    """Fails when the models change without `python -m middleware.schema` being run."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema()
    schema = json.loads(render_schema())
    assert {"ReachMessage", "ReachResult", "MetaInfo", "RoutingHint"} <= set(schema["$defs"])


def test_ensure_json_turns_subclasses_into_plain_types() -> None:
    class Text(str):
        pass

    class Level(IntEnum):
        HIGH = 3

    value = ensure_json({"t": Text("hi"), "n": Level.HIGH, "b": True, "f": 2.5})
    assert value == {"t": "hi", "n": 3, "b": True, "f": 2.5}
    assert isinstance(value, dict)
    assert [type(v) for v in value.values()] == [str, int, bool, float]
