"""Serving a test server over streamable HTTP on a port the OS picks, for its test to read."""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from starlette.types import ASGIApp

__all__ = ["serve_http"]


def serve_http(app: ASGIApp, port: int = 0) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: one the OS picks) until killed, printing the port as
    the first line of stdout; ``TCP_NODELAY``, as uvicorn sets it on the sockets it opens."""
    sock = socket.create_server(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
