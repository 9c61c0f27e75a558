"""The `reach serve` fixtures of the gateway tests, for the served consensus tests."""

from tests.gateway.conftest import config_dir, serve

__all__ = ["config_dir", "serve"]
