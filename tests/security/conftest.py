"""Secrets planted where operators put them, and the log lines captured while they are used."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from reach_adapters.observability import ReachLogFilter, RedactFilter, TextFormatter
from tests.gateway.conftest import config_dir, serve
from tests.mcp_adapter.conftest import http_calc

# Fixtures of other test packages: a config directory and `reach serve` subprocesses on it, and the
# adapter tests' calc server over streamable HTTP.
__all__ = ["config_dir", "http_calc", "serve"]

KEYED = str(Path(__file__).parent / "servers" / "keyed.py")
API_KEY = "sk-test-123"
ENV_TOKEN = "s3cr3t"
PASSWORD = "pw-9f8e7d"
QUERY_TOKEN = "tok-abc-777"
BEARER = "abc-bearer-55"
SECRETS = (API_KEY, ENV_TOKEN, PASSWORD, QUERY_TOKEN, BEARER)
KEYED_ARGS = [KEYED, "--api-key", API_KEY]
KEYED_ENV = {"API_TOKEN": ENV_TOKEN}
HEADERS = {"Authorization": f"Bearer {BEARER}"}


def secret_url(url: str) -> str:
    """`url` with user-info and a token parameter, as an operator may write it."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://alice:{PASSWORD}@{rest}?token={QUERY_TOKEN}"


def assert_no_secret(text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{leaked} leaked in:\n{text}"


class Captured:
    """Every record written through the project's logging setup, as text lines."""

    def __init__(self) -> None:
        self.stream = io.StringIO()

    @property
    def text(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def text_logs() -> Iterator[Captured]:
    """The root logger at DEBUG through the filters and formatter `configure_logging` installs."""
    captured = Captured()
    handler = logging.StreamHandler(captured.stream)
    handler.addFilter(ReachLogFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
