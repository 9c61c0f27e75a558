"""Direct connections of the cross-node call path (direct.py): the same bytes on the wire as the
client's, the client's errors, and a late reply never read as the next command's."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from reach_adapters.cluster.connection import connect
from reach_adapters.cluster.direct import Direct, pack
from tests.redis_server import RedisServer


@pytest.mark.parametrize(
    "args",
    [
        ("XADD", "reach:inbox:n1", "MAXLEN", "~", 10_000, "*", "m", b'{"op":"call"}' * 700),
        ("XREAD", "COUNT", 256, "BLOCK", 1250, "STREAMS", "reach:replies:ä", b"1700000000000-3"),
        ("PEXPIRE", "k", -1),
    ],
)
def test_pack_writes_what_the_client_writes(args: tuple[str | bytes | int, ...]) -> None:
    assert pack(*args) == b"".join(Connection().pack_command(*args))


async def test_commands_answer_fail_and_time_out_as_the_clients_do(own_redis: RedisServer) -> None:
    client = connect(own_redis.url, 1.2)  # replies within 0.2 s
    direct = Direct(client)
    try:
        assert await direct.execute("ECHO", "one") == b"one"
        with pytest.raises(ResponseError):
            await direct.execute("XADD", "s", "not-an-id", "m", "x")
        assert own_redis.process is not None
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            async with asyncio.timeout(5):
                with pytest.raises(RedisTimeoutError):
                    await direct.execute("ECHO", "late")
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        # The late reply went with its connection: the next command reads its own.
        assert await direct.execute("ECHO", "two") == b"two"
    finally:
        await direct.aclose()
        await client.aclose()
