"""LangChain's own standard tool tests (langchain-tests), run against the reach tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from reach_adapters import Capability, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

ROUTER = Router()


async def quote(order: dict[str, Any]) -> dict[str, Any]:
    return {"sku": order["sku"], "price": 12.5 * order.get("qty", 1)}


ROUTER.register(
    LangChainAgent(
        RunnableLambda(quote),
        agent_id="shop:quote:01",
        capabilities=[
            Capability(
                name="quote",
                description="Price an order line.",
                input_schema={
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                    "required": ["sku"],
                },
            )
        ],
    )
)
TOOLS = {tool.name: tool for tool in ReachToolkit(ROUTER).get_tools()}


@pytest.fixture(scope="module", autouse=True)
def _close_router() -> Iterator[None]:
    yield
    ROUTER.close()


class CapabilityTool:
    """The tool and arguments both standard suites run for the capability tool."""

    @property
    def tool_constructor(self) -> BaseTool:
        return TOOLS["quote"]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"sku": "kettle", "qty": 2}


class TestCapabilityToolUnit(CapabilityTool, ToolsUnitTests):
    pass


class TestCapabilityToolIntegration(CapabilityTool, ToolsIntegrationTests):
    pass


class TestGenericToolUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return TOOLS["reach_agent"]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"target": "quote", "payload": {"sku": "kettle"}}


class TestGenericToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return TOOLS["reach_agent"]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"target": "shop:quote:01", "payload": {"sku": "kettle"}}
