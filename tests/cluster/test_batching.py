"""`ScriptBatch`: script calls and commands of one loop turn share a pipeline, yet each gets its
own reply or error, and a Redis that lost its scripts (restarted, flushed) is given them again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as redis
from redis.exceptions import ResponseError

from reach_adapters.cluster.batching import ScriptBatch
from tests.redis_server import node_client

pytestmark = pytest.mark.timeout(30)

# KEYS: a counter. ARGV: a step, or 'fail'. The counter after the step.
_STEP = """
if ARGV[1] == 'fail' then return redis.error_reply('refused on purpose') end
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[redis.Redis]:
    client = node_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def batch(client: redis.Redis) -> AsyncIterator[ScriptBatch]:
    batch = ScriptBatch(client)
    yield batch
    await batch.aclose()


async def test_calls_of_one_turn_each_get_their_own_reply_or_error(
    client: redis.Redis, batch: ScriptBatch, prefix: str
) -> None:
    step = client.register_script(_STEP)
    counter = f"{prefix}counter"
    calls = [batch.run(step, [counter], [1]) for _ in range(20)]
    calls.insert(7, batch.run(step, [counter], ["fail"]))
    replies = await asyncio.gather(*calls, return_exceptions=True)
    refused = replies.pop(7)
    assert isinstance(refused, ResponseError)
    assert "refused on purpose" in str(refused)
    # One after the other, in the order they were made.
    assert replies == list(range(1, 21))


async def test_scripts_lost_by_redis_are_loaded_again(
    client: redis.Redis, batch: ScriptBatch, prefix: str
) -> None:
    step = client.register_script(_STEP)
    counter = f"{prefix}counter"
    assert await batch.run(step, [counter], [1]) == 1
    await client.script_flush()
    replies = await asyncio.gather(*(batch.run(step, [counter], [1]) for _ in range(5)))
    assert sorted(replies) == [2, 3, 4, 5, 6]
    await client.script_flush()
    assert await batch.run(step, [counter], [1]) == 7


async def test_a_caller_that_leaves_does_not_disturb_the_others(
    client: redis.Redis, batch: ScriptBatch, prefix: str
) -> None:
    step = client.register_script(_STEP)
    counter = f"{prefix}counter"
    leaving = asyncio.create_task(batch.run(step, [counter], [1]))
    staying = asyncio.create_task(batch.run(step, [counter], [1]))
    await asyncio.sleep(0)  # both joined the turn's batch
    leaving.cancel()
    assert await staying in (1, 2)
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def test_plain_commands_join_the_turn_with_their_raw_replies(
    batch: ScriptBatch, client: redis.Redis, prefix: str
) -> None:
    step = client.register_script(_STEP)
    counter, missing = f"{prefix}counter", f"{prefix}missing"
    replies = await asyncio.gather(
        batch.run(step, [counter], [5]),
        batch.command("GET", counter),
        batch.command("GET", missing),
        batch.command("HGET", counter, "field"),
        return_exceptions=True,
    )
    assert list(replies[:3]) == [5, b"5", None]
    assert isinstance(replies[3], ResponseError)  # WRONGTYPE: one command's error is its own
