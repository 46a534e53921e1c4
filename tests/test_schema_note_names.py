"""schema.NoteNames: the fast form of the table gate's "a NaN's note names its column" rule gives exactly
:func:`storagebench.schema.note_pattern`'s answer (it only skips the part of the note before the first
place one of the column's words is written)."""

from __future__ import annotations

import random

import pytest

from storagebench import schema

METRICS = [c for c in schema.RUNS if c.valid is not None and c.valid.metric]

#: notes that put the words where the whole-word rule decides: at the start and end of the note, glued to a
#: letter, digit or ``_`` on either side, first glued then free, a longer name containing a shorter one
NOTES = [
    "", "iops", "iops NaN", "xiops", "iops_", "_iops", "2iops", "iopsx iops", "iopsx", "liops; iops",
    "lat_mean_ns", "clat_mean_ns NaN", "clat_mean_ns, lat_mean_ns", "slat_mean_ns", "lat_*_ns NaN",
    "clat_*_ns", "xclat_*_ns", "clat_p*_ns;", "clat_p99_5_ns", "clat_p99_5_nsx clat_p99_5_ns",
    "usr_cpu_pct, sys_cpu_pct NaN", "sys_cpu_pctx", "(usr_cpu_pct)", "é iops", "iopsé", "runtime_s.",
    "DiskSPD latency is issue-to-completion (fio lat): clat_mean_ns, clat_stdev_ns, slat_mean_ns NaN; its "
    "CPU use is per processor, not per job (usr_cpu_pct, sys_cpu_pct NaN)",
]


def _random_notes(n: int, seed: int = 21) -> list[str]:
    rng = random.Random(seed)
    words = [w for c in METRICS for w in (c.name, *c.valid.names)]
    glue = ["", " ", "_", "x", "1", ";", ", ", "(", ")", "é", "*"]
    return ["".join(rng.choice(glue) + (rng.choice(words) if rng.random() < 0.7 else rng.choice(glue))
                    for _ in range(rng.randint(1, 5))) for _ in range(n)]


@pytest.mark.parametrize("col", METRICS, ids=lambda c: c.name)
def test_note_names_answers_as_the_note_pattern(col):
    names, pattern = schema.NoteNames(col), schema.note_pattern(col)
    notes = NOTES + _random_notes(400)
    answers = [names(n) for n in notes]
    assert answers == [pattern.search(n) is not None for n in notes]
    assert [names(n) for n in reversed(notes)] == answers[::-1]  # asked again: the answers it keeps
    assert any(answers) and not all(answers)  # both answers occur for every column
