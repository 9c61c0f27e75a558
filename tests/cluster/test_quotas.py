"""Quotas across nodes (issue 15, item 5): two `reach serve` nodes of one cluster, each with the
same security.yaml, count a principal's calls together in the cluster's Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reach_adapters.security.quotas import Quotas
from reach_adapters.security.spec import PrincipalSpec
from tests.gateway.conftest import ECHO, ReachServer, write
from tests.redis_server import free_port

pytestmark = pytest.mark.timeout(120)

TOKEN = "bob-token-0123456789"
SECURITY = "principals:\n  bob: {token_env: REACH_TEST_BOB, allow: ['*'], quota_per_minute: 4}\n"


def node_dir(root: Path, name: str) -> Path:
    directory = root / name
    directory.mkdir()
    write(directory, f"util:echo:{name}.yaml", ECHO.replace("util:echo:01", f"util:echo:{name}"))
    write(directory, "security.yaml", SECURITY)
    return directory


def test_a_quota_holds_for_the_cluster_not_per_node(
    serve: Callable[..., ReachServer],
    tmp_path: Path,
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REACH_TEST_BOB", TOKEN)
    nodes = [
        serve(node_dir(tmp_path, name), "--registry", redis_url, "--node-id", name, "--lease-ttl", "3")
        for name in ("a", "b")
    ]
    # Each node alone would take 4 calls a minute; together they take 4.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"capability": "echo", "payload": {"text": "hi"}}
    codes = [nodes[i % 2].api("POST", "/route", headers=headers, json=body).status_code for i in range(6)]
    assert codes == [200, 200, 200, 200, 429, 429]
    refused = nodes[0].api("POST", "/route", headers=headers, json=body)
    assert refused.json()["error_type"] == "QuotaExceededError"
    assert int(refused.headers["Retry-After"]) >= 1


async def test_shared_quotas_count_together_and_alone_while_redis_is_out_of_reach(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    spec = PrincipalSpec.model_validate({"token_sha256": "0" * 64, "quota_per_minute": 3})
    one, two = Quotas.shared(redis_url, prefix), Quotas.shared(redis_url, prefix)
    taken = [await quotas.take("bob", spec) is None for quotas in (one, two, one, two)]
    assert taken == [True, True, True, False]
    dead = Quotas.shared(f"redis://127.0.0.1:{free_port()}/0", prefix)
    alone = [await dead.take("bob", spec) is None for _ in range(4)]
    assert alone == [True, True, True, False]
    assert caplog.text.count("counting quotas on this node alone") == 1
