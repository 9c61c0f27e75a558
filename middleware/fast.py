"""Build and amend models the router made itself, without validating them again.

Routing one call creates several models; pydantic's `model_construct` looks up each missing
default's factory signature on every call, which alone costs more than the whole routing budget.
These helpers fill defaults from a plan computed once per class. Use them only for values that
are already valid; anything from outside goes through normal validation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from middleware.models import Timings

__all__ = ["ZERO_TIMINGS", "amend", "amended", "build_trusted"]

M = TypeVar("M", bound=BaseModel)

_Plan = tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...]]
_plans: dict[type[BaseModel], _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    # Every field appears in `static`, in declaration order, so dumps keep the model's order;
    # fields with factories hold a placeholder there that each build replaces.
    static: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, field in cls.model_fields.items():
        static[name] = field.default
        if field.default_factory is not None:
            factories.append((name, field.default_factory))  # type: ignore[arg-type]
    plan = (static, tuple(factories))
    _plans[cls] = plan
    return plan


def build_trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` from `values` plus its defaults, skipping validation."""
    static, factories = _plans.get(cls) or _plan(cls)
    data = static.copy()
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    obj = _new(cls)
    _set_dict(obj, data)
    _set_fields_set(obj, set(values))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


# BaseModel's own slots, set through their descriptors: a third cheaper than `object.__setattr__`
# by name (and `object.__new__` than `cls.__new__`), on every model the router builds.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def amend(obj: BaseModel, values: dict[str, Any]) -> None:
    """Set several already-valid fields at once, as assignment would, without its per-field cost."""
    obj.__dict__.update(values)
    obj.__pydantic_fields_set__.update(values)


def amended(obj: M, values: dict[str, Any]) -> M:
    """A shallow copy of `obj` with several already-valid fields set: `model_copy(update=...)`
    without its cost, for a copy made on every call."""
    extra, private = obj.__pydantic_extra__, obj.__pydantic_private__
    copy = _new(type(obj))
    _set_dict(copy, {**obj.__dict__, **values})
    _set_fields_set(copy, obj.__pydantic_fields_set__ | values.keys())
    _set_extra(copy, None if extra is None else dict(extra))
    _set_private(copy, None if private is None else dict(private))
    return copy


ZERO_TIMINGS = Timings()
