"""Put task_id and trace_id on every log record, and print records as JSON lines."""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from reach_adapters.router.hops import current_hop, current_reach

__all__ = ["JsonFormatter", "ReachLogFilter", "configure_logging"]

# Attributes every LogRecord has; anything else on a record came from ``extra``. uvicorn adds a
# coloured copy of some messages as ``color_message``, for its own formatter only.
_NOT_EXTRA = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}
# Terminal escape sequences (colours): a JSON line is read by programs, never by a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


class ReachLogFilter(logging.Filter):
    """Adds ``task_id``, ``trace_id`` and ``agent_id`` of the reach the code runs in (or "-").

    Attach it to handlers: any library's log line written while a task is routed or served then
    carries the ids, so one search by trace id shows the whole hop chain.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        meta = current_reach()
        hop = current_hop()
        if not hasattr(record, "task_id"):
            record.task_id = meta.task_id if meta is not None else "-"
        if not hasattr(record, "trace_id"):
            record.trace_id = meta.trace_id if meta is not None else "-"
        if not hasattr(record, "agent_id"):
            record.agent_id = hop.agent_id if hop is not None else "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and every ``extra`` field, with no
    terminal colour codes in any of them."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": _ANSI.sub("", record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _NOT_EXTRA and not key.startswith("_"):
                out[key] = _ANSI.sub("", value) if isinstance(value, str) else value
        if record.exc_info:
            out["exception"] = _ANSI.sub("", self.formatException(record.exc_info))
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(level: int | str = logging.INFO, *, json_lines: bool = False) -> logging.Handler:
    """Log to stderr with the reach ids on every line; for applications and the CLI, not libraries."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ReachLogFilter())
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter(
                "%(asctime)s %(levelname)s %(name)s [task=%(task_id)s trace=%(trace_id)s] %(message)s"
            )
        )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
