"""Types of the ``reach`` command's arguments: each turns one text into a value, or says what is
wrong; and the ``--option`` argument the commands that route a call share."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from reach_adapters.router.options import CallOptions

__all__ = [
    "add_call_options",
    "base_url",
    "call_options",
    "pair",
    "payload",
    "port",
    "positive",
    "text_file",
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


def text_file(text: str) -> str:
    """The UTF-8 text of the file named, read at once: a file that cannot be read stops the
    command before anything starts."""
    try:
        return Path(text).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        msg = f"cannot read {text}: {reason}"
        raise argparse.ArgumentTypeError(msg) from None


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
        help=f"call option ({examples}...); VALUE is JSON, else text (a JSON string if it starts "
        "with { or [)",
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
    return {key: _option_value(key, text) for key, text in args.options}


def _option_value(key: str, text: str) -> Any:
    """One ``--option`` VALUE, checked as the router checks it: a wrong one is the caller's usage
    mistake, refused naming the flag before any agent starts or any request is sent."""
    from reach_adapters.cli.errors import UsageError
    from reach_adapters.errors import InvalidMessageError
    from reach_adapters.router.messages import build_message

    value = _json_or_text(key, text)
    try:
        build_message(None, cast("CallOptions", {key: value}), mode="unicast")
    except InvalidMessageError as exc:
        msg = (
            f"--option {key}={text}: {exc}; give VALUE as JSON (what is not JSON goes as text), quoted "
            'for the shell as in --option \'configurable={"thread_id": "t-7"}\''
        )
        raise UsageError(msg) from None
    return value


def _json_or_text(key: str, text: str) -> Any:
    """VALUE as JSON, else as text; but one that starts like a JSON object or list is meant as
    JSON, so a mistake in it is reported rather than sent on as a string."""
    from reach_adapters.cli.errors import UsageError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith(("{", "[")):
            return text
        msg = (
            f"--option {key}={text}: VALUE starts like JSON but is not JSON ({exc.msg} at column "
            f"{exc.colno}); fix it and quote it for the shell, or give text that starts with {{ or [ "
            f"as a JSON string: --option '{key}=\"[...]\"'"
        )
        raise UsageError(msg) from None
