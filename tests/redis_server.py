"""A throwaway `redis-server` for the tests that need Redis: started on a free port of 127.0.0.1
for the test session, stopped after it.

`make test` installs Debian's redis-server when it is missing (as root); here, a missing server
skips the Redis tests with one line saying how to install it, so plain `pytest` works either way.
Installing is left to make: an apt-get run inside a test would eat the test's timeout.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

__all__ = ["INSTALL_HINT", "RedisServer", "free_port", "node_client", "redis_server"]

INSTALL_HINT = (
    "redis-server is not installed: `make test` as root installs it, "
    "or run `apt-get install -y redis-server` (Debian/Ubuntu) / `brew install redis` (macOS)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def node_client(url: str, timeout: float = 0.5) -> redis.Redis:
    """A client set up as a cluster node sets up its own: short timeouts, one retry (a pooled
    connection a restarted server closed fails once, then reconnects)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(cap=timeout, base=0.05), retries=1),
    )


class RedisServer:
    """One `redis-server` process in the foreground of a subprocess; stopped by its pid."""

    def __init__(self, binary: str, directory: Path, *, appendonly: bool = False) -> None:
        self.binary = binary
        self.directory = directory
        self.appendonly = appendonly
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers PING; the same port again after a `stop`."""
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--dir", str(self.directory),
            "--daemonize", "no",
        ]  # fmt: skip
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0) -> None:
        assert self.process is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.process.poll() is not None:
                log = (self.directory / "redis.log").read_text(errors="replace")
                pytest.fail(f"redis-server exited at start; its log:\n{log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        pytest.fail(f"redis-server did not answer on port {self.port} within {timeout} s")

    def stop(self, *, graceful: bool = False) -> None:
        """Kill it; `graceful`: SIGTERM, so it writes its append-only file out before it exits
        (a restart, as an operator does one; with ``appendfsync everysec`` a kill may lose 1 s)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            if graceful:
                process.terminate()
            else:
                process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for the whole session (tests use their own key prefixes or FLUSHDB)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(INSTALL_HINT)
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
