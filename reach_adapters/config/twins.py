"""Plain twins of the core's models, for validating configuration files with exact locations.

`RoutingPolicy` and `Capability` turn pydantic's errors into a `ReachError` inside ``__init__``,
which pydantic also calls for nested values: the error's field path survives only as text. A twin
has the same fields, types and constraints but no custom ``__init__``, so validating a file
against it yields structured locations to map onto lines. The real model is still built
afterwards and has the last word.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

__all__ = ["plain_model"]


def plain_model(
    model: type[BaseModel],
    *,
    name: str | None = None,
    exclude: Collection[str] = (),
    optional: bool = False,
    doc: str | None = None,
) -> type[BaseModel]:
    """A twin of `model` without its ``__init__``; nested models with one are twinned too.

    ``optional=True`` makes every field optional with no default, for partial declarations whose
    set fields are laid over a complete one (``model_dump(exclude_unset=True)``).
    """
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        if field_name in exclude:
            continue
        annotation: Any = info.annotation
        custom_init = getattr(annotation, "__pydantic_custom_init__", False)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and custom_init:
            annotation = plain_model(annotation)
        if optional:
            constrained: Any = Annotated[annotation, *info.metadata] if info.metadata else annotation
            fields[field_name] = (constrained | None, Field(None, description=info.description))
        else:
            fields[field_name] = (annotation, FieldInfo.merge_field_infos(info))
    twin: type[BaseModel] = create_model(
        name or model.__name__,
        __config__=ConfigDict(extra="forbid"),
        __doc__=doc or model.__doc__,
        **fields,
    )
    return twin
