"""The API's JSON answers, encoded with orjson.

Starlette's `JSONResponse` encodes with the standard library, whose encoder took about 4 % of a
cluster node's CPU under load (a task's answer carries its result's payload). orjson writes the
same compact UTF-8 JSON several times faster. What it refuses (integers past 64 bits, keys that
are not strings) goes through Starlette's encoder, as everything did before. Payloads and timings
are checked JSON (finite numbers) before they get here, where both encoders agree.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette import responses

__all__ = ["JSONResponse"]


class JSONResponse(responses.JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            return super().render(content)
