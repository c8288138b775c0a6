#!/usr/bin/env python3
"""Shim for `snapuq harness ...` (the serial harness, snapuq.harness): python host/harness.py --port URL
--model DIR ... Python puts the script's folder (host/) on sys.path, so the package imports from the
checkout without any path manipulation."""

import sys

from snapuq.commands.harness import main

if __name__ == "__main__":
    sys.exit(main())
