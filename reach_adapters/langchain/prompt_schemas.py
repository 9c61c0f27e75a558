"""The input schema of a mustache prompt, whose variables may be objects (``{{user.name}}``).

LangChain describes a `ChatPromptTemplate`'s variables as strings whatever their format, so a
mustache chat prompt that reads ``{{user.name}}`` would declare ``user`` a string: the object
it renders from is refused, and the string it asks for renders nothing. Its `PromptTemplate`
describes mustache variables from the template; the chat prompt's variables are described here
the same way, from its messages' templates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from langchain_core.prompts import BasePromptTemplate, ChatPromptTemplate, PromptTemplate
from langchain_core.prompts.string import mustache_schema
from langchain_core.runnables import Runnable
from langchain_core.utils.mustache import tokenize
from pydantic import create_model

from reach_adapters.langchain.graphs import leading

__all__ = ["mustache_input"]

_SECTIONS = frozenset({"section", "inverted section"})


def mustache_input(runnable: Runnable[Any, Any]) -> dict[str, Any] | None:
    """The input JSON Schema of the mustache chat prompt that gets `runnable`'s input as it is
    (itself, under bindings or a `.with_fallbacks()`, a chain's first step); None otherwise."""
    prompt = next((each for each in leading(runnable) if isinstance(each, BasePromptTemplate)), None)
    if not isinstance(prompt, ChatPromptTemplate):
        # A `PromptTemplate` describes its mustache variables itself.
        return None
    templates = list(_mustache_templates(prompt))
    if not templates:
        return None
    return _schema(prompt, templates)


def _mustache_templates(prompt: ChatPromptTemplate) -> Iterator[str]:
    for message in prompt.messages:
        inner = getattr(message, "prompt", None)
        # A message of text and images holds a list of templates.
        for each in inner if isinstance(inner, list) else [inner]:
            if isinstance(each, PromptTemplate) and each.template_format == "mustache":
                yield each.template


def _schema(prompt: ChatPromptTemplate, templates: list[str]) -> dict[str, Any]:
    """LangChain's schema for the prompt (required and optional variables, a placeholder's
    messages), with each mustache variable typed as its templates use it: an object of the
    keys read from it, a string, or anything for a section (a list, an object or a flag)."""
    used = mustache_schema("\n".join(templates)).model_fields
    sections = _section_names(templates)

    def kind(name: str) -> Any:
        if name in prompt.input_types:
            return prompt.input_types[name]
        if name in sections:
            return Any
        field = used.get(name)
        return str if field is None else field.annotation

    fields: dict[str, Any] = {name: (kind(name), ...) for name in prompt.input_variables}
    fields.update({name: (kind(name), None) for name in prompt.optional_variables})
    model = create_model("PromptInput", **fields)
    return model.model_json_schema()


def _section_names(templates: Iterable[str]) -> frozenset[str]:
    """The top-level variables a section opens (``{{#items}}``): mustache iterates a list there,
    enters an object or tests a flag, so no one type describes them."""
    names: set[str] = set()
    for template in templates:
        depth = 0
        for kind, key in tokenize(template):
            if kind == "end":
                depth -= 1
            elif kind in _SECTIONS:
                if depth == 0:
                    names.add(key.split(".")[0])
                depth += 1
    return frozenset(names)
