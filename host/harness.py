#!/usr/bin/env python3
"""Serial harness entry point: python host/harness.py --port URL --model DIR ... (see snapuq.harness)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from snapuq.harness.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
