"""Adaptive precision with set-ups (issue 21 item 1 on the testbed studies): ``precision:`` with ``setups > 1``.

Statistics named before the tests: the experimental unit is the set-up (one fresh build of an arm's testbed);
a point's value on a set-up is the geometric mean of its runs there; the estimand of a point is the geometric
mean over its set-ups, of a comparison the ratio of geometric means other/baseline (paired t on the per-block
log ratios with ``blocks: true``, Welch t on log set-up values without: the fixed design's own analysis,
:func:`storagebench.stats.compare` with ``unit="setup"``); n in every stopping rule counts set-ups (blocks when
paired); the family of each stopping test is the one comparison.

The testbeds here are files (a build is a fresh directory), so the tests run without root; the known answer of
the real sweep is fio's own rate cap (``rate_iops`` 100 vs 200: ratio 2).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storagebench._adaptive import comparisons, decide, point_key, time_text
from storagebench._precision import NO_SPREAD, read_precision, rule_words
from storagebench._runner import SetUp
from storagebench._runrounds import PRECISION_FILE, read_values, replay
from storagebench._study import load_study
from storagebench.errors import SchemaError, StudyError
from storagebench.stats.sequential import comparison_decision

ROOT = Path(__file__).resolve().parents[1]


def _spec(blocks: bool = True, **precision) -> dict:
    return {"name": "ads", "factors": {"device": [{"name": "low", "target": "low", "rate_iops": 100},
                                                  {"name": "high", "target": "high", "rate_iops": 200}]},
            "fixed": {"rw": "randread", "bs": "4k", "ioengine": "psync"}, "runtime": 1, "size": "1m", "seed": 3,
            "setups": 2, "setup_factors": ["device"], "blocks": blocks,
            **({"precision": precision} if precision else {})}


# ---- the design: the rule counts set-ups ----------------------------------------------------------------

def test_precision_with_setups_plans_max_repetitions_setups_with_the_fixed_designs_run_ids():
    adaptive = load_study(_spec(compare="device", max_repetitions=6))
    assert adaptive.adaptive_setups and adaptive.plan_setups == 6 and adaptive.plan_repetitions == 1
    plan = adaptive.expand()
    assert len(plan) == adaptive.n_runs == 2 * 6 and {p.setup for p in plan} == set(range(1, 7))
    assert all(p.block == p.setup for p in plan)  # blocks: block b = set-up b of every arm
    fixed = load_study({**_spec(), "setups": 4}).expand()
    ids = {(point_key(p.factors), p.setup): p.run_id for p in plan}
    assert all(ids[(point_key(p.factors), p.setup)] == p.run_id for p in fixed)  # set-up k: one id, fixed or adaptive
    # repetitions stay the runs per set-up (allowed with set-ups, refused without)
    two = load_study({**_spec(compare="device", max_repetitions=4), "repetitions": 2})
    assert two.plan_repetitions == 2 and len(two.expand()) == 2 * 4 * 2


@pytest.mark.parametrize("over, words", [
    ({"concurrent": ["iodepth"], "factors": {**_spec()["factors"], "iodepth": [1, 2]},
      "precision": {"compare": "iodepth"}}, "precision.compare: 'iodepth' is in concurrent: its levels run at the "
                                            "same time, on one host and testbed, so they are not independent arms"),
    ({"precision": {"compare": "devcie"}}, "precision.compare: 'devcie' is not a factor of this study (did you mean "
                                           "'device'?)"),
    ({"precision": {"compare": "device", "min_repetitions": 1}}, "precision.min_repetitions: must be an integer "
                                                                 "from 2"),
])
def test_bad_precision_with_setups_is_refused_by_name(over, words):
    with pytest.raises(StudyError) as exc:
        load_study({**_spec(compare="device"), **over})
    assert words in str(exc.value)


def test_a_testbed_with_one_setup_and_precision_is_refused_before_anything_runs(tmp_path):
    from storagebench import run_study

    study = load_study({**_spec(compare="device"), "setups": 1, "setup_factors": [], "blocks": False})

    @contextlib.contextmanager
    def never(unit):  # pragma: no cover - must not be called
        raise AssertionError("built")
        yield

    with pytest.raises(StudyError, match="precision with a testbed counts set-ups .* needs setups > 1"):
        run_study(study, out_dir=tmp_path, testbed=never, progress=False)
    assert not (tmp_path / "ads").exists()


def test_dry_run_gives_builds_and_fio_time_with_setups(tmp_path):
    lines = "\n".join(time_text(load_study(_spec(compare="device", max_repetitions=8, assumed_cv=0.3))))
    assert "the set-up as the unit: 3 to 8 set-ups per arm (2 arm(s) of device; min_repetitions/max_repetitions " \
           "count set-ups; setups: 2 is replaced by them)" in lines
    assert "at least: 6 builds, 6 runs, fio time 0:00:06" in lines
    assert "at most:  16 builds, 16 runs, fio time 0:00:16 (max_repetitions)" in lines
    assert "expected: 8 set-ups per arm = 16 builds" in lines  # CV 0.3: the budget
    spec = tmp_path / "ads.yaml"
    spec.write_text(json.dumps({**_spec(compare="device", max_repetitions=8), "repetitions": 2}))
    out = subprocess.run([sys.executable, "-m", "storagebench.cli", "run", str(spec), "--dry-run", "--out",
                          str(tmp_path / "res")], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "2 run(s) per point and set-up" in out.stdout and "at most:  16 builds, 32 runs, fio time 0:00:32" \
        in out.stdout
    assert not (tmp_path / "res").exists()


# ---- the decisions: paired on blocks as the fixed analysis pairs -------------------------------------

def test_paired_decision_uses_the_blocks_the_welch_one_cannot():
    rng = np.random.default_rng(7)
    block = np.exp(rng.normal(0, 0.3, 6))  # large set-up-to-set-up effects shared by the block
    y = 100 * block * np.exp(rng.normal(0, 0.005, 6))
    x = 1.03 * 100 * block * np.exp(rng.normal(0, 0.005, 6))
    nominal = (0.01, 0.005)
    assert comparison_decision(x, y, nominal, paired=True) == "different"
    assert comparison_decision(x, y, nominal) is None  # the same values as independent arms: not decided
    # decide(): pairs are the rounds both arms have; a round one arm lacks is left out of the comparison
    points = [{"device": "low"}, {"device": "high"}]
    comps = comparisons(points, "device", ["low", "high"])
    keys = [point_key(p) for p in points]
    values = {keys[0]: {r + 1: float(v) for r, v in enumerate(y)},
              keys[1]: {r + 1: float(v) for r, v in enumerate(x) if r != 2}}
    rule = {"compare": "device", "alpha": 0.05, "min_repetitions": 3, "max_repetitions": 6, "metric": "iops",
            "confidence": 0.95}
    paired = decide(rule, keys, comps, values, 7, paired=True).verdicts["device=high vs low"]
    welch = decide(rule, keys, comps, values, 7).verdicts["device=high vs low"]
    assert paired["n"] <= 5 and welch["decision"] is None and welch["n"] == 5
    assert paired["decision"] == "different" and 1.0 < paired["ci_low"] < paired["ratio"] < paired["ci_high"]


def test_comparisons_leave_out_the_target_a_levels_picks():
    pts = [{"device": "low", "target": "low", "bs": "4k"}, {"device": "high", "target": "high", "bs": "4k"}]
    assert comparisons(pts, "device", ["low", "high"]) == ()  # target differs: no "other factors" in common
    (c,) = comparisons(pts, "device", ["low", "high"], derived=("target",))
    assert c.label() == "device=high vs low at bs=4k"


# ---- the runner: rounds of builds, real fio ---------------------------------------------------------

def _file_testbed(root: Path, builds: list):
    """A build is a fresh directory with one file per device level (no root needed)."""
    @contextlib.contextmanager
    def testbed(unit):
        d = root / f"build-{len(builds)}"
        d.mkdir(parents=True)
        builds.append({"setup": unit.setup, "block": unit.block, "arm": dict(unit.arm), "run_ids": unit.run_ids})
        yield SetUp(targets={"low": str(d / "low.dat"), "high": str(d / "high.dat")})
    return testbed


def _arm_of(plan, run_id: str) -> str:
    (arm,) = {p.factors["device"] for p in plan if p.run_id == run_id}
    return arm


def _complete(raw: Path) -> set[str]:
    return {p.name for p in raw.iterdir() if not p.name.startswith(".")} if raw.is_dir() else set()


def test_adaptive_setups_build_one_setup_per_unfinished_arm_per_round(tmp_path, fio_bin):
    """Real fio, rate-capped files (truth: high/low = 2): without blocks, round r builds set-up r of each arm
    with an unfinished point only; the builds, runs and precision.json are exactly what the decisions replayed
    on the measured values ask for; the rule's repeated CI covers 2."""
    from storagebench import run_study

    study = load_study(_spec(blocks=False, compare="device", ci_rel_half_width=0.001, min_repetitions=2,
                             max_repetitions=3))
    builds: list = []
    res = run_study(study, out_dir=tmp_path / "res", fio_bin=fio_bin, progress=False,
                    testbed=_file_testbed(tmp_path / "tb", builds))
    assert res.ok, res.errors
    ids = _complete(res.raw_dir)
    values = read_values(res.raw_dir, sorted(ids), "iops")
    assert set(values) == ids
    plan = study.expand()
    rounds = replay(plan, study.precision, study.factors, values)
    expected = [(p.setup, p.factors["device"]) for p in plan
                if point_key(p.factors) not in rounds[p.setup - 1]["finished"]]
    assert sorted((b["setup"], b["arm"]["device"]) for b in builds) == sorted(expected)
    assert {rid for b in builds for rid in b["run_ids"]} == ids and len(builds) == len(res.builds)
    rec = read_precision(res.root)
    assert rec["unit"] == "setup"
    assert sorted(p["runs"] for p in rec["points"]) == sorted(
        sum(1 for s, d in expected if d == lv) for lv in ("low", "high"))
    (comp,) = rec["comparisons"]
    # the rule's CI covers 2 to within fio's counting resolution (one outstanding I/O of 100 and of 200 counted
    # per run, studies.count_resolution): set-ups that count 100 and 200 +- 1 leave a CI narrower than that
    r = 1 / 100 + 1 / 200
    assert abs(math.log(comp["ratio"] / 2.0)) < r, comp
    low, high = ([v for k, v in values.items() if _arm_of(plan, k) == lv] for lv in ("low", "high"))
    if len(set(low)) == 1 and len(set(high)) == 1:
        # a quiet host counts the same I/Os in every run of a rate cap: no spread, no CI, so no test can decide
        # (the rule ran every set-up it was allowed, and the record says why it stopped undecided)
        assert comp["verdict"] == NO_SPREAD and comp["ci_low"] is None and comp["runs_per_arm"] == 3, comp
    else:
        assert comp["verdict"] == "different" and comp["ci_low"] * math.exp(-r) < 2.0 < comp["ci_high"] * math.exp(r), \
            comp
    assert "The experimental unit was the set-up" in rule_words(rec["rule"], rec["unit"])
    assert "from 2 set-ups" in rule_words(rec["rule"], rec["unit"])
    # the tidy table names every run's set-up (set-up 1's point.json has none: it is 1), so the comparison that
    # `storagebench report` points to (compare.ipynb with unit_columns [setup]) counts set-ups, as the rule did
    from storagebench import stats
    from storagebench.ingest import ingest_study, ingest_to_parquet

    setups = {p.run_id: p.setup for p in plan if p.run_id in ids}
    runs = ingest_study(res.root).runs
    assert dict(zip(runs["run_id"], runs["setup"], strict=True)) == setups
    assert {rid: json.loads((res.raw_dir / rid / "point.json").read_bytes())["setup"] for rid in ids} == setups
    # streamed one file per batch (storagebench ingest): every batch names its runs' set-ups, 1 included
    ingest_to_parquet([res.raw_dir], tmp_path / "tidy", batch_files=1)
    streamed = pd.read_parquet(tmp_path / "tidy" / "runs.parquet")
    assert streamed["setup"].dtype == np.int64 and dict(zip(streamed["run_id"], streamed["setup"], strict=True)) == setups
    (row,) = stats.compare(runs, "device", "low", "iops", unit=["setup"]).to_frame().itertuples()
    assert (row.n_baseline, row.n_other) == tuple(sum(1 for s, d in expected if d == lv) for lv in ("low", "high"))


