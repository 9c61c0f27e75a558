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


async def test_more_declarations_than_the_cache_holds_still_match() -> None:
    router = Router(matcher=EmbeddingMatcher(ConceptEmbeddings(), cache_size=1))
    router.register(agent("support:refund:01", name="refund_order", description="Give their money back"))
    router.register(agent("logistics:track:01", name="track_parcel", description="Where a parcel is"))
    router.register(agent("legal:review:01", name="review_contract", description="Check a contract clause"))

    for _ in range(2):
        assert (await router.route(None, text="reimburse me")).agent_id == "support:refund:01"
        assert (await router.route(None, text="is my parcel shipped")).agent_id == "logistics:track:01"


async def test_the_cache_keeps_the_vectors_used_last() -> None:
    embeddings = ConceptEmbeddings()
    matcher = EmbeddingMatcher(embeddings, cache_size=2)
    caps = {
        name: Capability(name=name, description=f"{name} things") for name in ("refund", "parcel", "contract")
    }

    await matcher.match("refund", {"refund": caps["refund"], "parcel": caps["parcel"]})
    await matcher.match("refund", {"refund": caps["refund"]})
    # Embedding a third declaration evicts the one used longest ago: parcel, not refund.
    await matcher.match("contract", {"contract": caps["contract"]})
    await matcher.match("refund", {"refund": caps["refund"]})

    assert embeddings.documents_embedded == 3


@pytest.mark.parametrize("cache_size", [0, -1, True, 2.5, "64"])
def test_the_cache_size_must_be_a_positive_int(cache_size: object) -> None:
    with pytest.raises(InvalidDeclarationError, match="cache_size must be a positive int"):
        EmbeddingMatcher(ConceptEmbeddings(), cache_size=cache_size)  # type: ignore[arg-type]
