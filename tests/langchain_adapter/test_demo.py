"""The offline demo runs and shows every routed call with its decision record."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.langchain_demo.__main__ import main


async def test_the_demo_routes_the_ticket_through_the_supervisor(capsys: pytest.CaptureFixture[str]) -> None:
    await main()

    out = capsys.readouterr().out
    assert "reach tools for the supervisor: reach_agent, refund, summarize" in out
    routed = re.findall(r"routed '(\w+)' -> (\S+) \[ok\] .* trace (\w+)\)", out)
    assert [(name, agent) for name, agent, _ in routed] == [
        ("triage", "support:supervisor:01"),
        ("summarize", "support:summary:01"),
        ("refund", "support:refund:01"),
    ]
    assert len({trace for _, _, trace in routed}) == 1  # the nested calls continue the supervisor's trace
    assert out.count("chosen support:") == 3
    assert "supervisor answered: Done" in out


def test_the_demo_says_what_to_install() -> None:
    # A Python without LangGraph: the demo says what to run instead of failing deep inside.
    hide = "import runpy, sys; sys.modules['langgraph'] = None; "
    done = subprocess.run(
        [sys.executable, "-c", hide + "runpy.run_module('examples.langchain_demo', run_name='__main__')"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("examples.langchain_demo needs langgraph, which ")
    assert "run `make install` in the repository root" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
