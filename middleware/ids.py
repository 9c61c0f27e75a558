"""Identifiers for tasks and traces.

Task ids are UUIDv7-shaped: the first 48 bits are the Unix time in milliseconds, so ids sort by
creation time, which keeps logs and decision records in order without a separate timestamp.
"""

from __future__ import annotations

import itertools
import os
import random
import time

__all__ = ["MAX_ID_LENGTH", "new_task_id", "new_trace_id"]

# The longest task or trace id a message may carry.
MAX_ID_LENGTH = 128

_MASK_62 = (1 << 62) - 1
_counter = itertools.count()
# A random per-process base keeps ids from two processes apart within the same millisecond.
_node = int.from_bytes(os.urandom(8), "big") & _MASK_62


# The id's first 13 hex digits depend on the millisecond only: made once per millisecond.
_prefix: tuple[int, str] = (-1, "")


def new_task_id() -> str:
    """Return a unique, time-ordered id in UUIDv7 layout."""
    global _prefix
    ms = time.time_ns() // 1_000_000
    if _prefix[0] != ms:
        h = f"{ms:012x}"
        # One tuple, so a thread never pairs one millisecond's digits with another's.
        _prefix = (ms, f"{h[:8]}-{h[8:12]}-7")
    n = next(_counter)
    low = f"{(0b10 << 62) | ((_node + n) & _MASK_62):016x}"
    return f"{_prefix[1]}{n & 0xFFF:03x}-{low[:4]}-{low[4:]}"


def new_trace_id() -> str:
    """Return a 32-hex-digit trace id, the W3C / OpenTelemetry format.

    Trace ids need to be unique, not secret, so the fast generator serves.
    """
    return f"{random.getrandbits(128):032x}"
