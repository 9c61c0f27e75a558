"""The README's Python code blocks run as written, and so do the LangChain guide's opening and its
converter example.

Each ```python block runs in a fresh namespace, in a fresh event loop when it awaits at top level,
offline, from the repository root. A README block that cannot run on its own (a reference of
calls, a fragment) is marked on the line just before its fence with
``<!-- doc-test: skip (why, and which file runs it) -->``; keep those few.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LANGCHAIN_GUIDE = ROOT / "docs" / "langchain.md"
SKIP = re.compile(r"<!-- doc-test: skip \((?P<why>[^)]+)\) -->")
_FENCE = re.compile(r"^```python\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    skip: str | None


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, with their first line and skip reason."""
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
    run_block(block, "README.md")
    # Every runnable block shows its result.
    assert capfd.readouterr().out.strip()


def test_the_langchain_guide_opens_with_a_runnable_example(capfd: pytest.CaptureFixture[str]) -> None:
    opening = python_blocks(LANGCHAIN_GUIDE.read_text(encoding="utf-8"))[0]
    run_block(opening, "docs/langchain.md")
    out = capfd.readouterr().out.splitlines()
    assert out[0] == "Refund of 39.90 approved for order 42 (kettle delivered damaged)."
    # The supervisor's answer is scripted: only its tool calls show whether the router served them.
    assert out[2:4] == [
        "summarize: success: Customer reports a damaged kettle (order 42) and wants a refund.",
        "refund: success: Refund of 39.90 approved for order 42 (kettle delivered damaged).",
    ]
    assert out[-1] == "Done: the ticket is summarised and the refund for order 42 is approved."


def run_block(block: Block, source: str) -> None:
    code = compile(block.code, f"{source}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(code, {"__name__": "__doc_block__"})
    if inspect.iscoroutine(outcome):
        asyncio.run(outcome)


def test_the_five_lines_print_what_they_promise(capsys: pytest.CaptureFixture[str]) -> None:
    five = next(block for block in BLOCKS if "writer:polish:01" in block.code)
    run_block(five, "README.md")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Hello."
    assert "writer:polish:01" in out[1]


def test_the_langchain_guides_converter_example_prints_what_it_says(
    capfd: pytest.CaptureFixture[str],
) -> None:
    guide = python_blocks(LANGCHAIN_GUIDE.read_text(encoding="utf-8"))
    block = next(block for block in guide if "converter.to_middleware(" in block.code)
    run_block(block, "docs/langchain.md")
    out = capfd.readouterr().out.splitlines()
    printed = [
        "['HumanMessage', 'AIMessage', 'ToolMessage', 'AIMessage']",
        "Refund of 39.90 approved for order 42 (kettle delivered damaged).",
    ]
    assert out == printed
    # The guide says what it prints, in its comments.
    assert all(f"# {line}" in block.code for line in printed)
