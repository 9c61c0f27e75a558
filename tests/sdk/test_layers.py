"""The layers import downwards only: format -> core -> adapter surface -> adapters.

Adapters import core names from `reach_adapters.router` (the package), `reach_adapters.errors`,
`reach_adapters.extras` and `middleware`, never from the core's modules nor from another adapter;
the core imports no adapter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import reach_adapters
import reach_adapters.router

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ["langchain", "mcp", "a2a"]
EXAMPLES = [Path(__file__).with_name("example_adapter.py")]

SURFACE = frozenset(reach_adapters.router.__all__)
TOP_LEVEL = frozenset(reach_adapters.__all__) | {"errors", "router"}
# Beside the format, the base every layer imports: errors, the missing-extra guard, the version,
# the redaction of secrets.
BASE = frozenset(
    {"reach_adapters.errors", "reach_adapters.extras", "reach_adapters.version", "reach_adapters.security"}
)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """Every import in `path`, at any depth: (line, absolute module, names taken from it)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            found.append((node.lineno, module, [alias.name for alias in node.names]))
    return found


def _adapter_problem(module: str, names: list[str], own: str | None) -> str | None:
    """What is wrong with an adapter importing `names` from `module`, if anything."""
    if module == "reach_adapters":
        private = sorted(set(names) - TOP_LEVEL)
        return f"takes {private} from reach_adapters" if private else None
    if module == "reach_adapters.router":
        private = sorted(set(names) - SURFACE)
        return f"takes {private}, which reach_adapters.router does not export" if private else None
    if not module.startswith("reach_adapters."):
        return None
    if module in BASE or (
        own is not None and (module == f"reach_adapters.{own}" or module.startswith(f"reach_adapters.{own}."))
    ):
        return None
    if module.startswith("reach_adapters.router."):
        return f"imports the core's private module {module}; use reach_adapters.router"
    return f"imports {module}: an adapter imports no other adapter nor anything above the core"


def _adapter_files() -> list[tuple[str | None, Path]]:
    files: list[tuple[str | None, Path]] = [
        (name, path) for name in ADAPTERS for path in sorted((ROOT / "reach_adapters" / name).glob("*.py"))
    ]
    return files + [(None, path) for path in EXAMPLES]


def _core_files() -> list[Path]:
    return sorted((ROOT / "reach_adapters" / "router").glob("*.py")) + sorted(
        (ROOT / "middleware").glob("*.py")
    )


@pytest.mark.parametrize(("own", "path"), _adapter_files(), ids=lambda v: getattr(v, "name", None))
def test_adapters_use_only_the_surface(own: str | None, path: Path) -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {problem}"
        for line, module, names in _imports(path)
        if (problem := _adapter_problem(module, names, own)) is not None
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_no_adapter(path: Path) -> None:
    in_middleware = path.parent.name == "middleware"
    allowed = (
        () if in_middleware else ("reach_adapters.router", "reach_adapters.errors", "reach_adapters.security")
    )
    problems = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for line, module, _ in _imports(path)
        if (module == "reach_adapters" or module.startswith("reach_adapters."))
        and not any(module == ok or module.startswith(f"{ok}.") for ok in allowed)
    ]
    assert not problems, "\n".join(problems)


def test_the_check_catches_what_it_forbids() -> None:
    assert _adapter_problem("reach_adapters.router.agent", ["ok_result"], "langchain")
    assert _adapter_problem("reach_adapters.router", ["deliver"], "langchain")
    assert _adapter_problem("reach_adapters.mcp", ["MCPServerAgent"], "langchain")
    assert _adapter_problem("reach_adapters.gateway.api", ["RESERVED_OPTIONS"], None)
    assert _adapter_problem("reach_adapters", ["langchain"], None)
    assert _adapter_problem("reach_adapters.router", ["Router", "ok_result"], "langchain") is None
    assert _adapter_problem("reach_adapters.langchain.config", ["thread_of"], "langchain") is None
