"""Secrets in an MCP agent's command line, environment, URL and headers stay out of everything
people read: errors, descriptions, catalog and health views, decision records, log lines."""

from __future__ import annotations

import pytest
from mcp import StdioServerParameters

from reach_adapters import AgentState, Router
from reach_adapters.gateway.views import catalog_view
from reach_adapters.mcp import MCPConnectionError, MCPOptions, MCPServerAgent, ReconnectPolicy
from tests.mcp_adapter.conftest import PYTHON, HttpCalc, state_of
from tests.security.conftest import (
    HEADERS,
    KEYED_ARGS,
    KEYED_ENV,
    Captured,
    assert_no_secret,
    secret_url,
)
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

QUICK = MCPOptions(reconnect=ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.5))


async def test_a_stdio_server_that_cannot_start_names_its_command_without_the_key(
    text_logs: Captured,
) -> None:
    # Without its environment the server exits at once: the error quotes the command line.
    params = StdioServerParameters(command=PYTHON, args=KEYED_ARGS)
    with pytest.raises(MCPConnectionError) as caught:
        await MCPServerAgent.connect("keyed", params)
    assert "--api-key ***" in str(caught.value)
    assert_no_secret(str(caught.value))
    assert_no_secret(text_logs.text)


async def test_a_connected_stdio_server_shows_no_key_or_env_value(
    router: Router, text_logs: Captured
) -> None:
    agent = await MCPServerAgent.connect(
        "keyed", StdioServerParameters(command=PYTHON, args=KEYED_ARGS, env=KEYED_ENV)
    )
    router.register(agent)
    result = await router.route("echo", {"text": "hi"})
    assert result.payload == "hi"
    shown = [repr(agent), str(catalog_view(router.catalog())), str(router.explain(result.task_id).to_dict())]
    assert "--api-key ***" in shown[0]
    for text in shown:
        assert_no_secret(text)
    assert_no_secret(text_logs.text)


async def test_an_http_server_behind_credentials_leaks_none_while_it_fails(
    http_calc: HttpCalc, router: Router, text_logs: Captured
) -> None:
    agent = await MCPServerAgent.connect("calc", secret_url(http_calc.url), headers=HEADERS, options=QUICK)
    router.register(agent)
    assert (await router.route("add", {"a": 1, "b": 1})).ok
    http_calc.kill()
    await eventually(lambda: state_of(router, agent.agent_id) is AgentState.RECONNECTING, what="RECONNECTING")
    # Reconnect attempts fail against the dead port; each is logged with the server's URL.
    await eventually(lambda: "reconnect failed" in text_logs.text, what="a failed reconnect logged")
    failed = await router.route("add", {"a": 1, "b": 1}, timeout_ms=200)
    assert not failed.ok
    assert "http://***@127.0.0.1" in repr(agent)
    for text in (repr(agent), str(catalog_view(router.catalog())), str(failed.error)):
        assert_no_secret(text)
    assert_no_secret(str(router.explain(failed.task_id).to_dict()))
    assert "http://***@127.0.0.1" in text_logs.text
    assert_no_secret(text_logs.text)
