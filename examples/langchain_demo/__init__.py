"""Two existing LangChain agents behind one router, and a supervisor that reaches them as tools.

Runs offline: every chat model is a scripted fake. ``python -m examples.langchain_demo``. Needs
``make install``: the langchain extra, ``langchain`` (``create_agent``) and LangGraph.
"""
