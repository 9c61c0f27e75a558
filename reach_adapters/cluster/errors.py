"""Errors of the cluster: a Redis the node cannot use."""

from __future__ import annotations

from reach_adapters.errors import ReachError

__all__ = ["ClusterError"]


class ClusterError(ReachError):
    """The cluster's Redis is unusable: a malformed URL, or no answer when the node joins."""
