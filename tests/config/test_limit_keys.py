"""The routing policy's byte bounds of the idempotency cache are config keys `reach check` validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from reach_adapters.config import ConfigFileError, load_config
from tests.gateway.conftest import ECHO, run_reach, write


def test_the_bounds_load_and_bad_ones_name_the_field(tmp_path: Path) -> None:
    write(tmp_path, "util:echo:01.yaml", ECHO)
    write(tmp_path, "routing_policy.yaml", "dedupe_max_bytes: 1048576\ndedupe_max_result_bytes: 4096\n")
    policy = load_config(tmp_path).policy
    assert (policy.dedupe_max_bytes, policy.dedupe_max_result_bytes) == (1048576, 4096)
    write(tmp_path, "routing_policy.yaml", "dedupe_max_bytes: 0\n")
    with pytest.raises(ConfigFileError, match="dedupe_max_bytes"):
        load_config(tmp_path)
    checked = run_reach("check", str(tmp_path))
    assert checked.returncode == 3
    assert "dedupe_max_bytes" in checked.stderr
