"""Bounded requests: body size, body read time, JSON depth, and overload answered as such."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.applications import Starlette

from reach_adapters import Capability, FunctionAgent, RoutingPolicy
from reach_adapters.gateway import Gateway, GatewayError, ServerLimits
from reach_adapters.gateway.api import GatewayAPI
from reach_adapters.gateway.limits import BodyLimit
from tests.gateway.conftest import ECHO, ReachServer, write

HOLD = "kind: function\nagent_id: util:hold:01\nfunction: tests.gateway.agents:hold\n"

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    pytest.fail(f"no VmRSS for process {pid}")


def raw_post(url: str, head: dict[str, str], chunks: list[bytes], *, pause_s: float = 0.0) -> tuple[int, str]:
    """POST by hand, sending `chunks` until the server answers or closes; its status and body.

    A plain socket, so the test sees the server's answer even when it comes before the body ends.
    """
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json"]
        lines += [f"{name}: {value}" for name, value in head.items()]
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        for chunk in chunks:
            try:
                conn.sendall(chunk)
            except OSError:
                break  # the server answered and closed: read what it said
            if pause_s and select.select([conn], [], [], pause_s)[0]:
                break  # answered before the body was done
        answer = _read_answer(conn)
    head_text, _, body = answer.partition(b"\r\n\r\n")
    return int(head_text.split()[1]), body.decode()


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.fixture
def echo_server(config_dir: Path, serve: Callable[..., ReachServer]) -> ReachServer:
    write(config_dir, "util:echo:01.yaml", ECHO)
    return serve(config_dir, "--body-timeout", "1", "--header-timeout", "1", "--max-header-bytes", "4096")


def test_big_bodies_are_refused_unread_and_memory_stays_bounded(echo_server: ReachServer) -> None:
    url = echo_server.api_url + "/route"
    pid = echo_server.process.pid
    assert (
        echo_server.api("POST", "/route", json={"capability": "echo", "payload": "x" * 1000}).status_code
        == 200
    )
    before = rss_kib(pid)
    block = b"x" * MIB
    for _ in range(3):
        status, body = raw_post(url, {"Content-Length": str(50 * MIB)}, [block] * 50)
        assert status == 413
        assert "larger than 4194304 bytes" in body
        assert "--max-body-bytes" in body
        # Chunked, no length declared: counted as it comes and refused past the limit.
        chunked = [b"%x\r\n%s\r\n" % (len(block), block)] * 50
        status, body = raw_post(url, {"Transfer-Encoding": "chunked"}, chunked)
        assert status == 413
        assert "--max-body-bytes" in body
        # The same limit, and answer, on the MCP endpoint.
        status, body = raw_post(echo_server.mcp_url, {"Content-Length": str(50 * MIB)}, [block] * 50)
        assert status == 413
        assert "--max-body-bytes" in body
    assert rss_kib(pid) - before < 50 * 1024
    assert echo_server.health()["status"] == "ok"


def test_a_slow_body_is_cut_off(echo_server: ReachServer) -> None:
    body = json.dumps({"capability": "echo", "payload": "slow"}).encode()
    # One byte at a time, 0.2 s apart: 6 s for the whole body, against a 1 s limit.
    chunks = [body[i : i + 1] for i in range(len(body))]
    status, answer = raw_post(
        echo_server.api_url + "/route", {"Content-Length": str(len(body))}, chunks, pause_s=0.2
    )
    assert status == 408
    assert "did not arrive within 1 s" in answer
    assert "--body-timeout" in answer


def raw_get(url: str, headers: dict[str, str]) -> bytes:
    """GET `url` by hand with `headers`, sent at once; everything the server answers until it
    closes or ends its answer."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    lines = [f"GET {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    answer = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        while data := conn.recv(65536):
            answer += data
    return answer


def test_a_request_head_past_max_header_bytes_is_refused(echo_server: ReachServer) -> None:
    health = echo_server.api_url + "/health"
    # Two headers that together pass 4096 bytes, each well under it: the whole head counts.
    refused = raw_get(health, {"X-Big-1": "a" * 2100, "X-Big-2": "b" * 2100})
    assert refused.startswith(b"HTTP/1.1 400 "), refused[:200]
    # Just under the limit, the same request is served.
    served = raw_get(health, {"X-Big-1": "a" * 1800, "X-Big-2": "b" * 1800})
    assert served.startswith(b"HTTP/1.1 200 "), served[:200]
    assert echo_server.health()["status"] == "ok"


def test_one_endless_header_is_refused_at_max_header_bytes(echo_server: ReachServer) -> None:
    parts = urlsplit(echo_server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    answer = b""
    cut_off = False
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(f"GET /api/health HTTP/1.1\r\nHost: {parts.netloc}\r\nX-Big: ".encode())
        # 4 MiB of one header value whose line never ends: the parser holds it whole, and tells
        # no callback of it. Accepted, it would all be read in well under the 1 s head timeout.
        try:
            for _ in range(1024):
                conn.sendall(b"a" * 4096)
        except OSError:
            cut_off = True  # refused and closed, the rest unread
        with contextlib.suppress(ConnectionResetError):
            while data := conn.recv(65536):
                answer += data
    assert cut_off or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert echo_server.health()["status"] == "ok"


def test_a_bare_newline_after_a_response_does_not_lift_the_head_timeout(echo_server: ReachServer) -> None:
    parts = urlsplit(echo_server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(f"GET /api/health HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
        assert _read_answer(conn).startswith(b"HTTP/1.1 200 ")
        # A CRLF stops uvicorn's keep-alive timer and starts no request; the head timeout passes
        # with no request begun, then a head comes a byte at a time.
        conn.sendall(b"\r\n")
        time.sleep(1.5)
        assert _cut_off_while_trickling(conn, f"GET /api/health HTTP/1.1\r\nX-Slow: {'a' * 100}".encode())
    assert echo_server.health()["status"] == "ok"


def test_a_request_running_past_the_head_timeout_keeps_its_answer(
    config_dir: Path, serve: Callable[..., ReachServer], tmp_path: Path
) -> None:
    write(config_dir, "util:hold:01.yaml", HOLD)
    server = serve(config_dir, "--header-timeout", "1")
    parts = urlsplit(server.api_url)
    assert parts.hostname is not None
    assert parts.port is not None
    release = tmp_path / "release"
    body = json.dumps({"capability": "hold", "payload": {"release": str(release)}}).encode()
    head = (
        f"POST {parts.path}/route HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        # The next request's first bytes come at once (pipelined), its head left incomplete.
        conn.sendall(head.encode() + body + b"GET /api/hea")
        time.sleep(2.0)  # twice the head timeout, the first request still running
        release.touch()
        assert conn.recv(65536).startswith(b"HTTP/1.1 200 ")


def _read_answer(conn: socket.socket) -> bytes:
    """One whole answer (its head, then as much body as it says) read from `conn`."""
    answer = b""
    while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
        data = conn.recv(65536)
        if not data:
            break
        answer += data
    return answer


def _cut_off_while_trickling(conn: socket.socket, head: bytes) -> bool:
    """Send `head` a byte every 0.2 s; whether the server closed the connection before the end."""
    for index in range(len(head)):
        try:
            conn.sendall(head[index : index + 1])
        except OSError:
            return True
        if select.select([conn], [], [], 0.2)[0]:
            # Cut off: closed cleanly, or reset when our unread bytes were still in its buffer.
            try:
                return conn.recv(65536) == b""
            except ConnectionResetError:
                return True
    return False


def test_a_slow_request_head_is_cut_off(echo_server: ReachServer) -> None:
    parts = urlsplit(echo_server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    head = f"GET /api/health HTTP/1.1\r\nHost: {parts.netloc}\r\nX-Slow: {'a' * 100}\r\n\r\n".encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        # A byte every 0.2 s: 30 s for the head, against a 1 s limit.
        assert _cut_off_while_trickling(conn, head)
    assert echo_server.health()["status"] == "ok"


@pytest.mark.parametrize("depth", [65, 500])
def test_deep_json_is_refused_by_depth(echo_server: ReachServer, depth: int) -> None:
    payload = "[" * depth + "]" * depth
    content = '{"capability": "echo", "payload": ' + payload + "}"
    answer = echo_server.api("POST", "/route", content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert "nested deeper than 64 levels" in answer.json()["error"]
    assert "--max-json-depth" in answer.json()["error"]
    shallow = "[" * 60 + "]" * 60
    fine = echo_server.api(
        "POST",
        "/route",
        content='{"capability": "echo", "payload": ' + shallow + "}",
        headers={"Content-Type": "application/json"},
    )
    assert fine.status_code == 200


def test_limits_must_be_sensible() -> None:
    with pytest.raises(GatewayError, match="--max-json-depth"):
        ServerLimits(max_json_depth=500)


async def test_a_call_no_agent_has_capacity_for_is_503_with_retry_after(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    release = asyncio.Event()

    async def busy(text: str) -> str:
        await release.wait()
        return text

    capability = Capability(name="busy", description="Hold until released.", max_concurrency=1)
    async with await Gateway.start(config_dir) as gateway:
        gateway.router.register(FunctionAgent(busy, agent_id="util:busy:01", capabilities=[capability]))
        gateway.router.update_policy(RoutingPolicy(max_waiting=0))
        app = Starlette(routes=GatewayAPI(gateway, limits=ServerLimits(retry_after_s=2)).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            first = asyncio.ensure_future(
                client.post("/api/route", json={"capability": "busy", "payload": {"text": "a"}})
            )
            while gateway.router.catalog()[-1].in_flight == 0 and not first.done():
                await asyncio.sleep(0.01)
            refused = await client.post("/api/route", json={"capability": "busy", "payload": {"text": "b"}})
            assert refused.status_code == 503, refused.json()
            assert refused.headers["Retry-After"] == "2"
            assert refused.json()["status"] == "no_candidate"
            assert "saturated" in refused.json()["error"]
            release.set()
            assert (await first).status_code == 200
            unknown = await client.post("/api/route", json={"capability": "nobody", "payload": "c"})
            assert unknown.status_code == 200  # no agent at all is an outcome, not overload


def test_a_body_limit_served_again_on_a_new_loop_still_cuts_slow_bodies_off() -> None:
    """The limit's one timer belongs to the loop it was armed on: an app served again after that
    loop ended (an in-process gateway started twice) must arm one on the new loop."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limit = BodyLimit(app, ServerLimits(body_timeout_s=0.05))

    async def slow_request() -> int:
        sent: list[Any] = []

        async def receive() -> Any:
            await asyncio.sleep(10)  # a body that never comes
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
        await asyncio.wait_for(limit(scope, receive, send), 5)
        return int(sent[0]["status"])

    async def abandoned() -> None:
        # A read left pending when its loop ends, the limit's timer with it.
        task = asyncio.ensure_future(slow_request())
        await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(abandoned())
    assert asyncio.run(slow_request()) == 408
