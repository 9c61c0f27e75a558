"""A cluster's key prefix holds no glob character: with ``team[1]:`` the resync's SCAN MATCH would
read another cluster's leases (``team1:``), so every way in refuses it before touching Redis."""

from __future__ import annotations

import pytest

from reach_adapters import Router
from reach_adapters.cli.app import main
from reach_adapters.cli.codes import EXIT_USAGE
from reach_adapters.cluster import ClusterError, ClusterNode, RemoteWorker
from reach_adapters.cluster.records import checked_keys

BAD = ["team[1]:", "reach*", "a?", "", "x" * 65, "a b:", "back\\slash"]


@pytest.mark.parametrize("prefix", BAD)
async def test_a_node_and_a_worker_refuse_a_prefix_with_glob_characters(redis_url: str, prefix: str) -> None:
    router = Router()
    try:
        with pytest.raises(ClusterError, match="cluster key prefix"):
            await ClusterNode.join(router, redis_url, node_id="n1", lease_ttl_s=1.2, prefix=prefix)
        with pytest.raises(ClusterError, match="no glob characters"):
            await RemoteWorker.connect(redis_url, worker_id="w1", prefix=prefix, lease_ttl_s=1.2)
    finally:
        await router.aclose()


@pytest.mark.parametrize("prefix", ["reach:", "team1:", "a.b-c_d:", "x" * 64])
def test_letters_digits_and_separators_are_kept(prefix: str) -> None:
    assert checked_keys(prefix).prefix == prefix


def test_reach_cluster_calls_it_a_usage_error(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "--registry", redis_url, "--prefix", "team[1]:"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--prefix: cluster key prefix 'team[1]:'" in err
