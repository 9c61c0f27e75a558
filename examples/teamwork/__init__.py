"""Agents working as a team, offline in a few seconds: ``python -m examples.teamwork``.

1. consensus: three agents of different kinds answer one question, one of them wrongly;
2. a chain (a saga) whose last step fails, and what it had done undone;
3. a deferred call that waits for an agent registered after it was made.
"""
