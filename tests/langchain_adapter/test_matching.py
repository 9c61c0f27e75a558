"""Semantic capability matching through the LangChain `Embeddings` interface."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

from middleware import ReachMessage
from reach_adapters import Capability, FunctionAgent, InvalidDeclarationError, Router
from reach_adapters.langchain import EmbeddingMatcher

pytestmark = pytest.mark.timeout(20)

# Words that mean the same thing land on the same axis: a tiny, real embedding model.
_CONCEPTS = {
    "money": ("refund", "money", "reimburse", "charge", "paid"),
    "shipping": ("parcel", "package", "arrive", "delivery", "shipped", "where"),
    "legal": ("contract", "clause", "liability"),
}


class ConceptEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.documents_embedded = 0

    def _embed(self, text: str) -> list[float]:
        words = text.lower().replace("?", " ").split()
        return [
            float(sum(w.startswith(stem) for w in words for stem in stems)) for stems in _CONCEPTS.values()
        ]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_embedded += len(texts)
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def agent(agent_id: str, **cap: object) -> FunctionAgent:
    async def handle(message: ReachMessage) -> str:
        return agent_id

    return FunctionAgent(handle, agent_id=agent_id, capabilities=[Capability(**cap)])


async def test_semantic_match_routes_words_the_capability_never_declared() -> None:
    embeddings = ConceptEmbeddings()
    router = Router(matcher=EmbeddingMatcher(embeddings))
    router.register(
        agent("support:refund:01", name="refund_order", description="Give the customer their money back")
    )
    router.register(
        agent("logistics:track:01", name="track_parcel", description="Where a parcel is, when it will arrive")
    )
    result = await router.route(None, text="I was charged twice, reimburse me")
    assert result.agent_id == "support:refund:01"
    assert (await router.route(None, text="has my package shipped?")).agent_id == "logistics:track:01"
    # Declarations are embedded once, then cached.
    assert embeddings.documents_embedded == 2


async def test_strict_keywords_stay_hard_rules() -> None:
    matcher = EmbeddingMatcher(ConceptEmbeddings())
    caps = {
        "review": Capability(
            name="review", description="contract clause liability", strict_keywords=["contract"]
        )
    }
    assert await matcher.match("check this clause for liability", caps) == [("review", 0.0)]
    (scored,) = await matcher.match("check this contract clause", caps)
    assert scored[1] > 0.8


def test_needs_real_embeddings() -> None:
    with pytest.raises(InvalidDeclarationError, match="Embeddings"):
        EmbeddingMatcher(object())  # type: ignore[arg-type]
