"""Call options are typed (`CallOptions`: mypy rejects a misspelt one) and checked at run time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

from middleware import MetaInfo, RoutingHint
from reach_adapters import CallOptions, FunctionAgent, InvalidMessageError, Router
from reach_adapters.router.options import CALL_OPTIONS

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """\
from reach_adapters import CallOptions, Router


async def calls(router: Router) -> None:
    thread = {"thread_id": "t-1"}
    await router.route("echo", {}, timeout_ms=100, namespace="x", configurable=thread, fallback=["a:b:c"])
    await router.send("a:b:c", {}, capability="echo", priority=9, attributes={"tier": "gold"})
    await router.broadcast("echo", {}, merge="first", task_id="t", tags=["x"])
    router.route_sync(None, text="what time is it", strategy="least_wait")
    options = CallOptions(version="2", resume="yes")
    router.send_sync("a:b:c", {}, **options)
    async for _ in router.stream("echo", {}, stream_mode=["messages"]):
        pass
    await router.route("echo", {}, timout_ms=100)
    router.send_sync("a:b:c", {}, priority="high")
    await router.broadcast("echo", {}, fallbacks=["a:b:c"])
    router.stream("echo", {}, stream="messages")
"""
FIRST_WRONG_LINE = 14


def test_mypy_accepts_the_options_and_rejects_misspelt_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snippet = tmp_path / "calls.py"
    snippet.write_text(SNIPPET)
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    report, errors, _ = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-incremental",
            "--cache-dir",
            "/dev/null",
            str(snippet),
        ]
    )
    assert not errors
    flagged = {int(line) for line in re.findall(r"calls\.py:(\d+): error", report)}
    wrong = set(range(FIRST_WRONG_LINE, SNIPPET.count("\n") + 1))
    assert flagged == wrong, report
    assert 'did you mean "timeout_ms"?' in report


def test_the_options_are_the_message_fields_a_caller_sets() -> None:
    router_owned = {"capability", "created_at"}
    hint = {"fallback", "strategy", "defer"}
    assert set(MetaInfo.model_fields) - router_owned | hint == CALL_OPTIONS
    assert hint <= set(RoutingHint.model_fields)
    assert CallOptions.__required_keys__ == frozenset()


async def test_options_are_checked_at_run_time(router: Router) -> None:
    async def echo(payload: object) -> object:
        return payload

    router.register(FunctionAgent(echo, agent_id="util:echo:01"))
    options: dict[str, object] = {"timout_ms": 100, "namespace": "util"}
    with pytest.raises(
        InvalidMessageError, match=r"unknown call option\(s\) 'timout_ms'; the options are .*timeout_ms"
    ):
        await router.route("echo", {}, **options)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="field 'priority'"):
        await router.route("echo", {}, priority="high")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="created_at"):
        await router.route("echo", {}, created_at=0.0)  # type: ignore[call-arg]
    ok = await router.route("echo", {"x": 1}, timeout_ms=1_000, configurable={"thread_id": "t"}, fallback=[])
    assert ok.ok, ok.error
