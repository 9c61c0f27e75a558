"""The gateway demo runs end to end, offline, and shows what it promises."""

from __future__ import annotations

import pytest

from tests.demos import assert_it_names_the_install, run_demo

pytestmark = pytest.mark.timeout(120)


def test_the_gateway_demo_runs() -> None:
    out = run_demo("examples.gateway_demo")
    assert "-> Refund of 39.90 approved for order 42" in out
    assert "unicast get_current_time with strategy weighted -> mcp:time:0 via candidate [ok]" in out
    assert "POST /api/route lookup_order -> [ok]" in out
    assert "unicast translate with strategy weighted -> util:fallback:01 via default [ok]" in out
    assert "stopped with SIGTERM (exit code 0)" in out
    assert '"decision_type": "fell back", "capability": "translate"' in out


def test_the_gateway_demo_says_what_to_install() -> None:
    assert_it_names_the_install("examples.gateway_demo", "mcp_server_time")
