"""Cluster tests run against a real redis-server (see tests/redis_server.py), never a mock."""

from __future__ import annotations

from tests.redis_server import redis_server

__all__ = ["redis_server"]
