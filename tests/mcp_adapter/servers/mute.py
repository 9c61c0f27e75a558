"""A process that reads its stdin and never answers: a server that hangs in initialize."""

import sys

for _line in sys.stdin:
    pass
