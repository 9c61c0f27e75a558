"""The third review of issue 11: histories bound inside chains, schema keywords used as property
names, loosely typed chat outputs, graphs inside chains and fallbacks, JSON-pointer refs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnableLambda

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.test_fidelity import with_history

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    "chain",
    [
        lambda: with_history(session_id="s") | StrOutputParser(),
        lambda: RunnableLambda(lambda d: d, name="prep") | with_history(session_id="s") | StrOutputParser(),
    ],
    ids=["history-first", "history-second"],
)
async def test_a_history_bound_to_its_session_inside_a_chain_needs_none_from_callers(
    router: Router, caplog: pytest.LogCaptureFixture, chain: Any
) -> None:
    runnable: Runnable[Any, Any] = chain()
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(runnable, agent_id="support:chat:01"))
    assert "session_id" not in caplog.text
    for _ in range(2):
        result = await router.route("chat", {"question": "hi"})
        assert (result.status, result.payload) == (ResultStatus.OK, "hello"), result.error
