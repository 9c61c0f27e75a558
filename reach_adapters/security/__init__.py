"""Security helpers: redaction of secrets in text people read (see docs/security.md)."""

from reach_adapters.security.redact import (
    MASK,
    is_secret_name,
    redact_args,
    redact_env,
    redact_headers,
    redact_text,
    redact_url,
)

__all__ = [
    "MASK",
    "is_secret_name",
    "redact_args",
    "redact_env",
    "redact_headers",
    "redact_text",
    "redact_url",
]
