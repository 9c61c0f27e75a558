"""Types of the ``reach`` command's arguments: each turns one text into a value, or says what is
wrong; and the ``--option`` argument the commands that route a call share."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "add_call_options",
    "base_url",
    "call_options",
    "json_or_text",
    "pair",
    "payload",
    "port",
    "positive",
]


def port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        msg = f"{text!r} is not a port; give a whole number from 0 (any free port) to 65535"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        msg = f"{text!r} is not a positive number of seconds"
        raise argparse.ArgumentTypeError(msg)
    return value


def base_url(text: str) -> str:
    """An http(s) URL with a host and nothing after its path, such as https://reach.example.com."""
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
    ):
        msg = f"{text!r} is not a base URL; give one like https://reach.example.com"
        raise argparse.ArgumentTypeError(msg)
    return text.rstrip("/")


def pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        msg = f"{text!r} is not KEY=VALUE"
        raise argparse.ArgumentTypeError(msg)
    return key, value


def payload(text: str) -> Any:
    raw = sys.stdin.read() if text == "-" else text
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        msg = f'not JSON ({exc.msg} at column {exc.colno}); quote it for the shell: \'{{"text": "hi"}}\''
        raise argparse.ArgumentTypeError(msg) from None


def json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def add_call_options(parser: argparse.ArgumentParser, examples: str) -> None:
    """``--option KEY=VALUE``, repeatable, into ``args.options``; `examples` names a few keys. And
    ``--defer``, the same as ``--option defer=true``."""
    parser.add_argument(
        "--option",
        dest="options",
        type=pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"call option ({examples}...); VALUE is JSON or text",
    )
    parser.add_argument(
        "--defer",
        dest="options",
        action="append_const",
        const=("defer", "true"),
        help="when no agent can serve now, wait for one to come, within the deadline (docs/reliability.md)",
    )


def call_options(args: argparse.Namespace, arguments: str) -> dict[str, Any]:
    """The ``--option`` pairs as the call's options, refused as a usage mistake when they name
    the request's own fields (given as `arguments`, which the message names) or what the API
    does not take."""
    from reach_adapters.cli.errors import UsageError
    from reach_adapters.gateway.api import REQUEST_FIELDS, option_problem

    names = {key for key, _ in args.options}
    clash = sorted(names & REQUEST_FIELDS)
    if clash:
        msg = f"--option cannot set {clash}: give {arguments} as arguments"
        raise UsageError(msg)
    problem = option_problem(names)
    if problem is not None:
        msg = f"--option: {problem}"
        raise UsageError(msg)
    return {key: json_or_text(value) for key, value in args.options}
