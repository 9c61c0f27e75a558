"""Export the intermediate format as JSON Schema, for agents written in other languages.

Run ``python -m middleware.schema`` to rewrite the checked-in file after changing the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from middleware.models import ReachMessage, ReachResult

__all__ = ["SCHEMA_PATH", "format_json_schema", "render_schema"]

SCHEMA_PATH = Path(__file__).with_name("reach_format.schema.json")


def format_json_schema() -> dict[str, Any]:
    """The JSON Schema of `ReachMessage` and `ReachResult`, sharing one `$defs`."""
    _, schema = models_json_schema(
        [(ReachMessage, "validation"), (ReachResult, "validation")],
        title="Agent Reach intermediate format",
    )
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["oneOf"] = [
        {"$ref": "#/$defs/ReachMessage"},
        {"$ref": "#/$defs/ReachResult"},
    ]
    return schema


def render_schema() -> str:
    return json.dumps(format_json_schema(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    SCHEMA_PATH.write_text(render_schema(), encoding="utf-8")
    sys.stdout.write(f"wrote {SCHEMA_PATH}\n")


if __name__ == "__main__":
    main()
