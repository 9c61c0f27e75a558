"""The JSON Schemas shipped with the package: in step with the models, and true to the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from reach_adapters.config import SCHEMA_DIR, SCHEMA_FILES, SchemaKind, json_schema, load_config, schema_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config"


def shipped(kind: SchemaKind) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / SCHEMA_FILES[kind]).read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("kind", ["policy", "agent", "security"])
def test_shipped_schemas_match_the_models(kind: SchemaKind) -> None:
    # On failure, regenerate with `reach schema --write` and commit the files.
    assert (SCHEMA_DIR / SCHEMA_FILES[kind]).read_text(encoding="utf-8") == schema_text(kind)
    Draft202012Validator.check_schema(shipped(kind))


def test_every_example_file_is_valid_against_its_schema() -> None:
    files = sorted(path for path in EXAMPLE.iterdir() if path.suffix in (".yaml", ".json"))
    assert len(files) == len(load_config(EXAMPLE).agents) + 1
    for path in files:
        kind: SchemaKind = "policy" if path.stem == "routing_policy" else "agent"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        errors = list(Draft202012Validator(shipped(kind)).iter_errors(data))
        assert errors == [], f"{path.name}: {errors[0].message if errors else ''}"


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("policy", {"strategy": "fastest"}),
        ("policy", {"breaker": {"window_s": 0}}),
        ("policy", {"colour": "red"}),
        ("agent", {"kind": "function", "agent_id": "util:echo:01"}),
        ("agent", {"kind": "robot", "agent_id": "util:echo:01", "function": "json:dumps"}),
        ("agent", {"kind": "mcp", "name": "t", "command": "python", "overrides": {"x": {"name": "y"}}}),
        ("agent", {"kind": "langchain", "agent_id": "a:b:c", "runnable": "m:r", "capabilities": [{}]}),
    ],
)
def test_the_schemas_reject_what_the_loader_rejects(kind: SchemaKind, data: dict[str, Any]) -> None:
    assert not Draft202012Validator(json_schema(kind)).is_valid(data)
