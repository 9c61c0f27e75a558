"""A minimal keep-alive HTTP/1.1 JSON client for load generators.

httpx spends more CPU per request than the gateway it measures (on two cores a 48-connection
httpx load tops out near 400 requests/s while the server idles), so the load benchmarks speak
HTTP/1.1 over asyncio streams themselves: one connection per client loop, requests written as
bytes, responses read by Content-Length. Enough for the gateway's JSON API, nothing more.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import orjson

__all__ = ["Connection"]


class Connection:
    """One keep-alive connection to a base URL such as ``http://127.0.0.1:PORT/api``."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path.rstrip("/")
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The status code and the decoded JSON body."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        data = b"" if body is None else orjson.dumps(body)
        head = (
            f"{method} {self.path}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self._writer.write(head.encode() + data)
        status_line = await self._reader.readline()
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        payload = await self._reader.readexactly(length)
        return int(status_line.split()[1]), orjson.loads(payload) if payload else None

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()
