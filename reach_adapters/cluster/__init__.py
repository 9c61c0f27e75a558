"""A cluster of routers on Redis: each node leases its agents in a shared registry and lists
every node's agents from a local cache (docs/cluster.md).

Needs the ``cluster`` extra (redis-py); nothing here is imported by the embedded router.
"""

from reach_adapters.extras import require_extra

require_extra("cluster", "the cluster registry")

from reach_adapters.cluster.cache import ClusterCache, lease_state  # noqa: E402
from reach_adapters.cluster.errors import ClusterError  # noqa: E402
from reach_adapters.cluster.node import DEFAULT_LEASE_TTL_S, ClusterNode  # noqa: E402
from reach_adapters.cluster.records import Keys, LeaseRecord  # noqa: E402
from reach_adapters.cluster.remote import RemoteAgent  # noqa: E402
from reach_adapters.cluster.stats import NodeStats  # noqa: E402
from reach_adapters.cluster.transport import REMOTE_DELIVERY, Transport  # noqa: E402
from reach_adapters.cluster.worker import RemoteWorker  # noqa: E402

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "REMOTE_DELIVERY",
    "ClusterCache",
    "ClusterError",
    "ClusterNode",
    "Keys",
    "LeaseRecord",
    "NodeStats",
    "RemoteAgent",
    "RemoteWorker",
    "Transport",
    "lease_state",
]
