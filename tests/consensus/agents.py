"""Agents named by import path in the config directories of the served tests."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableLambda

from tests.consensus.voters import ANSWERS


def paris(country: str) -> str:
    """The capital city of a country."""
    return ANSWERS[country]


def lyon(country: str) -> str:
    """The capital city of a country, as one agent has it wrong."""
    return "Lyon"


def _capital(task: dict[str, Any]) -> str:
    return ANSWERS[task["country"]]


# A LangChain runnable among the served voters.
capital = RunnableLambda(_capital)
