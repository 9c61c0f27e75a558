"""Chat histories stay their principal's across a hop: a near router serving alice and bob reaches
a far reach server's `RunnableWithMessageHistory` agent over A2A with its own token. The near
router scopes ``session_id`` before the call leaves, as it scopes thread ids, so the far side
(which scopes it again for the near router's principal) keeps one history per near caller."""

from __future__ import annotations

import asyncio

import pytest

from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.a2a_serve.conftest import Serve
from tests.security.test_histories import Chats, asked, chat_agent

pytestmark = pytest.mark.timeout(60)

TOKEN = "hub-token-0123456789"


async def test_two_principals_of_a_near_router_keep_their_own_far_histories(
    served: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACH_TEST_HUB", TOKEN)
    far = await served("principals:\n  hub: {token_env: REACH_TEST_HUB, allow: ['*']}\n")
    chats = Chats()
    far.gateway.router.register(chat_agent(chats.by_session()))
    spec = SecuritySpec.model_validate({"principals": {"alice": {"allow": ["*"]}, "bob": {"allow": ["*"]}}})
    async with Router(guard=SecurityGuard(spec)) as near, asyncio.timeout(40):
        near.register(await A2AAgent.connect(far.url, headers={"Authorization": f"Bearer {TOKEN}"}))
        for who, text in (("alice", "my card is 4111"), ("bob", "what did she say?")):
            result = await near.route(
                "chat", asked(text), configurable={"session_id": "chat-1"}, principal=who
            )
            assert result.ok, result.error
    assert chats.shown[-1] == ["what did she say?"], "bob was shown alice's turn"
    assert chats.told() == {
        ("hub/alice/chat-1",): ["my card is 4111"],
        ("hub/bob/chat-1",): ["what did she say?"],
    }
