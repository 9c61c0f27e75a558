"""The A2A routes behind the gateway's guard, and the agent card as served: its URL (the listening
address, `public_url`, or the request's Host on 0.0.0.0) and its rendering, cached per catalog."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.server.request_handlers import response_helpers
from a2a.server.routes import agent_card_routes

from reach_adapters import Capability, FunctionAgent
from reach_adapters.a2a import router_card
from reach_adapters.config import load_config
from reach_adapters.gateway import Gateway, GatewayEndpoint, listen, serve_http
from tests.a2a_serve.agents import shout
from tests.a2a_serve.conftest import Serve

pytestmark = pytest.mark.timeout(60)

CARD = "/.well-known/agent-card.json"


def send_0_3(text: str) -> str:
    """What a web page can POST without a CORS preflight: the 0.3 method, as text/plain."""
    message = {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "metadata": {"skill": "shout"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}})


async def test_a_web_page_cannot_call_a2a_nor_read_the_card_through_a_rebound_host(served: Serve) -> None:
    server = await served()
    calls: list[str] = []
    server.gateway.router.register(shout(calls))
    page = {"Origin": "https://evil.example", "Content-Type": "text/plain;charset=UTF-8"}
    async with httpx.AsyncClient(timeout=30) as http:
        cross_site = await http.post(f"{server.url}/a2a", content=send_0_3("from a page"), headers=page)
        rebound = await http.post(
            f"{server.url}/a2a", content=send_0_3("rebound"), headers={"Host": "evil.example"}
        )
        card = await http.get(server.url + CARD, headers={"Host": "evil.example"})
        # A program (no Origin, the server's own Host) is served as before.
        direct = await http.post(f"{server.url}/a2a", content=send_0_3("direct"))
    assert (cross_site.status_code, rebound.status_code, card.status_code) == (403, 421, 421)
    assert direct.json()["result"]["status"]["state"] == "completed"
    assert calls == ["direct"]


async def test_the_card_is_rendered_once_per_catalog_and_revalidated(
    served: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered: list[int] = []
    original = response_helpers.agent_card_to_dict

    def counting(card: Any) -> dict[str, Any]:
        rendered.append(len(card.skills))
        return original(card)

    # Wherever the card is rendered (the SDK's route before, the router's card now).
    monkeypatch.setattr(agent_card_routes, "agent_card_to_dict", counting)
    monkeypatch.setattr(router_card, "agent_card_to_dict", counting, raising=False)
    server = await served()
    calls: list[str] = []
    server.gateway.router.register(shout(calls))
    async with httpx.AsyncClient(timeout=30) as http:
        first = await http.get(server.url + CARD)
        again = [await http.get(server.url + CARD) for _ in range(3)]
        revalidated = await http.get(server.url + CARD, headers={"If-None-Match": first.headers["etag"]})
        server.gateway.router.register(
            FunctionAgent(
                lambda text: text,
                agent_id="util:echo:01",
                capabilities=[Capability(name="echo", description="echo")],
            )
        )
        changed = await http.get(server.url + CARD)
    assert rendered == [1, 2]
    assert {response.content for response in again} == {first.content}
    assert {response.headers["etag"] for response in again} == {first.headers["etag"]}
    assert revalidated.status_code == 304
    assert changed.headers["etag"] != first.headers["etag"]
    assert sorted(skill["id"] for skill in changed.json()["skills"]) == ["echo", "shout"]


@pytest.fixture
async def everywhere(tmp_path: Any) -> AsyncIterator[GatewayEndpoint]:
    """A gateway listening on 0.0.0.0 (insecure: nothing to authenticate in a test)."""
    gateway = await Gateway.from_config(load_config(tmp_path))
    endpoint = await serve_http(gateway, listen("0.0.0.0", 0), insecure=True)
    try:
        yield endpoint
    finally:
        await endpoint.aclose()
        await gateway.aclose()


async def test_on_every_interface_the_card_names_the_url_it_was_asked_at(everywhere: GatewayEndpoint) -> None:
    port = everywhere.url.rsplit(":", 1)[1]
    async with httpx.AsyncClient(timeout=30) as http:
        named = await http.get(f"http://127.0.0.1:{port}{CARD}", headers={"Host": "reach.example.com:8443"})
        local = await http.get(f"http://127.0.0.1:{port}{CARD}")
    assert {one["url"] for one in named.json()["supportedInterfaces"]} == {
        "http://reach.example.com:8443/a2a"
    }
    assert {one["url"] for one in local.json()["supportedInterfaces"]} == {f"http://127.0.0.1:{port}/a2a"}


async def test_a_public_url_is_what_the_card_names(served: Serve) -> None:
    server = await served(public_url="https://reach.example.com/agents")
    async with httpx.AsyncClient(timeout=30) as http:
        card = (await http.get(server.url + CARD)).json()
    assert {one["url"] for one in card["supportedInterfaces"]} == {"https://reach.example.com/agents/a2a"}
    assert server.endpoint.a2a_url == "https://reach.example.com/agents/a2a"
