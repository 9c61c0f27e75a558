"""The audit log: one JSON line per routed call, and per resource read, prompt or completion
asked of an upstream MCP server through the router's MCP server, written off the event loop.

Who called (`principal`, as security.yaml authenticated it; null without one), what was asked, which
agent answered, how it ended; never the payload. The router's loop only queues a small record;
a `logging.handlers.QueueListener` thread formats and writes it, so a slow disk never stalls
routing. The queue is bounded: when the writer falls behind, lines are dropped and counted
(`dropped`), never buffered without end.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from logging.handlers import QueueHandler, QueueListener
from pathlib import Path
from typing import cast

from middleware import ReachResult
from reach_adapters.gateway.errors import GatewayError
from reach_adapters.router import Access, Router
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.security.redact import redact_text

__all__ = ["AUDIT_QUEUE_SIZE", "AuditLog"]

AUDIT_QUEUE_SIZE = 10_000
_STDERR = "-"
# How long stopping waits for the writer to make room for its stop signal.
_STOP_TIMEOUT_S = 10.0

logger = logging.getLogger(__name__)


class _Line(logging.Formatter):
    """The record's fields as one JSON object; runs on the writer thread."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, object] = record.msg  # type: ignore[assignment]
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        return json.dumps({"time": stamp.replace("+00:00", "Z"), **fields}, ensure_ascii=False)


class _Dropping(QueueHandler):
    """Queues records as they are: formatting waits for the writer thread; a full queue drops."""

    def __init__(self, bounded: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(bounded)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class _Listener(QueueListener):
    """Waits for room for its stop signal: a full queue (a writer behind) must still stop."""

    def enqueue_sentinel(self) -> None:
        # The base puts its sentinel (None) without waiting, which raises `queue.Full`.
        cast("queue.Queue[object]", self.queue).put(None, timeout=_STOP_TIMEOUT_S)


class AuditLog:
    """An observer of a router's reaches that writes the audit log to `target` (a path, or
    ``"-"`` for stderr). Call `close` to flush what is queued and stop the writer."""

    def __init__(self, target: str | Path, *, queue_size: int = AUDIT_QUEUE_SIZE) -> None:
        self.target = str(target)
        if self.target == _STDERR:
            writer: logging.Handler = logging.StreamHandler(sys.stderr)
        else:
            try:
                writer = logging.FileHandler(self.target, encoding="utf-8")
            except OSError as exc:
                msg = f"--audit-log {self.target}: cannot open it ({exc.strerror}); give a writable file path"
                raise GatewayError(msg) from None
        writer.setFormatter(_Line())
        self._writer = writer
        self._queue: queue.Queue[logging.LogRecord] = queue.Queue(queue_size)
        self._handler = _Dropping(self._queue)
        self._listener = _Listener(self._queue, writer)
        self._listener.start()

    @property
    def dropped(self) -> int:
        """Lines dropped because the writer fell behind."""
        return self._handler.dropped

    def attach(self, router: Router) -> None:
        router.add_observer(self)

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None:
        fields = {
            "principal": record.principal,
            "capability": record.capability,
            "agent_id": result.agent_id,
            "status": result.status.value,
            "fault": None if result.fault is None else result.fault.value,
            "task_id": result.task_id,
            "trace_id": result.trace_id,
            "mode": record.mode,
            "duration_ms": round(result.timings.total_ms, 3),
        }
        self._write(fields, record.created_at)

    def on_access(self, access: Access) -> None:
        fields = {
            "principal": access.principal,
            "request": access.request,
            # A URI may carry credentials (user-info, a token parameter), as config URLs do.
            "target": redact_text(access.target),
            "agent_id": access.agent_id,
            "status": access.status,
            "fault": None if access.fault is None else access.fault.value,
            "duration_ms": round(access.duration_ms, 3),
        }
        self._write(fields, access.created_at)

    def _write(self, fields: Mapping[str, object], created_at: float) -> None:
        line = logging.LogRecord("reach_adapters.audit", logging.INFO, "", 0, fields, None, None)
        line.created = created_at
        self._handler.enqueue(line)

    def close(self) -> None:
        """Write what is queued, then stop the writer thread and close the file."""
        try:
            self._listener.stop()
        except queue.Full:
            logger.warning("audit log: the writer is stuck; %s queued lines are lost", self._queue.qsize())
        finally:
            self._writer.close()
