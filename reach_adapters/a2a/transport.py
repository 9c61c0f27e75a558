"""The HTTP client under an A2A agent's SDK client: credentials for the configured origin only,
connect and pool waits short enough to fail over, and a pool as large as the agent's concurrency.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping

import httpx

from reach_adapters.a2a.options import A2AOptions

__all__ = ["http_client", "origin"]

logger = logging.getLogger(__name__)

# httpx's own pool size: the default never goes below it.
_HTTPX_DEFAULT_POOL = 100


def origin(url: str | httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port: what a browser would call the URL's origin."""
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port


def http_client(
    url: str, headers: Mapping[str, str] | None, auth: httpx.Auth | None, options: A2AOptions
) -> httpx.AsyncClient:
    """The agent's HTTP client. `headers` and `auth` go with requests to `url`'s origin only: a
    card may name its JSON-RPC endpoint anywhere, and credentials meant for the agent the
    caller configured must not follow it elsewhere."""
    limit = options.max_connections or max(options.max_concurrency, _HTTPX_DEFAULT_POOL)
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=min(limit, 64))
    # Without credentials there is nothing to keep from other origins: httpx's own no-op flow.
    scoped = _OriginAuth(origin(url), dict(headers or {}), auth) if headers or auth is not None else None
    return httpx.AsyncClient(
        auth=scoped,
        timeout=httpx.Timeout(options.http_timeout_s),
        transport=_ShortWaits(httpx.AsyncHTTPTransport(limits=limits), options.connect_timeout_s),
    )


class _OriginAuth(httpx.Auth):
    """The configured headers, then the configured `httpx.Auth`, on requests to one origin."""

    def __init__(
        self, allowed: tuple[str, str, int | None], headers: dict[str, str], auth: httpx.Auth | None
    ) -> None:
        self._origin = allowed
        self._headers = headers
        self._auth = auth
        self.requires_request_body = bool(auth is not None and auth.requires_request_body)
        self.requires_response_body = bool(auth is not None and auth.requires_response_body)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        url = request.url  # already parsed: its origin is read, not parsed again
        if (url.scheme, url.host, url.port) != self._origin:
            yield request
            return
        request.headers.update(self._headers)
        if self._auth is None:
            yield request
            return
        flow = self._auth.async_auth_flow(request)
        sent = await anext(flow)
        while True:
            response = yield sent
            try:
                sent = await flow.asend(response)
            except StopAsyncIteration:
                return


class _ShortWaits(httpx.AsyncBaseTransport):
    """Caps a request's connect and pool waits at `connect_timeout_s` and at half its read time.

    The SDK gives every request one timeout, the call's remaining time, for all four phases. A
    call that cannot connect (a blackholed host) or get a pooled connection must fail while time
    is left to try another replica, and with an error saying nothing was sent.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, connect_timeout_s: float) -> None:
        self._inner = inner
        self._connect_s = connect_timeout_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout")
        if isinstance(timeout, dict):
            read = timeout.get("read")
            cap = self._connect_s if read is None else min(self._connect_s, read / 2)
            request.extensions["timeout"] = {
                **timeout,
                "connect": _lower(timeout.get("connect"), cap),
                "pool": _lower(timeout.get("pool"), cap),
            }
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _lower(value: float | None, cap: float) -> float:
    return cap if value is None else min(value, cap)
