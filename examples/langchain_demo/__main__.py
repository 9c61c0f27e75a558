"""Register two LangChain agents unchanged, hand the router to a supervisor as tools, run a ticket."""

from __future__ import annotations

# ruff: noqa: E402
# What the demo needs is checked before it is imported: a missing package is one line saying what to run.
from examples.needs import require

require("examples.langchain_demo", "langchain_core", "langchain", "langgraph")

import asyncio
import json

from langchain_core.messages import ToolMessage

from examples.langchain_demo.agents import refund_agent, summary_chain, supervisor
from middleware import ReachResult
from reach_adapters import Capability, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

TICKET = "Order 42: the kettle arrived broken and the customer wants a refund."


def show(router: Router, result: ReachResult, indent: str = "") -> None:
    """One routed call and its decision record."""
    record = router.explain(result.task_id)
    print(
        f"{indent}routed {record.capability!r} -> {result.agent_id} [{result.status}] "
        f"in {result.timings.total_ms:.1f} ms (task {result.task_id}, trace {result.trace_id})"
    )
    for scored in record.candidates:
        parts = ", ".join(f"{k}={v:.2f}" for k, v in scored.breakdown.items())
        print(f"{indent}  candidate {scored.agent_id}: score {scored.score:.3f} ({parts})")
    for exclusion in record.exclusions:
        print(f"{indent}  excluded {exclusion.agent_id}: {exclusion.reason}")
    for attempt in record.attempts:
        print(f"{indent}  attempt {attempt.agent_id}: {attempt.status} in {attempt.elapsed_ms:.1f} ms")
    print(f"{indent}  chosen {record.chosen} via {record.path}; payload {json.dumps(result.payload)[:100]}")


async def main() -> None:
    router = Router()
    router.register(LangChainAgent(refund_agent(), agent_id="support:refund:01"))
    router.register(
        LangChainAgent(
            summary_chain(),
            agent_id="support:summary:01",
            capabilities=[
                Capability(
                    name="summarize",
                    description="Summarise a customer's message in one line.",
                    input_schema={
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    },
                    output_schema={"type": "string"},
                )
            ],
        )
    )
    tools = ReachToolkit(router).get_tools()
    print("reach tools for the supervisor:", ", ".join(tool.name for tool in tools))
    triage = LangChainAgent(
        supervisor(tools),
        agent_id="support:supervisor:01",
        capabilities=[Capability(name="triage", description="Handle a support ticket end to end.")],
    )
    router.register(triage)
    print(
        "catalog:",
        ", ".join(f"{info.agent_id} {[c.name for c in info.capabilities]}" for info in router.catalog()),
    )
    print()

    result = await router.route("triage", {"messages": [{"role": "user", "content": TICKET}]})
    show(router, result)
    # The supervisor's whole run, as LangChain messages: each reach tool call left its ReachResult.
    state = triage.converter.result_from_middleware(result)
    for message in state["messages"]:
        if isinstance(message, ToolMessage) and isinstance(message.artifact, dict):
            show(router, ReachResult.model_validate(message.artifact), indent="    ")
    print()
    print("supervisor answered:", result.payload)
    await router.aclose()


if __name__ == "__main__":
    asyncio.run(main())