@pytest.mark.parametrize("over, words", [
    ({"unit": "<b>build</b>"}, r"unit must be one of \['run', 'setup'\], got '<b>build</b>'"),
    ({"unit": ["setup"]}, r"unit must be one of \['run', 'setup'\], got \['setup'\]"),
    ({"blocks": "yes"}, r"blocks must be true or false, got 'yes'"),
    ({"points": [{"factors": {}, "repetitions": 1, "stopped": ["target"]}]}, r"stopped must be one of"),
    ({"comparisons": [{"comparison": "a", "decision": {"x": 1}, "n": 1}]}, r"each comparison must name itself"),
])
def test_a_precision_record_with_a_bad_unit_or_blocks_is_refused(tmp_path, over, words):
    d = tmp_path / "st"
    d.mkdir()
    (d / PRECISION_FILE).write_text(json.dumps({"rule": {"compare": "x"}, "points": [], **over}))
    with pytest.raises(SchemaError, match=words):
        read_precision(d)


def test_rule_words_say_blocks_and_setups():
    rule = {"compare": "device", "alpha": 0.05, "min_repetitions": 3, "max_repetitions": 10, "metric": "iops",
            "confidence": 0.95, "ci_rel_half_width": 0.02}
    words = rule_words(rule, "setup", True)
    assert "one block per round, a set-up of every arm" in words and "paired t on the per-block log ratios" in words
    assert "from 3 set-ups" in words and "until it had 10 set-ups (its budget)" in words
    assert "set-up-to-set-up SD" in words
    assert "one run of every unfinished point per round" in rule_words(rule)


