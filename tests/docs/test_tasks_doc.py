"""docs/tasks.md does what it says: its Python blocks run and print what their comments promise,
its security.yaml block is valid, and its receiver's check accepts what the server signs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reach_adapters import sign_callback
from reach_adapters.security.spec import SecuritySpec
from tests.docs.test_readme import python_blocks, run_block

DOC = (Path(__file__).resolve().parents[2] / "docs" / "tasks.md").read_text(encoding="utf-8")
BLOCKS = python_blocks(DOC)

pytestmark = pytest.mark.timeout(30)


def test_the_python_example_runs(capfd: pytest.CaptureFixture[str]) -> None:
    run_block(BLOCKS[0], "docs/tasks.md")
    out = capfd.readouterr().out.splitlines()
    assert out[0].endswith(" queued")
    assert out[1:3] == ["report on kettles", "cancelled"]
    assert sorted(eval(out[3])) == ["cancelled", "ok"]


def test_the_receivers_check_accepts_the_servers_signature(capfd: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "__doc_block__"}
    exec(compile(BLOCKS[1].code, "docs/tasks.md", "exec"), namespace)
    assert capfd.readouterr().out.strip() == "True False"
    verify = namespace["verify"]
    assert callable(verify)
    secret, body = b"s" * 32, b'{"task_id": "t1"}'
    assert verify(secret, body, sign_callback(secret, body))
    assert not verify(secret, body, sign_callback(secret, body, timestamp=1))


def test_the_callbacks_block_is_valid() -> None:
    block = re.search(r"^```yaml\n(?P<body>.*?)^```$", DOC, re.MULTILINE | re.DOTALL)
    assert block is not None
    spec = SecuritySpec.model_validate(yaml.safe_load(block["body"]))
    assert spec.callbacks.backoff_s == 0.5
