"""``python -m layoutjit``: the command line (see :mod:`layoutjit.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
