"""Finding the capability for a task that names none: keywords, text similarity, thresholds.

The default scorer needs no model: it compares words. Plug in embeddings (see
`reach_adapters.langchain.EmbeddingMatcher`) for semantic matching; both implement `Matcher`.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from middleware import ReachMessage
from reach_adapters.router.capability import Capability

__all__ = ["LexicalMatcher", "Matcher", "task_text", "tokens"]

# Words of letters and digits in any script, except Chinese and Japanese characters, which are
# taken one at a time so that text written without spaces matches without a segmenter.
_CJK = "\u3040-\u30ff\u3400-\u9fff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_PAYLOAD_TEXT_KEYS = ("text", "query", "question", "task", "input", "content")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def task_text(message: ReachMessage) -> str | None:
    """The text to match: ``meta_info.text``, a string payload, a text-like payload field, or the
    last user message of a chat payload (``{"messages": [...]}``)."""
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
        messages = payload.get("messages")
        # LangGraph's add_messages takes one message (a string is a user message) or a list.
        if isinstance(messages, str):
            return messages or None
        if isinstance(messages, dict | list):
            return _last_user_text(messages if isinstance(messages, list) else [messages])
    return None


def _last_user_text(messages: list[Any]) -> str | None:
    """The text of the last user message of a chat payload (role/content dicts, or LangGraph's
    [role, content] pairs)."""
    for item in reversed(messages):
        if isinstance(item, list) and len(item) == 2:
            role, content = item
        elif isinstance(item, dict):
            role, content = item.get("role", item.get("type")), item.get("content")
        else:
            continue
        if role in ("user", "human"):
            if isinstance(content, str):
                return content or None
            if isinstance(content, list):
                parts = [
                    p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict)
                ]
                return " ".join(part for part in parts if isinstance(part, str)) or None
            return None
    return None


@runtime_checkable
class Matcher(Protocol):
    """Scores how well each capability fits a task text, from 0 to 1, best first."""

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]: ...


class LexicalMatcher:
    """Model-free scores from the words a capability declares.

    Keywords match whole words and phrases, never parts of words ("syntax" does not hit
    ``tax``). A capability whose ``strict_keywords`` the text does not contain scores 0.
    Otherwise the score is the best of: keyword hits (0.75 for one, rising to 1.0 as more of
    its keywords appear), its name's words all present (0.8 alone: likely, not sure; with a
    keyword hit too, 0.25 more), and the cosine similarity of the text's words to its
    description and examples.
    """

    def __init__(self, cache_size: int = 4096) -> None:
        self._cache_size = cache_size
        self._docs: OrderedDict[int, tuple[Capability, _Doc]] = OrderedDict()

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        query = _Query(tokens(text))
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


# What the name's words alone are worth: enough to be tried among the top matches, not to be sure.
_NAME_SCORE = 0.8
_KEYWORD_SCORE = 0.75


class _Query:
    """What every capability's score needs from the task text, worked out once per match."""

    __slots__ = ("bag", "norm", "positions", "words")

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.bag = Counter(words)
        self.norm = math.sqrt(sum(c * c for c in self.bag.values()))
        self.positions: dict[str, list[int]] = {}
        for index, word in enumerate(words):
            self.positions.setdefault(word, []).append(index)

    def has(self, phrase: tuple[str, ...]) -> bool:
        """Whether the text holds `phrase` as whole words, in order and next to each other."""
        first = self.positions.get(phrase[0]) if phrase else None
        if not first:
            return False
        n = len(phrase)
        return n == 1 or any(tuple(self.words[start : start + n]) == phrase for start in first)


class _Doc:
    __slots__ = ("keywords", "name_words", "norm", "strict", "vector")

    def __init__(self, cap: Capability) -> None:
        self.name_words = set(tokens(cap.name.replace("_", " ")))
        self.keywords = _phrases(cap.keywords)
        self.strict = _phrases(cap.strict_keywords)
        self.vector = Counter(tokens(" ".join([cap.description, *cap.examples, *cap.keywords])))
        self.norm = math.sqrt(sum(v * v for v in self.vector.values()))

    def score(self, query: _Query) -> float:
        if self.strict and not any(query.has(k) for k in self.strict):
            return 0.0
        best = 0.0
        hits = sum(1 for k in self.keywords if query.has(k)) if self.keywords else 0
        if hits:
            best = _KEYWORD_SCORE + 0.25 * (hits - 1) / max(len(self.keywords) - 1, 1)
        if self.name_words and self.name_words <= query.bag.keys():
            best = max(best, _NAME_SCORE, best + 0.25 if hits else 0.0)
        if self.norm and query.bag:
            dot = sum(count * self.vector.get(word, 0) for word, count in query.bag.items())
            best = max(best, dot / (self.norm * query.norm))
        return round(min(best, 1.0), 4)


def _phrases(keywords: list[str]) -> list[tuple[str, ...]]:
    return [phrase for phrase in (tuple(tokens(k)) for k in keywords) if phrase]
