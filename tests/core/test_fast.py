"""`middleware.fast`: models the router builds itself, equal to validated ones, built for less."""

from __future__ import annotations

from middleware import Fault, MetaInfo, ReachResult, ResultStatus, Timings
from middleware.fast import ZERO_TIMINGS, amend, build_trusted


def test_a_trusted_build_equals_the_validated_model() -> None:
    values = {"status": ResultStatus.ERROR, "task_id": "t1", "error": "boom", "fault": Fault.AGENT}
    built = build_trusted(ReachResult, values)
    validated = ReachResult(**values)
    assert built == validated
    assert built.model_dump(mode="json") == validated.model_dump(mode="json")
    # Field order, and so the JSON, is the model's own.
    assert list(built.model_dump()) == list(ReachResult.model_fields)
    assert built.model_fields_set == set(values)


def test_defaults_made_by_factories_are_fresh_for_each_build() -> None:
    first = build_trusted(ReachResult, {"status": ResultStatus.OK, "task_id": "a"})
    second = build_trusted(ReachResult, {"status": ResultStatus.OK, "task_id": "b"})
    first.extra["note"] = "mine"
    assert second.extra == {}
    assert first.timings == Timings()
    one, other = build_trusted(MetaInfo, {}), build_trusted(MetaInfo, {})
    assert one.task_id != other.task_id  # default_factory ran for each


def test_given_values_win_over_factories() -> None:
    timings = Timings(total_ms=3.0)
    built = build_trusted(ReachResult, {"status": ResultStatus.OK, "task_id": "t", "timings": timings})
    assert built.timings is timings


def test_amend_sets_fields_and_marks_them_set() -> None:
    result = build_trusted(ReachResult, {"status": ResultStatus.OK, "task_id": "t"})
    assert "served_by" not in result.model_fields_set
    amend(result, {"served_by": "fallback", "attempts": 2})
    assert (result.served_by, result.attempts) == ("fallback", 2)
    assert {"served_by", "attempts"} <= result.model_fields_set
    assert ReachResult.model_validate(result.model_dump()) == result


def test_zero_timings_are_shared_and_frozen() -> None:
    assert Timings() == ZERO_TIMINGS
    assert Timings.model_config.get("frozen") is True
