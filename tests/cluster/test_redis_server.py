"""The throwaway redis-server the cluster tests share answers, and is a real one."""

from __future__ import annotations

import redis.asyncio as redis

from tests.redis_server import RedisServer


async def test_the_session_server_answers(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert await client.ping() is True
        info = await client.info("server")
        assert int(str(info["redis_version"]).split(".")[0]) >= 7
    finally:
        await client.aclose()