# ---- resume after SIGKILL: the same builds, runs and decisions ----------------------------------------

_DRIVER = """
import contextlib, hashlib, math, sys
from pathlib import Path
from statistics import NormalDist
import storagebench._runrounds as rr
from storagebench import load_study, run_study
from storagebench._runner import SetUp

real = rr.read_values

def synthetic(raw_dir, run_ids, metric):
    # which runs are complete is the real reader's; the value is a fixed function of the run id (set-up CV 4 %,
    # high = 1.02 x low), so two sweeps see the same data and must make the same decisions
    out = {}
    for rid in real(raw_dir, run_ids, metric):
        u = (int(hashlib.sha256(rid.encode()).hexdigest()[:12], 16) + 0.5) / 16**12
        out[rid] = 1000.0 * math.exp(0.04 * NormalDist().inv_cdf(u))
    return out

rr.read_values = synthetic
root = Path(sys.argv[2])

@contextlib.contextmanager
def testbed(unit):
    d = root / f"{unit.setup}-{unit.arm['device']}"
    d.mkdir(parents=True, exist_ok=True)
    with open(root / "builds.log", "a") as f:
        f.write(f"{unit.setup} {unit.arm['device']} {' '.join(unit.run_ids)}\\n")
    yield SetUp(targets={"low": str(d / "low.dat"), "high": str(d / "high.dat")})

run_study(load_study(sys.argv[1]), out_dir=sys.argv[3], fio_bin=sys.argv[4], progress=False, testbed=testbed)
"""


