"""An adapter's options, given as its typed model or as a plain mapping of the same fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error

__all__ = ["checked_options"]

M = TypeVar("M", bound=BaseModel)


def checked_options(model: type[M], options: M | Mapping[str, Any] | None, where: str) -> M:
    """`options` as a `model`: the defaults for None, a mapping checked field by field.

    Raises `InvalidDeclarationError` naming `where` (the agent, for the message) and each field
    that is wrong.
    """
    if options is None:
        return model()
    if isinstance(options, model):
        return options
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        msg = f"{where}: invalid options: {describe_validation_error(exc)}"
        raise InvalidDeclarationError(msg) from None
