"""Logs and metrics around the router: task and trace ids on log records, Prometheus metrics."""

from reach_adapters.observability.logs import (
    JsonFormatter,
    ReachLogFilter,
    RedactFilter,
    TextFormatter,
    configure_logging,
)

__all__ = ["JsonFormatter", "ReachLogFilter", "RedactFilter", "TextFormatter", "configure_logging"]
