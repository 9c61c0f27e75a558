"""A2A demo: an a2a-sdk agent behind the router, reached from a LangChain agent, over MCP and over A2A.

Runs offline: ``python -m examples.a2a_demo``. Needs ``make install``: the a2a, mcp, gateway and
langchain extras, ``langchain`` (``create_agent``) and LangGraph.
"""
