# storagebench — the two set-up commands a new user needs (README.md):
#   make demo   venv + fio + a real sweep of a file on the local disk + report.html
#   make test   venv + fio + the test suite
# Everything else is a convenience on top of those.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.storagebench-installed
# System packages: fio is required; the rest serve the Linux testbeds (loop devices,
# filesystems, btrfs raid0, network namespaces for fio servers, and nftables, whose owner match
# makes the namespaced fio servers root-only).
SYSPKGS := fio xfsprogs btrfs-progs e2fsprogs util-linux iproute2 nftables
# The tests also open the published write-ups in a real browser: Debian's chromium and its chromedriver
# (tests/test_report_browser.py skips, with the reason, where they are missing). Only `make test` needs them.
TESTPKGS := chromium chromium-driver

.PHONY: demo test test-quick lab bench bench-quick sysdeps sysdeps-test venv clean-venv

demo: venv sysdeps
	$(VENV)/bin/storagebench demo

# The test suite (tests/) and every notebook of notebooks/ run top to bottom on its small committed-data
# defaults with nbval (pyproject.toml: testpaths and --nbval-lax; the expected stdout of the checked cells
# is in tests/notebook_outputs/, written by runners/store_checked_outputs.py); the browser test saves its
# screenshots under results/screenshots/.
# Two workers (pytest-xdist): most of the suite waits on fio runs, kernels and the browser rather than
# computing. Tests that share a fixture (one fio sweep, one set of published write-ups), the cells of one
# notebook and every root test (loop devices, mounts, namespaces) each stay on one worker (conftest.py).
# Set TEST_WORKERS=0 to run in one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test: venv sysdeps sysdeps-test
	$(PY) -m pytest -q $(XDIST)

# The inner loop: no fio, no root action, no browser, no kernel (notebooks) and none of the slow tests
# (markers given by what a test uses, conftest.py): 75 s of CPU, needs neither root nor fio. In one
# process: what is left computes, so a second worker on 2 cores only adds its start-up.
QUICK = not (fio or root or browser or slow or notebook)
test-quick: venv
	$(PY) -m pytest -q -m "$(QUICK)"

# JupyterLab at the repository root (notebooks/, results/ and data/ in reach), loopback only, with the
# venv's python as the notebooks' kernel "python3". Needs fio (sweep.ipynb), not the testbed packages.
lab: venv
	@runners/ensure_system_packages.sh fio
	runners/lab.sh --no-browser

# The committed benchmarks, full size (tens of minutes) or quick (a few minutes). They print ratios
# against baselines measured in the same run; they are never timed tests.
bench: venv sysdeps
	$(PY) benchmarks/bench_ingest.py --files 2000 --mem-files 20000
	$(PY) benchmarks/bench_sweep_overhead.py --rounds 4
	$(PY) benchmarks/bench_stats.py --rows 1000000
	$(PY) benchmarks/bench_controller.py -n 4 --probe
	$(PY) benchmarks/bench_provenance.py

bench-quick: venv sysdeps
	$(PY) benchmarks/bench_ingest.py --files 200 --mem-files 2000
	$(PY) benchmarks/bench_sweep_overhead.py --rounds 1 --runtime 1
	$(PY) benchmarks/bench_stats.py --rows 100000 --groups 50 --n-boot 199
	$(PY) benchmarks/bench_controller.py -n 2 --runtime 1 --repeat 1
	$(PY) benchmarks/bench_provenance.py --repeat 3

venv: $(STAMP)

# editable_mode=compat: the venv finds the package through a path entry (a .pth with this directory), so
# Python started in the folder above a clone named storagebench imports the package, not the clone as an
# empty namespace package (setuptools' default editable finder comes after the current directory).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || runners/ensure_system_packages.sh python3-venv python3-pip
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[lab,test]' --config-settings editable_mode=compat
	@touch $@

sysdeps:
	@runners/ensure_system_packages.sh $(SYSPKGS)

sysdeps-test:
	@runners/ensure_system_packages.sh $(TESTPKGS)

clean-venv:
	rm -rf $(VENV)
