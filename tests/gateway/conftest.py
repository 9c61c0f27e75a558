"""`reach serve` as a real subprocess on 127.0.0.1, port 0, and config directories to serve."""

from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
REACH = [PYTHON, "-m", "reach_adapters.cli"]
PROBE_SERVER = str(Path(__file__).with_name("server.py"))
READY = re.compile(r"^reach ready: url=(\S+) mcp=(\S+) api=(\S+)(?: a2a=(\S+))?$")

ECHO = "kind: function\nagent_id: util:echo:01\nfunction: tests.gateway.agents:echo\n"
SHOUT = "kind: function\nagent_id: util:shout:01\nfunction: tests.gateway.agents:shout\n"
PROBE = f"kind: mcp\nname: probe\ncommand: python\nargs: [{PROBE_SERVER}]\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def run_reach(
    *args: str, timeout: float = 60.0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``reach ARGS...`` to completion, from the repository root."""
    return subprocess.run(
        [*REACH, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, input=stdin, check=False
    )


class ReachServer:
    """``reach serve DIR --port 0`` in a subprocess; its URLs come from the ready line."""

    def __init__(self, config_dir: Path, log: Path, *extra: str) -> None:
        self.log = log
        self._log_file = log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*REACH, "serve", str(config_dir), "--port", "0", "--reload-interval", "0.05", *extra],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
        )
        try:
            self.url, self.mcp_url, self.api_url, self.a2a_url = self._ready(timeout=60.0)
        except BaseException:
            self.stop()
            raise

    def _ready(self, timeout: float) -> tuple[str, str, str, str | None]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        match = READY.match(line.strip())
        if match is None:
            self.stop()
            pytest.fail(f"no ready line from reach serve (got {line!r}); its log:\n{self.log.read_text()}")
        return match.group(1), match.group(2), match.group(3), match.group(4)

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.api_url}{path}", timeout=30.0, **kwargs)

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = self.api("GET", "/health").json()
        return body

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, and the exit code once it has stopped."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log_file.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., ReachServer]]:
    """Start servers on demand; every one is stopped when the test ends."""
    started: list[ReachServer] = []

    def start(config_dir: Path, *extra: str) -> ReachServer:
        server = ReachServer(config_dir, tmp_path / f"reach-{len(started)}.log", *extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "config"
    directory.mkdir()
    return directory
