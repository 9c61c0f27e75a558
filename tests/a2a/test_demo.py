"""The A2A demo runs end to end, offline: one a2a-sdk agent reached from a LangChain agent, over
MCP and over A2A, and every call it printed is one the agent received."""

from __future__ import annotations

import re
import socket

import pytest

from tests.demos import assert_it_names_the_install, run_demo

# A call's story: who called, the way to the agent, its status and task, the answer.
CALL = re.compile(
    r"^  (?P<call>\S.*)\n"
    r"    (?P<path>.+) -> (?P<agent>\S+) over A2A \[(?P<status>\w+)\], task (?P<task>\S+)\n"
    r"    answer: (?P<answer>.+)$",
    re.MULTILINE,
)
RECEIVED = re.compile(r"^  shipping agent ran (\w+) \(task (\S+), trace \w+\)$", re.MULTILINE)
URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.timeout(120)
def test_the_a2a_demo_reaches_the_agent_from_langchain_mcp_and_a2a() -> None:
    out = run_demo("examples.a2a_demo")

    calls = [match.groupdict() for match in CALL.finditer(out)]
    assert [(c["call"].split(" {")[0], c["path"], c["status"]) for c in calls] == [
        ("LangChain tool call track_parcel", "router", "ok"),
        ("LangChain tool call apology_note", "router", "ok"),
        ("MCP tools/call track_parcel", "reach serve", "ok"),
        ("MCP tools/call apology_note", "reach serve", "ok"),
        ("A2A SendMessage, naming skill track_parcel", "reach serve -> track_parcel", "completed"),
        ("A2A SendMessage, no skill, matched by its text", "reach serve -> apology_note", "completed"),
    ]
    assert {c["agent"] for c in calls} == {"a2a:shipping:0"}
    answers = [c["answer"] for c in calls]
    assert '"parcel_id": "PX-7", "status": "in transit"' in answers[0]
    assert (
        answers[1]
        == "Dear customer, we are sorry: my parcel PX-7 is three days late. A voucher is on its way."
    )
    assert '"last_seen": "front door, Rue Mercière 12", "parcel_id": "PX-9"' in answers[2]
    assert answers[3].startswith("Dear customer, we are sorry: the box was left in the rain.")
    assert '"parcel_id": "PX-7", "status": "in transit"' in answers[4]
    assert answers[5].startswith("Dear customer, we are sorry: the courier was rude")

    # The agent received exactly these calls, each under the task id the router gave it.
    received = RECEIVED.findall(out)
    assert received == list(
        zip(["track_parcel", "apology_note"] * 3, [c["task"] for c in calls], strict=True)
    )
    assert len({task for _, task in received}) == 6

    assert "the LangChain agent's tools: reach_agent, apology_note, track_parcel" in out
    assert "MCP tools: apology_note, track_parcel" in out
    assert "skills: apology_note, track_parcel" in out
    assert "the LangChain agent answered: PX-7 is in transit" in out
    assert "reach serve stopped (exit code 0)" in out
    # Both servers (the agent and reach serve) are gone: nothing listens on their ports any more.
    ports = {int(port) for port in URL.findall(out)}
    assert len(ports) == 2
    assert all(_refused(port) for port in ports)


def test_the_a2a_demo_says_what_to_install() -> None:
    assert_it_names_the_install("examples.a2a_demo", "a2a")
