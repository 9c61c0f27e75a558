"""Cluster tests run against a real redis-server (see tests/redis_server.py), never a mock, and
real `reach serve` subprocesses (the gateway tests' `serve` helper)."""

from __future__ import annotations

import secrets

import pytest

from tests.gateway.conftest import serve
from tests.redis_server import RedisServer, redis_server

__all__ = ["prefix", "redis_server", "redis_url", "serve"]


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def prefix() -> str:
    """Key prefix of its own per test: clusters of different tests never see each other."""
    return f"test{secrets.token_hex(4)}:"
