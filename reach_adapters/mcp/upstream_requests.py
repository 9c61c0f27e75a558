"""Requests the router's MCP server sends its upstream MCP servers for its clients: whole
listings gathered from several servers, and the first answer one of several servers gives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CompleteResult,
    GetPromptResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
)

from reach_adapters.errors import ReachError
from reach_adapters.mcp.accesses import Answered
from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.mcp.converter import HOP_META

__all__ = ["MAX_PAGES", "first", "gather", "prompt_page", "resource_page", "template_page"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R", ReadResourceResult, GetPromptResult, CompleteResult)

# A listing is cut after this many pages of one server (saying so): cursors that never end must
# not hold a client's request forever.
MAX_PAGES = 1000


async def resource_page(client: Client, cursor: str | None) -> tuple[list[Resource], str | None]:
    page = await client.list_resources(cursor=cursor)
    return page.resources, page.next_cursor


async def template_page(client: Client, cursor: str | None) -> tuple[list[ResourceTemplate], str | None]:
    page = await client.list_resource_templates(cursor=cursor)
    return page.resource_templates, page.next_cursor


async def prompt_page(client: Client, cursor: str | None) -> tuple[list[Prompt], str | None]:
    page = await client.list_prompts(cursor=cursor)
    return page.prompts, page.next_cursor


async def gather(
    agents: list[MCPServerAgent],
    page: Callable[[Client, str | None], Awaitable[tuple[list[T], str | None]]],
    what: str,
) -> dict[str, list[T]]:
    """Each server's whole listing, by agent id; a server that fails to list is left out (and
    logged): one failing server never keeps a client from the others'."""
    answers = await asyncio.gather(*(_whole(agent, page, what) for agent in agents), return_exceptions=True)
    listed: dict[str, list[T]] = {}
    for agent, answer in zip(agents, answers, strict=True):
        if isinstance(answer, MCPError) and answer.code == METHOD_NOT_FOUND:
            # A server without that list (resource templates are optional): an empty one.
            listed[agent.agent_id] = []
        elif isinstance(answer, BaseException):
            if not isinstance(answer, ReachError | MCPError):
                raise answer
            logger.warning("MCP server %s: listing its %s failed, left out: %s", agent.agent_id, what, answer)
        else:
            listed[agent.agent_id] = answer
    return listed


async def _whole(
    agent: MCPServerAgent,
    page: Callable[[Client, str | None], Awaitable[tuple[list[T], str | None]]],
    what: str,
) -> list[T]:
    """The server's pages one after another, each a request of its own (within ``timeout_ms``),
    up to `MAX_PAGES`."""
    items: list[T] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        found, cursor = await agent.request(partial(_page_at, page, cursor))
        items += found
        if cursor is None:
            return items
    logger.warning(
        "MCP server %s: its listing of %s is cut after %d pages (%d items)",
        agent.agent_id,
        what,
        MAX_PAGES,
        len(items),
    )
    return items


async def _page_at(
    page: Callable[[Client, str | None], Awaitable[tuple[list[T], str | None]]],
    cursor: str | None,
    client: Client,
) -> tuple[list[T], str | None]:
    return await page(client, cursor)


async def first(
    agents: list[MCPServerAgent], send: Callable[[Client], Awaitable[R]], what: str, answered: Answered
) -> R:
    """The answer of the first of `agents` that gives one (`answered` says which): one that cannot
    be reached (offline, its connection lost, past its timeout) passes the request on to the next,
    as any may repeat a read; a server's own error is the answer, as it gave it."""
    errors: list[ReachError] = []
    for agent in agents:
        try:
            result = await agent.request(send)
        except ReachError as exc:
            logger.warning("MCP server %s: %s not read there: %s", agent.agent_id, what, exc)
            errors.append(exc)
            continue
        except MCPError:
            answered.agent = agent
            raise
        answered.agent = agent
        return _own(result)
    if not errors:
        msg = f"Unknown {what}: no MCP server of this router offers it"
        raise MCPError(INVALID_PARAMS, msg)
    msg = f"{what} cannot be read now: {errors[0]}"
    raise MCPError(INTERNAL_ERROR, msg)


def _own(result: R) -> R:
    """`result` without the `_meta` of its hop (the upstream's server info, say): the router's
    server answers with its own."""
    meta = result.meta
    if meta:
        result.meta = {key: value for key, value in meta.items() if not key.startswith(HOP_META)} or None
    return result
