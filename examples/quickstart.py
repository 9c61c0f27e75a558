"""Agent Reach in one screen: register agents, route by capability, survive a failing replica.

Run: ``python -m examples.quickstart``. Needs the base package only (``make install`` has it).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from examples.needs import require

require("examples.quickstart")

from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy  # noqa: E402


async def polish(content: str, style: str = "formal") -> dict[str, str]:
    """Polish text in a formal or casual style."""
    return {"text": content.strip().capitalize() + ("." if style == "formal" else "!")}


async def broken_polish(content: str, style: str = "formal") -> dict[str, str]:
    raise ConnectionError("writer-02 lost its model server")


def sentiment(text: str) -> dict[str, Any]:
    """Score the sentiment of a text (a sync function: it runs in a worker thread)."""
    score = sum(word in text.lower() for word in ("good", "great", "love")) / 3
    return {"sentiment": "positive" if score > 0 else "neutral", "score": round(score, 2)}


def show(title: str, value: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


async def main() -> None:
    router = Router(RoutingPolicy(backoff_ms=20.0))
    text_polish = Capability(
        name="text_polish",
        description="Polish text in a formal or casual style",
        input_schema={
            "type": "object",
            "properties": {"content": {"type": "string"}, "style": {"enum": ["formal", "casual"]}},
            "required": ["content"],
        },
        weight=80,
        max_concurrency=20,
    )
    router.register(FunctionAgent(broken_polish, agent_id="writer:polish:02", capabilities=[text_polish]))
    router.register(
        FunctionAgent(
            polish, agent_id="writer:polish:01", capabilities=[text_polish.model_copy(update={"weight": 50})]
        )
    )
    router.register(FunctionAgent(sentiment, agent_id="analysis:sentiment:01"))

    result = await router.route("text_polish", {"content": "  agents should find each other  "})
    show(
        "route text_polish (the heavier replica fails, the other one serves)", result.model_dump(mode="json")
    )
    show("explain: why it went where it went", router.explain(result.task_id).to_dict())

    bad = await router.route("text_polish", {"style": "formal"})
    show("a payload that breaks the schema is stopped before any agent runs", bad.error)

    many = await router.broadcast("sentiment", {"text": "I love this, great work"})
    show("broadcast sentiment", many.payload)

    show(
        "catalog",
        [
            {"agent": a.agent_id, "state": a.state, "breaker": a.breaker, "calls": a.calls}
            for a in router.catalog()
        ],
    )
    await router.aclose()


if __name__ == "__main__":
    asyncio.run(main())
