"""The JSON Schemas of the config files, generated from the models and shipped in ``schemas/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from reach_adapters.config.models import AGENT_KINDS, AgentFile, PolicyFile
from reach_adapters.security.spec import SecuritySpec

__all__ = ["SCHEMA_DIR", "SCHEMA_FILES", "SchemaKind", "json_schema", "schema_text"]

SchemaKind = Literal["policy", "agent", "security"]

SCHEMA_DIR = Path(__file__).parent / "schemas"
SCHEMA_FILES: dict[SchemaKind, str] = {
    "policy": "routing_policy.schema.json",
    "agent": "agent.schema.json",
    "security": "security.schema.json",
}

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Editors find a JSON file's schema through this key; the loader accepts and ignores it.
_SCHEMA_PROPERTY = {"type": "string", "description": "Where the file's JSON Schema is, for editors."}


def json_schema(kind: SchemaKind) -> dict[str, Any]:
    """The JSON Schema of the routing policy file, of an agent file (any kind) or of ``security.yaml``."""
    if kind in ("policy", "security"):
        model: type[BaseModel] = PolicyFile if kind == "policy" else SecuritySpec
        schema = model.model_json_schema()
        schema["properties"] = {"$schema": _SCHEMA_PROPERTY, **schema["properties"]}
        schema["title"] = f"Agent Reach {'routing policy' if kind == 'policy' else 'security'} file"
        if kind == "security":
            # `allow: [globs]` is shorthand for capability globs, accepted before validation.
            allow = schema["$defs"]["PrincipalSpec"]["properties"]["allow"]
            shorthand = {"type": "array", "items": {"type": "string"}}
            allow["anyOf"] = [{"$ref": allow.pop("$ref")}, shorthand]
    else:
        schema = TypeAdapter(AgentFile).json_schema()
        for model in AGENT_KINDS.values():
            definition = schema["$defs"][model.__name__]
            definition["properties"] = {"$schema": _SCHEMA_PROPERTY, **definition["properties"]}
        schema["title"] = "Agent Reach agent file"
    return {"$schema": _DIALECT, **schema}


def schema_text(kind: SchemaKind) -> str:
    """The schema as the checked-in file holds it."""
    return json.dumps(json_schema(kind), indent=2, ensure_ascii=False) + "\n"
