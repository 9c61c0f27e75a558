"""Talk to a running ``reach serve`` through its HTTP API."""

from __future__ import annotations

from typing import Any

import httpx

from reach_adapters.cli.errors import UsageError
from reach_adapters.errors import InvalidMessageError, PayloadValidationError, ReachError, UnknownTaskError
from reach_adapters.gateway import API_PREFIX, MCP_PATH, GatewayError

__all__ = ["Remote", "ServerUnreachableError"]

_ERRORS: dict[str, type[ReachError]] = {
    cls.__name__: cls for cls in (InvalidMessageError, PayloadValidationError, UnknownTaskError)
}


class ServerUnreachableError(GatewayError):
    """No reach server answers at the URL given."""


class Remote:
    """A running server, by its base URL (the ``url=`` of its ready line; ``/api`` or ``/mcp``
    at the end are accepted too)."""

    def __init__(self, url: str, *, timeout_s: float, token: str | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            msg = (
                f"--url {url}: not an http:// or https:// URL; give --url (or $REACH_URL) the url= of a "
                "`reach serve` ready line, such as http://127.0.0.1:8000"
            )
            raise UsageError(msg)
        base = url.rstrip("/")
        for suffix in (API_PREFIX, MCP_PATH):
            base = base.removesuffix(suffix)
        self.url = base
        self._timeout = httpx.Timeout(timeout_s)
        self._headers = {} if token is None else {"Authorization": f"Bearer {token}"}

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return self._request("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self._request("DELETE", path)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.url}{API_PREFIX}{path}"
        try:
            with httpx.Client(timeout=self._timeout, headers=self._headers) as client:
                response = client.request(method, url, **kwargs)
        except httpx.TimeoutException:
            msg = f"the server at {self.url} did not answer within the timeout; raise --timeout"
            raise ServerUnreachableError(msg) from None
        except httpx.TransportError as exc:
            msg = (
                f"cannot reach a reach server at {self.url} ({type(exc).__name__}: {exc}); start one "
                "with `reach serve CONFIG_DIR`, or fix --url"
            )
            raise ServerUnreachableError(msg) from None
        try:
            body = response.json()
        except ValueError:
            msg = f"{url} answered {response.status_code} without JSON; is --url a reach server?"
            raise ServerUnreachableError(msg) from None
        if response.is_success:
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, str):
            msg = f"{url} answered {response.status_code}: {body}"
            raise ServerUnreachableError(msg)
        raise _ERRORS.get(str(body.get("error_type")), ReachError)(error)
