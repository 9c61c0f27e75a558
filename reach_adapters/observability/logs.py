"""Put task_id and trace_id on every log record, mask secrets in it, and print records as text or
JSON lines that a caller cannot forge."""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from reach_adapters.router.hops import current_hop, current_reach
from reach_adapters.security import redact_text

__all__ = ["JsonFormatter", "ReachLogFilter", "RedactFilter", "TextFormatter", "configure_logging"]

# Attributes every LogRecord has; anything else on a record came from ``extra``. uvicorn adds a
# coloured copy of some messages as ``color_message``, for its own formatter only.
_NOT_EXTRA = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}
# Terminal escape sequences (colours): a JSON line is read by programs, never by a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Control characters a text line must not carry as they are: a newline in a capability name or an
# error would start a forged line, an escape sequence would rewrite the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x80-\x9f]")
_TEXT_FORMAT = (
    "%(asctime)s %(levelname)s %(name)s [task=%(task_id)s trace=%(trace_id)s principal=%(principal)s] "
    "%(message)s"
)


class ReachLogFilter(logging.Filter):
    """Adds ``task_id``, ``trace_id``, ``agent_id`` and ``principal`` of the reach the code runs in
    (or "-").

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
        if not hasattr(record, "principal"):
            record.principal = (meta.principal if meta is not None else None) or "-"
        return True


class RedactFilter(logging.Filter):
    """Masks secrets (see `reach_adapters.security`) in the message and ``extra`` text of records;
    the formatters here mask the tracebacks.

    Attach it to handlers, not loggers: it then runs only for records that are written, so a
    disabled level costs nothing. The message is formatted here once, and its arguments dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        for key, value in record.__dict__.items():
            if isinstance(value, str) and key not in _NOT_EXTRA and not key.startswith("_"):
                record.__dict__[key] = redact_text(value)
        return True


class TextFormatter(logging.Formatter):
    """One text line per record with the reach ids; control characters in it are escaped
    (``\\n``, ``\\x1b``), so no caller-chosen text can start a line of its own. A traceback
    follows on lines of its own, each indented."""

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached the traceback as it printed it, unmasked and unindented.
        cached = record.exc_text
        record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return _CONTROL.sub(_escaped, super().formatMessage(record))

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return _indented(redact_text(super().formatException(ei)))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return _indented(stack_info)


def _escaped(match: re.Match[str]) -> str:
    return repr(match[0])[1:-1]


def _indented(text: str) -> str:
    return "\n".join("    " + _CONTROL.sub(_escaped, line) for line in text.splitlines())


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
            out["exception"] = _ANSI.sub("", redact_text(self.formatException(record.exc_info)))
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(level: int | str = logging.INFO, *, json_lines: bool = False) -> logging.Handler:
    """Log to stderr with the reach ids on every line; for applications and the CLI, not libraries."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ReachLogFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
