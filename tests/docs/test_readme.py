"""The README's Python code blocks run as written.

Each ```python block runs in a fresh namespace, in a fresh event loop when it awaits at top level,
offline. A block that cannot run on its own (a reference of calls, a fragment) is marked on the
line just before its fence with ``<!-- doc-test: skip (why, and which file runs it) -->``; keep
those few.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SKIP = re.compile(r"<!-- doc-test: skip \((?P<why>[^)]+)\) -->")
_FENCE = re.compile(r"^```python\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    skip: str | None


def python_blocks(text: str) -> list[Block]:
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = SKIP.fullmatch(before.strip())
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(line, match["code"], marked["why"] if marked else None))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_runnable_blocks_and_few_skipped() -> None:
    runnable = [block for block in BLOCKS if block.skip is None]
    assert len(runnable) >= 2
    assert len(BLOCKS) - len(runnable) <= len(runnable)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{block.line}" for block in BLOCKS])
def test_a_readme_block_runs(block: Block, capfd: pytest.CaptureFixture[str]) -> None:
    # capfd, not capsys: MCP stdio servers inherit the real stderr, which needs a file descriptor.
    if block.skip is not None:
        pytest.skip(block.skip)
    code = compile(block.code, f"README.md:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    outcome = eval(code, namespace)
    if inspect.iscoroutine(outcome):
        asyncio.run(outcome)
    # Every runnable block shows its result.
    assert capfd.readouterr().out.strip()


def test_the_five_lines_print_what_they_promise(capsys: pytest.CaptureFixture[str]) -> None:
    five = next(block for block in BLOCKS if "writer:polish:01" in block.code)
    exec(compile(five.code, "five", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Hello."
    assert "writer:polish:01" in out[1]
