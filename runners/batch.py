#!/usr/bin/env python3
"""Execute a notebook over a list of parameter sets with papermill, in parallel processes.

    runners/batch.py PARAMS.yaml --notebook NB --out DIR [--jobs N] [--report] [--kernel NAME]

This is `storagebench batch` (one batch command, one set of options): see `storagebench batch -h`.
Exit status: 0 when every set ran, 1 when any set failed, 2 for bad input (nothing ran).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storagebench.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["batch", *sys.argv[1:]])
