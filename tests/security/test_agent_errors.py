"""What callers and the log learn of an agent's exception (`expose_agent_errors`), and that no
caller-chosen text can forge a line of the text log."""

from __future__ import annotations

import logging
import re

import pytest

from middleware import ResultStatus
from reach_adapters import Router, RoutingPolicy
from reach_adapters.mcp import MCPServerAgent
from tests.core.conftest import FAST, failing_agent
from tests.security.conftest import PASSWORD, Captured, assert_no_secret

pytestmark = pytest.mark.timeout(30)

BOOM = ValueError(f"database postgres://admin:{PASSWORD}@db:5432 refused the query")
LINE_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


async def test_agent_errors_are_exposed_by_default_with_secrets_masked(text_logs: Captured) -> None:
    assert RoutingPolicy().expose_agent_errors is True
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", BOOM))
    result = await router.route("work", {})
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "ValueError"
    assert result.error == "database postgres://***@db:5432 refused the query"
    assert_no_secret(text_logs.text)


async def test_hidden_agent_errors_give_callers_a_reference_to_the_log_line(
    caplog: pytest.LogCaptureFixture, text_logs: Captured
) -> None:
    router = Router(FAST.model_copy(update={"expose_agent_errors": False}))
    router.register(failing_agent("svc:work:01", BOOM))
    with caplog.at_level(logging.WARNING, logger="reach_adapters.router.outcomes"):
        result = await router.route("work", {})
    match = re.fullmatch(r"agent error \(reference ([0-9a-f]{12})\)", result.error or "")
    assert match is not None, result.error
    assert result.error_type == "ValueError"
    assert "refused the query" not in str(router.explain(result.task_id).to_dict())
    # The server's log has the text under the same reference, its secret masked in the line.
    logged = [r for r in caplog.records if match[1] in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.WARNING]
    assert "refused the query" in logged[0].getMessage()
    assert f"(reference {match[1]}): ValueError: database postgres://***@db" in text_logs.text
    assert_no_secret(text_logs.text)


async def test_a_task_error_the_agent_answers_stays_when_errors_are_hidden() -> None:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("refuser")

    @server.tool()
    def refuse(reason: str) -> str:
        """Always refuses, saying why."""
        raise ToolError(f"refused: {reason}")

    router = Router(FAST.model_copy(update={"expose_agent_errors": False}))
    async with await MCPServerAgent.connect("refuser", server) as agent:
        router.register(agent)
        result = await router.route("refuse", {"reason": "out of stock"})
    assert not result.ok
    assert "refused: out of stock" in (result.error or "")


async def test_a_forged_newline_starts_no_text_log_line(text_logs: Captured) -> None:
    forged = "x\n2026-01-01 00:00:00,000 CRITICAL reach forged line\r\x1b[2K"
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", ValueError(f"bad payload {forged}")))
    await router.route("work", {})
    logging.getLogger("reach_adapters.test").warning("no capability named %s", forged)
    lines = text_logs.text.splitlines()
    assert any("forged line" in line for line in lines)
    # Every line is a record's own, or an indented line of a traceback.
    assert all(LINE_START.match(line) or line.startswith("    ") for line in lines), lines
    assert "\\n2026-01-01" in text_logs.text
    assert "\x1b" not in text_logs.text
    assert "\r" not in text_logs.text
