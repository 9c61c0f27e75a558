"""``python -m reach_adapters.cli``: the ``reach`` command without its script."""

import sys

from reach_adapters.cli import main

sys.exit(main())
