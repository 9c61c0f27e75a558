"""A throwaway ``redis-server`` for the cluster benchmarks: a free port of 127.0.0.1, a temporary
directory, stopped when the benchmark ends."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.redis_server import INSTALL_HINT, free_port

__all__ = ["throwaway_redis"]


@contextmanager
def throwaway_redis(*, appendonly: bool = False) -> Iterator[str]:
    """Start one and yield its URL; `appendonly` as a durable queue runs it (fsync every second)."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit(INSTALL_HINT)
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory]
        command += ["--appendonly", "yes" if appendonly else "no"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_ready(port)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.kill()
            process.wait(timeout=10)


def _wait_ready(port: int) -> None:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"redis-server did not start on port {port}")
