"""The signature on a task's callback, so its receiver knows the router sent it (Stripe's scheme).

``Reach-Signature: t=<unix seconds>,v1=<hex>``, where the hex is HMAC-SHA256, keyed with the
shared secret, of ``"<t>." + body``. Signing the time with the body lets a receiver refuse a
replayed callback older than its tolerance. Standard library only: receivers need nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["SIGNATURE_HEADER", "sign_callback", "verify_callback"]

SIGNATURE_HEADER = "Reach-Signature"


def sign_callback(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """The ``Reach-Signature`` header value for `body`, sent at `timestamp` (default: now)."""
    at = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret, f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def verify_callback(secret: bytes, body: bytes, header: str, *, tolerance_s: float = 300.0) -> bool:
    """Whether `header` signs `body` with `secret`, made within `tolerance_s` of now."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    stamp = fields.get("t", "")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > tolerance_s:
        return False
    expected = sign_callback(secret, body, int(stamp))
    return hmac.compare_digest(expected.encode(), f"t={stamp},v1={fields.get('v1', '')}".encode())
