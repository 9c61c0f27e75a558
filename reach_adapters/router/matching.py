"""Finding the capability for a task that names none: keywords, text similarity, thresholds.

The default scorer needs no model: it compares words. Plug in embeddings (see
`reach_adapters.langchain.EmbeddingMatcher`) for semantic matching; both implement `Matcher`.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from middleware import ReachMessage
from reach_adapters.router.capability import Capability

__all__ = ["LexicalMatcher", "Matcher", "task_text", "tokens"]

# ASCII words, or single CJK characters so that Chinese text matches without a segmenter.
_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]")
_PAYLOAD_TEXT_KEYS = ("text", "query", "question", "task", "input", "content")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def task_text(message: ReachMessage) -> str | None:
    """The text to match: ``meta_info.text``, a string payload, or a text-like payload field."""
    if message.meta_info.text:
        return message.meta_info.text
    payload = message.raw_payload
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        for key in _PAYLOAD_TEXT_KEYS:
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
    return None


@runtime_checkable
class Matcher(Protocol):
    """Scores how well each capability fits a task text, from 0 to 1, best first."""

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]: ...


class LexicalMatcher:
    """Model-free scores from the words a capability declares.

    A capability whose ``strict_keywords`` the text does not contain scores 0. Otherwise the score
    is the best of: its name's words all present (1.0), keyword hits (0.75 for one, rising to 1.0
    as more of its keywords appear), and the cosine similarity of the text's words to its
    description and examples.
    """

    def __init__(self, cache_size: int = 4096) -> None:
        self._cache_size = cache_size
        self._docs: OrderedDict[int, tuple[Capability, _Doc]] = OrderedDict()

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        words = tokens(text)
        query = _Query(text.lower(), set(words), Counter(words))
        scores = [(name, self._doc(cap).score(query)) for name, cap in capabilities.items()]
        scores.sort(key=lambda pair: -pair[1])
        return scores

    def _doc(self, cap: Capability) -> _Doc:
        entry = self._docs.get(id(cap))
        # The capability is kept in the entry, so its id cannot be reused while cached.
        if entry is not None and entry[0] is cap:
            self._docs.move_to_end(id(cap))
            return entry[1]
        doc = _Doc(cap)
        self._docs[id(cap)] = (cap, doc)
        if len(self._docs) > self._cache_size:
            self._docs.popitem(last=False)
        return doc


class _Query:
    """What every capability's score needs from the task text, worked out once per match."""

    __slots__ = ("bag", "lowered", "norm", "present")

    def __init__(self, lowered: str, present: set[str], bag: Counter[str]) -> None:
        self.lowered = lowered
        self.present = present
        self.bag = bag
        self.norm = math.sqrt(sum(c * c for c in bag.values()))


class _Doc:
    __slots__ = ("keywords", "name_words", "norm", "strict", "vector")

    def __init__(self, cap: Capability) -> None:
        self.name_words = set(tokens(cap.name.replace("_", " ")))
        self.keywords = [k.lower() for k in cap.keywords]
        self.strict = [k.lower() for k in cap.strict_keywords]
        self.vector = Counter(tokens(" ".join([cap.description, *cap.examples, *cap.keywords])))
        self.norm = math.sqrt(sum(v * v for v in self.vector.values()))

    def score(self, query: _Query) -> float:
        lowered = query.lowered
        if self.strict and not any(k in lowered for k in self.strict):
            return 0.0
        best = 1.0 if self.name_words and self.name_words <= query.present else 0.0
        if self.keywords:
            hits = sum(1 for k in self.keywords if k in lowered)
            if hits:
                best = max(best, 0.75 + 0.25 * (hits - 1) / max(len(self.keywords) - 1, 1))
        if self.norm and query.bag:
            dot = sum(count * self.vector.get(word, 0) for word, count in query.bag.items())
            cosine = dot / (self.norm * query.norm)
            best = max(best, cosine)
        return round(min(best, 1.0), 4)
