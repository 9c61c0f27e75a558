"""The LangChain adapter: Runnables as routable agents, and the router as LangChain tools.

Needs the ``langchain`` extra: ``pip install 'agent-reach[langchain]'``.
"""

# ruff: noqa: E402
# The extra is checked first, so that its absence is one line naming the install, not a traceback.
from reach_adapters.extras import require_extra

require_extra("langchain", "reach_adapters.langchain")

from reach_adapters.langchain.agent import LangChainAgent
from reach_adapters.langchain.convert import ChunkConverter, LangChainConverter
from reach_adapters.langchain.matching import EmbeddingMatcher
from reach_adapters.langchain.toolkit import ReachToolkit
from reach_adapters.langchain.tools import CapabilityTool, ReachAnyTool, ReachTool

__all__ = [
    "CapabilityTool",
    "ChunkConverter",
    "EmbeddingMatcher",
    "LangChainAgent",
    "LangChainConverter",
    "ReachAnyTool",
    "ReachTool",
    "ReachToolkit",
]
