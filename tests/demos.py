"""Run a demo: as it is, and in a Python that lacks one of the packages it needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_demo(demo: str) -> str:
    """``python -m demo`` from the repository root: what it printed, once it exited 0."""
    done = subprocess.run(
        [sys.executable, "-m", demo], cwd=ROOT, capture_output=True, text=True, timeout=110, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_it_names_the_install(demo: str, missing: str) -> None:
    """``python -m demo`` with `missing` hidden says, in one line, what to run: no traceback."""
    # A module set to None in sys.modules is one Python cannot import, and find_spec does not find.
    hide = f"import runpy, sys; sys.modules[{missing!r}] = None; "
    done = subprocess.run(
        [sys.executable, "-c", hide + f"runpy.run_module({demo!r}, run_name='__main__')"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"{demo} needs {missing}, which ")
    assert "run `make install` in the repository root" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
