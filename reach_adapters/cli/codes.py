"""The CLI's exit codes (docs/cli.md lists them)."""

from __future__ import annotations

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
]

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and the answer is a failure: a call not ok, an unknown task
EXIT_USAGE = 2  # a flag or argument is wrong (argparse's own code)
EXIT_CONFIG = 3  # the config directory is invalid, or an agent it describes cannot be built
EXIT_UNAVAILABLE = 4  # cannot serve or connect: a port in use, a server that does not answer
EXIT_INTERRUPTED = 130
EXIT_OUTPUT_CLOSED = 141  # what reads the output closed it early (| head): 128 + SIGPIPE, as a shell says
