"""``reach schema``: the JSON Schemas of config files."""

from __future__ import annotations

import argparse
import sys
from typing import get_args

from reach_adapters.cli.codes import EXIT_OK
from reach_adapters.config import SCHEMA_DIR, SCHEMA_FILES, SchemaKind, schema_text

__all__ = ["run_schema"]


def run_schema(args: argparse.Namespace) -> int:
    if not args.write:
        sys.stdout.write(schema_text(args.kind))
        return EXIT_OK
    for kind in get_args(SchemaKind):
        path = SCHEMA_DIR / SCHEMA_FILES[kind]
        path.write_text(schema_text(kind), encoding="utf-8")
        print(f"wrote {path}")
    return EXIT_OK
