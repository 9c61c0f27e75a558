"""Run every benchmark script in turn: ``python -m benchmarks.run_all``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    failed = 0
    for script in sorted(Path(__file__).parent.glob("bench_*.py")):
        print(f"\n#### {script.stem}", flush=True)
        failed += subprocess.call([sys.executable, "-m", f"benchmarks.{script.stem}"]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
