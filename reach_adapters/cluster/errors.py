"""Errors of the cluster: a Redis the node cannot use."""

from __future__ import annotations

from reach_adapters.errors import ReachError, TaskStoreUnavailableError

__all__ = ["ClusterError", "TasksUnavailableError"]


class ClusterError(ReachError):
    """The cluster's Redis is unusable: a malformed URL, or no answer when the node joins."""


class TasksUnavailableError(ClusterError, TaskStoreUnavailableError):
    """The cluster's Redis did not answer a request about async tasks (the API answers 503)."""
