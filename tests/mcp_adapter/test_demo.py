"""The MCP demo runs end to end: routing, failover, recovery, the router served over MCP."""

from __future__ import annotations

import pytest

from tests.demos import run_demo


@pytest.mark.timeout(120)
def test_demo_runs() -> None:
    out = run_demo("examples.mcp_demo")
    assert "mcp:time:0   online  get_current_time, convert_time" in out
    assert '"words": 4' in out
    killed = out.split("killed ")[1].split(" ")[0]
    survivor = "mcp:text:b" if killed == "mcp:text:a" else "mcp:text:a"
    after_kill = out.split("killed ")[1].split("reconnected by itself")[0]
    assert after_kill.count(f"[served by {survivor}]") == 3
    assert f"{killed} reconnected by itself: online" in out
    assert "tools: convert_time, get_current_time, reverse_words, whoami, word_count" in out
    assert '"timezone": "Asia/Tokyo"' in out
