"""Entry point: ``python -m perf`` (run from the repository root)."""

import sys

from .cli import main

sys.exit(main())