def _synthetic(rid: str) -> float:
    from statistics import NormalDist

    u = (int(hashlib.sha256(rid.encode()).hexdigest()[:12], 16) + 0.5) / 16**12
    return 1000.0 * math.exp(0.04 * NormalDist().inv_cdf(u))


@pytest.mark.slow
def test_killed_adaptive_setups_sweep_resumes_to_the_same_setups_and_decisions(tmp_path, fio_bin):
    spec = _spec(compare="device", ci_rel_half_width=0.03, min_repetitions=3, max_repetitions=7)
    path = tmp_path / "ads.yaml"
    path.write_text(json.dumps(spec))
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(out: Path) -> subprocess.Popen:
        (out / "tb").mkdir(parents=True, exist_ok=True)
        return subprocess.Popen([sys.executable, str(driver), str(path), str(out / "tb"), str(out), fio_bin],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sweep(out: Path, kills: int) -> int:
        rnd = random.Random(20261128)
        killed = 0
        for _ in range(kills + 1):
            proc = start(out)
            if kills:
                at = len(_complete(out / "ads" / "raw")) + rnd.randint(2, 4)
                deadline = time.monotonic() + 120
                while len(_complete(out / "ads" / "raw")) < at and proc.poll() is None:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                time.sleep(rnd.uniform(0, 1.2))  # a random moment: often inside a run, or between a build's runs
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                kills -= 1
            _, err = proc.communicate(timeout=300)
            assert proc.returncode in (0, -signal.SIGKILL), err
            killed += proc.returncode == -signal.SIGKILL
        return killed

    # the uninterrupted sweep runs beside the killed one, on testbeds of its own: its values are the run ids' own
    # (the driver's), so sharing the host changes no decision, and make test saves its fio time
    alone = start(tmp_path / "a")
    assert sweep(tmp_path / "b", 2) == 2  # killed twice, then resumed to the end
    _, err = alone.communicate(timeout=300)
    assert alone.returncode == 0, err
    ids_a, ids_b = _complete(tmp_path / "a" / "ads" / "raw"), _complete(tmp_path / "b" / "ads" / "raw")
    rec_a = json.loads((tmp_path / "a" / "ads" / PRECISION_FILE).read_text())
    rec_b = json.loads((tmp_path / "b" / "ads" / PRECISION_FILE).read_text())
    assert ids_a == ids_b and rec_a["unit"] == rec_b["unit"] == "setup"
    assert [(p["factors"], p["repetitions"], p["stopped"]) for p in rec_a["points"]] == \
        [(p["factors"], p["repetitions"], p["stopped"]) for p in rec_b["points"]]
    assert rec_a["comparisons"] == rec_b["comparisons"]
    # every complete block was built once in the uninterrupted sweep, and the resumed one built the same set-ups
    # (an interrupted build redone whole)
    built_a = {tuple(line.split()[:2]) for line in (tmp_path / "a" / "tb" / "builds.log").read_text().splitlines()}
    built_b = {tuple(line.split()[:2]) for line in (tmp_path / "b" / "tb" / "builds.log").read_text().splitlines()}
    assert built_a == built_b
    # the decision function replayed on the recorded values gives exactly the blocks that exist: with blocks a
    # round is the whole block while any point is unfinished
    study = load_study(path)
    plan = study.expand()
    rounds = replay(plan, study.precision, study.factors, {r: _synthetic(r) for r in ids_b})
    n_points = len(plan) // study.plan_setups
    last = next(rd["round"] for rd in rounds if len(rd["finished"]) == n_points) - 1
    assert {p.run_id for p in plan if p.setup <= last} == ids_b
    assert 3 < last <= 7 or {p["stopped"] for p in rec_b["points"]} == {"target"}, rec_b  # the rule decided
    assert rounds[-1]["finished"] == {point_key(p["factors"]): p["stopped"] for p in rec_b["points"]}


@pytest.mark.slow
def test_ka_caps_quick_adaptive_recovers_the_caps(tmp_path, fio_bin, require_root):
    """The known-answer testbed (two loop devices capped at 200 and 400 read IOPS) with adaptive set-ups: the
    study's own known-answer check covers 2 with the set-ups the rule asked for, and resume measures nothing."""
    from storagebench import studies

    # 2 to 3 set-ups per arm keeps this root test short (make test's 10 minutes); bench_adaptive --testbed
    # runs the 3..10 rule 20 times
    rule = {"compare": "device", "ci_rel_half_width": 0.02, "min_repetitions": 2, "max_repetitions": 3}
    res = studies.run("ka_caps", out_dir=tmp_path, quick=True, fio_bin=fio_bin, precision=rule, write=False)
    rec = read_precision(res.study_dir)
    n = {p["runs"] for p in rec["points"]}
    assert len(n) == 1 and 2 <= n.pop() <= 3 and len(res.sweep.builds) == len(res.sweep.completed)
    (check,) = res.result.checks
    assert check.truth == 2.0 and check.covered, check
    again = studies.run("ka_caps", out_dir=tmp_path, quick=True, fio_bin=fio_bin, precision=rule, write=False)
    assert again.completed == 0 and not again.sweep.builds


@pytest.mark.parametrize("args, words", [
    (["--precision", "ci_rel_half_widht=0.02"], "precision: unknown key 'ci_rel_half_widht' (did you mean "
                                                "'ci_rel_half_width'?)"),
    (["--precision", "compare=device", "--precision", "compare=device"], "compare= is given twice"),
    (["--precision", "nokey"], "must be KEY=VALUE with KEY a key of"),
    (["--precision", "compare=!!python/object/apply:os.system [touch pwned]"], "is refused: a value is plain data"),
    (["--precision", "ci_rel_half_width=2"], "precision.ci_rel_half_width: must be a number in (0, 1), got 2"),
    (["--precision", "compare=device", "--precision", "max_repetitions=[1, 2]"],
     "precision.max_repetitions: must be an integer from 2 to 1,000"),
    (["--precision", "compare=devcie"], "precision.compare: 'devcie' is not a factor of this study (did you mean "
                                        "'device'?)"),
])
def test_testbed_precision_option_refuses_bad_values_before_building(tmp_path, args, words, monkeypatch):
    # in process (typer's CliRunner, the command's own code path): a subprocess per case cost 8 s of make test
    from typer.testing import CliRunner

    from storagebench.cli import app

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["testbed", "ka_caps", "--quick", "--out", str(tmp_path / "res"), "--no-report",
                                   "--no-progress", *args], env={"COLUMNS": "300"})
    assert out.exit_code not in (0, None) and not isinstance(out.exception, AssertionError)
    assert words in " ".join(out.output.split()), out.output
    assert not (tmp_path / "res").exists() and not (tmp_path / "pwned").exists()
