"""Hide secrets in text an operator or a caller reads: URLs, headers, environments, command lines.

The rules live here and only here (docs/security.md lists them):

- a *secret name* is a header, query parameter, flag, environment variable or ``key=value`` key
  whose last word (split at ``-``, ``_``, ``.`` and camelCase) is in `_SECRET_WORDS`, or that
  ends in one of `_SECRET_ENDINGS` (``PGPASSWORD``, ``X-API-Key``). ``monkey``, ``--keyword``,
  ``tokenizer``, ``token_count`` and ``sort_key`` are not secret names;
- URL user-info (``https://user:p@ss@host``, up to the last ``@``) becomes ``***``;
- the value of a secret name becomes ``***``: in ``name=value``, ``--name value``, ``--name=value``,
  ``'name': 'value'`` and ``Name: value`` (this last one only for header-like names: with a ``-``
  or ``_``, or one of `_HEADER_WORDS` — so ``missing key: user_id`` in an error stays);
  an ``Authorization`` value keeps its scheme (``Bearer ***``), and a ``Bearer <token>`` anywhere
  loses its token;
- every environment value of a server is hidden, whatever its name;
- short flags (``-p X``) are kept: ``-p`` is a port as often as a password, and no rule can tell.

The patterns are compiled once at import; text without a ``=``, ``:``, ``@`` or flag costs one
scan per pattern. Redaction runs where text is produced for a person (an error, a log line, a
health or catalog answer), never on a successful call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = [
    "MASK",
    "is_secret_name",
    "redact_args",
    "redact_env",
    "redact_headers",
    "redact_text",
    "redact_url",
]

MASK = "***"

_SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "jwt",
        "pass",
        "passphrase",
        "passwd",
        "password",
        "pat",
        "pwd",
        "secret",
        "sig",
        "signature",
        "token",
    }
)
_SECRET_ENDINGS = ("accesskey", "apikey", "passwd", "password", "privatekey", "secret", "secretkey", "token")
# Names secret only whole: ``key=...`` in a query string, not ``sort_key=...``.
_SECRET_WHOLE = frozenset({"key"})
# Single words whose ``Name: value`` is a secret in free text; other words before a colon are
# prose ("bad signature: expected ...", "missing key: user_id").
_HEADER_WORDS = frozenset({"apikey", "authorization", "cookie", "passwd", "password", "secret"})

# Word boundaries of a name: separators, and a lower-to-upper camelCase step.
_WORD_SPLIT = re.compile(r"[-_.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_NAME = r"[A-Za-z][\w.-]*"
# Greedy up to the host: a password may itself hold an ``@`` (clients split at the last one).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#]+@")
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer|basic|digest|token)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{4,}")
# ``name=value`` (query parameters, ``KEY=VALUE`` words, ``--flag=value``); the value ends at a
# separator of query strings or words, or is quoted.
_ASSIGNED = re.compile(rf"(?P<name>(?<![\w.-])-{{0,2}}{_NAME})=(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,'\"#]+)")
# ``Name: value`` (headers) and ``'name': 'value'`` (a printed dict).
_QUOTED = re.compile(rf"(?P<q>[\"'])(?P<name>{_NAME})(?P=q)(?P<sep>\s*:\s*)(?P<v>[\"'])(?P<value>.*?)(?P=v)")
_HEADER = re.compile(
    rf"(?P<name>(?<![\w.-]){_NAME})(?P<sep>:[ \t]*)"
    r"(?P<scheme>(?:bearer|basic|digest|token|negotiate)[ \t]+)?(?P<value>[^\s,;'\"]+)",
    re.IGNORECASE,
)
# ``--name value``: a long flag and the word after it, unless that word is another flag.
_FLAG = re.compile(
    rf"(?P<name>(?<![\w-])--{_NAME})(?P<sep>[ \t]+)(?P<value>(?!-)[^\s'\",;)\]}}]+|\"[^\"]*\"|'[^']*')"
)


def is_secret_name(name: str) -> bool:
    """Whether a value under `name` is a secret (see the module's rules)."""
    bare = name.lstrip("-")
    flat = re.sub(r"[-_.\s]", "", bare).lower()
    if flat.endswith(_SECRET_ENDINGS) or flat in _SECRET_WORDS or flat in _SECRET_WHOLE:
        return True
    words = [word for word in _WORD_SPLIT.split(bare) if word]
    return bool(words) and words[-1].lower() in _SECRET_WORDS


def redact_url(url: str) -> str:
    """`url` without its user-info and with secret query parameters masked."""
    return redact_text(url)


def redact_text(text: str) -> str:
    """`text` with every secret the rules recognise masked; the rest unchanged."""
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _QUOTED.sub(_quoted, text)
    text = _ASSIGNED.sub(_assigned, text)
    text = _HEADER.sub(_header, text)
    text = _FLAG.sub(_flag, text)
    return _BEARER.sub(rf"\g<scheme> {MASK}", text)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with the value of every secret-named one masked, the others' URLs cleaned."""
    return {name: MASK if is_secret_name(name) else redact_text(value) for name, value in headers.items()}


def redact_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The names of `env`, every value masked: a server's environment is where its keys go."""
    return dict.fromkeys(env or {}, MASK)


def redact_args(args: Sequence[str]) -> list[str]:
    """A command line with the values of secret flags and ``key=value`` words masked.

    ``--api-key X`` masks X (the next word), ``--token=X`` and ``token=X`` mask X; every word is
    also cleaned of URL user-info and secret query parameters.
    """
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            out.append(MASK)
            hide_next = False
            continue
        hide_next = arg.startswith("--") and "=" not in arg and is_secret_name(arg)
        out.append(redact_text(arg))
    return out


def _quoted(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]):
        return match[0]
    quote, value_quote = match["q"], match["v"]
    return f"{quote}{match['name']}{quote}{match['sep']}{value_quote}{MASK}{value_quote}"


def _assigned(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or match["value"] == MASK:
        return match[0]
    return f"{match['name']}={MASK}"


def _header(match: re.Match[str]) -> str:
    # A URL's scheme ("https://") is no header; nor is a value already masked, nor prose.
    name = match["name"]
    header_like = "-" in name or "_" in name or name.lower() in _HEADER_WORDS
    if (
        not header_like
        or match["value"].startswith("//")
        or match["value"] == MASK
        or not is_secret_name(name)
    ):
        return match[0]
    return f"{match['name']}{match['sep']}{match['scheme'] or ''}{MASK}"


def _flag(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or match["value"] == MASK:
        return match[0]
    return f"{match['name']}{match['sep']}{MASK}"
