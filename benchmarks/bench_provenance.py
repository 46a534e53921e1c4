#!/usr/bin/env python
"""What reading ``provenance.json`` through the one typed reader costs ingest (issue 9, item 3).

Ingest reads each run's ``provenance.json`` with :func:`storagebench.ingest.fio.check_provenance`, which
is :meth:`storagebench.records.Provenance.from_json` (every field type-checked, format migrated). Before,
ingest decoded five fields into a ``msgspec.Struct`` of its own and ignored the rest. Measured in the
same run, on the committed runner files (``tests/fixtures/study_demo/raw/*/provenance.json``), best of
``--repeat`` rounds:

* the baseline: the old ``msgspec`` struct decoder (its definition is copied below);
* ``check_provenance`` on the same bytes;
* ``ingest_study`` of the same study, per run, so the reader's share of ingest is printed.

Usage::

    .venv/bin/python benchmarks/bench_provenance.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Union

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storagebench.ingest import ingest_study  # noqa: E402
from storagebench.ingest.fio import check_provenance  # noqa: E402

STUDY = ROOT / "tests" / "fixtures" / "study_demo"


class _OldProv(msgspec.Struct, gc=False):
    """The struct ingest decoded before (storagebench main before issue 9 item 3)."""

    fio_version: Union[str, None] = None
    kernel: Union[str, None] = None
    hostname: Union[str, None] = None
    started_at: Union[str, None] = None
    spec_hash: Union[str, None] = None


def _best(fn, repeat: int, inner: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    files = [p.read_bytes() for p in sorted((STUDY / "raw").glob("*/provenance.json"))]
    dec = msgspec.json.Decoder(_OldProv)
    old = _best(lambda: [dec.decode(b) for b in files], args.repeat, 500) / len(files)
    new = _best(lambda: [check_provenance(b, "provenance.json") for b in files], args.repeat, 500) / len(files)
    ingest = _best(lambda: ingest_study(STUDY), args.repeat, 5) / len(files)
    print(f"per provenance.json: old msgspec struct {old * 1e6:.1f} us, check_provenance (Provenance.from_json) "
          f"{new * 1e6:.1f} us ({new / old:.0f}x the old decoder)")
    print(f"ingest_study per run: {ingest * 1e3:.2f} ms, of which the typed reader {100 * new / ingest:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
