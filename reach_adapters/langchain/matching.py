"""Semantic matching of tasks to capabilities through any LangChain `Embeddings`."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from langchain_core.embeddings import Embeddings

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.router import Capability

__all__ = ["EmbeddingMatcher"]


class EmbeddingMatcher:
    """Scores capabilities by the cosine similarity of the task text to what they declare.

    Each declaration (name, description, keywords, examples) is embedded once and cached, keeping
    the ``cache_size`` most recently used vectors; each task costs one ``aembed_query``. Pass it
    to the router: ``Router(matcher=EmbeddingMatcher(e))``.
    Strict keywords stay hard rules: a capability whose strict keywords the text lacks scores 0.
    """

    def __init__(self, embeddings: Embeddings, *, cache_size: int = 4096) -> None:
        if not isinstance(embeddings, Embeddings):
            msg = f"EmbeddingMatcher needs a langchain_core Embeddings, got {type(embeddings).__name__}"
            raise InvalidDeclarationError(msg)
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            msg = (
                f"EmbeddingMatcher cache_size must be a positive int, got {cache_size!r}; pass how many "
                "declaration vectors to keep, best at least one per capability (default 4096)"
            )
            raise InvalidDeclarationError(msg)
        self._embeddings = embeddings
        self._cache_size = cache_size
        # Least recently used first: a hit moves its vector to the end, eviction pops the front.
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        documents = {name: describe(cap) for name, cap in capabilities.items()}
        vectors = await self._vectors_for(list(dict.fromkeys(documents.values())))
        query = await self._embeddings.aembed_query(text)
        lowered = text.lower()
        scores = []
        for name, cap in capabilities.items():
            strict = cap.strict_keywords
            if strict and not any(k.lower() in lowered for k in strict):
                scores.append((name, 0.0))
                continue
            scores.append((name, round(max(_cosine(query, vectors[documents[name]]), 0.0), 4)))
        scores.sort(key=lambda pair: -pair[1])
        return scores

    async def _vectors_for(self, docs: list[str]) -> dict[str, list[float]]:
        """The vector of each doc, from the cache or embedded now.

        They are returned apart from the cache because remembering new vectors may evict ones this
        call still needs, when there are more declarations than ``cache_size``.
        """
        vectors: dict[str, list[float]] = {}
        missing: list[str] = []
        for doc in docs:
            vector = self._vectors.get(doc)
            if vector is None:
                missing.append(doc)
            else:
                self._vectors.move_to_end(doc)
                vectors[doc] = vector
        if missing:
            for doc, vector in zip(missing, await self._embeddings.aembed_documents(missing), strict=True):
                vectors[doc] = vector
                self._remember(doc, vector)
        return vectors

    def _remember(self, doc: str, vector: list[float]) -> None:
        self._vectors[doc] = vector
        if len(self._vectors) > self._cache_size:
            self._vectors.popitem(last=False)


def describe(cap: Capability) -> str:
    """The text embedded for a capability."""
    parts = [cap.name.replace("_", " "), cap.description, *cap.keywords, *cap.examples]
    return "\n".join(part for part in parts if part)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
