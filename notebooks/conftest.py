"""nbval: `make test` runs every notebook here top to bottom (pytest --nbval-lax, see pyproject.toml).

Each runs on small committed-data defaults: analyze.ipynb and compare.ipynb on the committed demo study
(tests/fixtures/study_demo, real fio output), sweep.ipynb shows its plan without running it, the
published-table studies on data/published/. Cells marked ``# NBVAL_CHECK_OUTPUT`` are compared with
their stored output (row counts, gold values; refresh with runners/store_checked_outputs.py).

Left to other tests, because their defaults measure something (minutes of fio, or root testbeds):
"""

collect_ignore = [
    # a real fio client/server sweep on test servers; tests/test_batch.py runs it top to bottom as a
    # papermill batch with 1 s runs on two servers
    "studies/scaling.ipynb",
    # need a testbed study directory (root: loop devices, btrfs, zram); tests/test_studies_testbed.py runs
    # their cells and publishes one on a --quick run as root. Issue 9 replaces the four with one testbed.ipynb.
    "studies/rdm_vs_vmfs.ipynb",
    "studies/stripe_width.ipynb",
    "studies/consolidation.ipynb",
    "studies/fast_vs_slow.ipynb",
]
