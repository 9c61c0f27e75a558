"""What a node counts, for `/metrics` and `reach cluster`: its leases, and the async tasks of the
cluster's queue it reclaimed, re-delivered or gave up on."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NodeStats"]


@dataclass(slots=True)
class NodeStats:
    """Counters since the node joined; `queue_depth` and `dead_letters_kept` are the last seen."""

    lease_renewals: int = 0
    lease_renewal_failures: int = 0
    remote_calls_sent: int = 0
    remote_calls_served: int = 0
    remote_calls_failed: int = 0
    # Calls to other nodes given up (cancelled or past their deadline); each sends a cancel entry.
    remote_calls_cancelled: int = 0
    tasks_run: int = 0
    tasks_reclaimed: int = 0
    tasks_redelivered: int = 0
    tasks_outcome_unknown: int = 0
    tasks_dead_lettered: int = 0
    queue_depth: int = 0
    dead_letters_kept: int = 0
