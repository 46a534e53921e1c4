"""Adaptive precision (issue 21 items 1 and 3): the ``precision:`` key, the group-sequential boundaries, the
decisions as a pure function of completed runs, the rounds of the runner, resume after SIGKILL, and the time
of ``run --dry-run``.

Statistics named before the tests: the experimental unit is the run (one fio process); the estimand of a
point is the geometric mean of its runs' metric (log-scale t interval, guarded); of a comparison the ratio of
geometric means other/baseline (Welch t on log values, :func:`storagebench.stats.ratio_ci`); the family of
each stopping test is the one comparison (the final analysis adjusts over its own family).
"""

from __future__ import annotations

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
import pytest
import scipy.stats as st

from storagebench._adaptive import Comparison, comparisons, decide, nominal_levels, point_key, time_to_answer
from storagebench._runrounds import PRECISION_FILE, read_values, replay
from storagebench._study import load_study
from storagebench.errors import StudyError
from storagebench.stats.sequential import (
    boundary_crossing,
    comparison_decision,
    obf_constant,
    point_stops,
    spending_bounds,
)

ROOT = Path(__file__).resolve().parents[1]


def _spec(**precision):
    return {"name": "ad", "factors": {"iodepth": [1, 2, 4], "bs": ["4k", "8k"]}, "fixed": {"rw": "randread"},
            "runtime": 1, "precision": precision}


# ---- the key -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision, words", [
    ({"ci_rel_half_widht": 0.03}, "unknown key 'ci_rel_half_widht' (did you mean 'ci_rel_half_width'?)"),
    ({"ci_rel_half_width": 0}, "precision.ci_rel_half_width: must be a number in (0, 1), got 0"),
    ({"ci_rel_half_width": 1.5}, "precision.ci_rel_half_width: must be a number in (0, 1)"),
    ({"ci_rel_half_width": "3%"}, "precision.ci_rel_half_width: must be a number in (0, 1), got '3%'"),
    ({"ci_rel_half_width": 0.03, "min_repetitions": 1}, "precision.min_repetitions: must be an integer from 2"),
    ({"ci_rel_half_width": 0.03, "max_repetitions": 2.5}, "precision.max_repetitions: must be an integer"),
    ({"ci_rel_half_width": 0.03, "min_repetitions": 5, "max_repetitions": 4},
     "precision.max_repetitions: must be >= min_repetitions (5), got 4"),
    ({"ci_rel_half_width": 0.03, "max_repetitions": 10**6}, "precision.max_repetitions: must be an integer from 2 to 1,000"),
    ({"metric": "iosp", "ci_rel_half_width": 0.03}, "precision.metric: 'iosp' is not a metric of the runs table (did you mean 'iops'?)"),
    ({"metric": "error", "ci_rel_half_width": 0.03}, "precision.metric: 'error' is not a metric"),
    ({"metric": "iodepth", "ci_rel_half_width": 0.03}, "precision.metric: 'iodepth' is not a metric"),
    ({"compare": "iodpeth"}, "precision.compare: 'iodpeth' is not a factor of this study (did you mean 'iodepth'?)"),
    ({"compare": 3}, "precision.compare: must be a factor name, got 3"),
    ({"equivalence_margin": 0.05, "ci_rel_half_width": 0.03}, "apply to a comparison; name its factor with compare"),
    ({"compare": "bs", "detect_ratio": 0.8}, "precision.detect_ratio: must be a number in (1, 100), got 0.8"),
    ({"compare": "bs", "alpha": 0.7}, "precision.alpha: must be a number in (0, 0.5)"),
    ({"compare": "bs", "equivalence_margin": float("nan")}, "precision.equivalence_margin: must be a number"),
    ({}, "precision: needs a target: ci_rel_half_width"),
])
def test_precision_keys_are_checked(precision, words):
    with pytest.raises(StudyError) as exc:
        load_study(_spec(**precision))
    assert words in str(exc.value)
    assert "precision.precision" not in str(exc.value)


def test_precision_with_repetitions_or_a_non_mapping_is_refused():
    with pytest.raises(StudyError, match="repetitions: with precision the runs per point are min_repetitions to "
                       "max_repetitions"):
        load_study({**_spec(ci_rel_half_width=0.03), "repetitions": 3})
    with pytest.raises(StudyError, match="precision: must be a mapping"):
        load_study({**_spec(), "precision": [0.03]})
    with pytest.raises(StudyError, match="factors.bs has one level"):
        load_study({**_spec(compare="bs"), "factors": {"bs": ["4k"]}})
    with pytest.raises(StudyError) as exc:  # levels run at the same time are not independent arms
        load_study({**_spec(compare="bs"), "concurrent": ["bs"]})
    assert "precision.compare: 'bs' is in concurrent: its levels run at the same time" in str(exc.value)
    assert "compare a factor that is not in concurrent (one of ['iodepth']), or use ci_rel_half_width alone" \
        in str(exc.value)
    # a point rule, or a comparison of a factor outside concurrent, is allowed: rounds run whole groups
    assert load_study({**_spec(ci_rel_half_width=0.03, compare="iodepth"), "concurrent": ["bs"]}).concurrent == ["bs"]


def test_precision_is_hashed_only_when_set_and_defaults_are_filled():
    plain = load_study({k: v for k, v in _spec().items() if k != "precision"})
    assert "precision" not in plain.spec_dict()
    adaptive = load_study(_spec(ci_rel_half_width=0.03))
    assert adaptive.precision == {"metric": "iops", "ci_rel_half_width": 0.03, "confidence": 0.95,
                                  "min_repetitions": 3, "max_repetitions": 30}
    assert adaptive.spec_hash != plain.spec_hash
    assert load_study(adaptive.spec_dict()).spec_hash == adaptive.spec_hash  # study.yaml loads back to it


def test_run_ids_of_a_repetition_are_the_same_fixed_or_adaptive():
    fixed = load_study({**{k: v for k, v in _spec().items() if k != "precision"}, "repetitions": 5}).expand()
    adaptive = load_study(_spec(ci_rel_half_width=0.03, max_repetitions=8)).expand()
    assert len(adaptive) == 6 * 8 and adaptive.points[-1].repetition <= 8
    ids = {(point_key(p.factors), p.repetition): p.run_id for p in adaptive}
    assert all(ids[(point_key(p.factors), p.repetition)] == p.run_id for p in fixed)


# ---- boundaries: gold ----------------------------------------------------------------------------------

def test_obrien_fleming_boundaries_match_the_published_table():
    # Jennison & Turnbull (2000), Table 2.3: K = 5, two-sided alpha 0.05, C = 2.040
    np.testing.assert_allclose(obf_constant(5), [4.562, 3.226, 2.634, 2.281, 2.040], atol=0.0015)
    # Lan-DeMets OBF-type spending, K = 5 equal looks, 0.025 a side (gsDesign sfLDOF; DeMets & Lan 1994)
    np.testing.assert_allclose(spending_bounds(np.arange(1, 6) / 5, 0.025), [4.877, 3.357, 2.680, 2.290, 2.031],
                               atol=0.0015)


def test_spending_bounds_spend_what_the_function_says():
    t = np.array([0.2, 0.45, 0.7, 1.0])
    b = spending_bounds(t, 0.05, two_sided=False)
    assert b[-1] > st.norm.ppf(0.95)  # the last look pays for the earlier ones
    assert boundary_crossing(b, t, two_sided=False).sum() == pytest.approx(0.05, abs=2e-4)
    assert spending_bounds([1.0], 0.025)[0] == pytest.approx(st.norm.ppf(0.975), abs=1e-6)
    with pytest.raises(Exception, match="fractions must increase"):
        spending_bounds([0.5, 0.4], 0.025)


def test_sequential_t_type_one_error_holds_in_a_small_seeded_simulation():
    """Type-I of the 'different' rule at a true ratio 1.00, CV 10 %, looks 3..10: <= 0.08 with 600 sets (the
    nominal 0.05; looks at the unadjusted 0.05 every round would give ~0.2, so this can fail)."""
    rule = {"min_repetitions": 3, "max_repetitions": 10, "alpha": 0.05}
    nominal = nominal_levels(rule)
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(600):
        x, y = np.exp(rng.normal(0, 0.1, (2, 10)))
        hits += any(comparison_decision(x[:n], y[:n], nominal[n]) == "different" for n in range(3, 11))
    assert hits / 600 <= 0.08


def test_point_rule_stops_at_the_first_look_narrow_enough():
    quiet = 1000 * np.exp(np.array([0.0, 0.001, -0.001, 0.0005, 0.0, 0.0]))
    assert point_stops(quiet, 0.01, 3) == 3
    assert point_stops(quiet, 0.01, 4) == 4
    noisy = 1000 * np.exp(np.array([0.0, 0.3, -0.3, 0.2, -0.2, 0.1]))
    assert point_stops(noisy, 0.01, 3) is None


def test_decisions_stop_each_comparison_when_decided():
    a = {"bs": "4k", "iodepth": 1}
    b = {"bs": "8k", "iodepth": 1}
    comps = comparisons([a, b], "bs", ["4k", "8k"])
    assert comps == (Comparison("bs", point_key(a), point_key(b), "8k", (("iodepth", 1),)),)
    rule = {"compare": "bs", "alpha": 0.05, "equivalence_margin": 0.1, "min_repetitions": 3, "max_repetitions": 12,
            "confidence": 0.95}
    rng = np.random.default_rng(3)
    base = 1000 * np.exp(rng.normal(0, 0.01, 12))
    far = {point_key(a): dict(enumerate(base, 1)), point_key(b): dict(enumerate(2 * base[::-1], 1))}
    d = decide(rule, list(far), comps, far, before=4)
    v = d.verdicts["bs=8k vs 4k at iodepth=1"]
    assert (v["decision"], v["n"]) == ("different", 3)
    # the repeated CI is ratio_ci at the look's nominal level: it excludes 1 exactly when the look says different
    assert v["ci_level"] == pytest.approx(1 - nominal_levels(rule)[3][0]) and v["ci_level"] > 0.99
    assert 1 < v["ci_low"] < v["ratio"] < v["ci_high"] and v["ratio"] == pytest.approx(2.0, rel=0.05)
    assert d.finished == {point_key(a): "decided", point_key(b): "decided"}
    near = {point_key(a): dict(enumerate(base, 1)), point_key(b): dict(enumerate(base[::-1], 1))}
    d = decide(rule, list(near), comps, near, before=13)
    assert d.verdicts["bs=8k vs 4k at iodepth=1"]["decision"] == "equivalent"
    assert decide(rule, list(near), comps, near, before=3).finished == {}  # 2 runs: before the first look


def test_time_to_answer_fixed_expected_and_most():
    fixed = load_study({**{k: v for k, v in _spec().items() if k != "precision"}, "repetitions": 3, "ramp_time": 1})
    assert time_to_answer(fixed) == {"points": 6, "run_s": 2.0, "fixed_runs": 18, "fixed_s": 36.0}
    adaptive = load_study(_spec(ci_rel_half_width=0.03, max_repetitions=20, assumed_cv=0.02))
    t = time_to_answer(adaptive)
    assert (t["min_runs"], t["max_runs"], t["max_s"]) == (18, 120, 120.0)
    assert 3 < t["expected_repetitions"] < 20 and t["cv_source"] == "precision.assumed_cv"
    assert time_to_answer(adaptive, 0.5)["expected_repetitions"] == 20  # noisy: the budget


def test_time_to_answer_counts_a_concurrent_group_once(tmp_path):
    """Two workloads run at once take one run's fio time, fixed or adaptive (ka_consolidation's comment: 66 s)."""
    spec = {k: v for k, v in _concurrent_spec(tmp_path).items() if k != "precision"}
    fixed = time_to_answer(load_study({**spec, "repetitions": 3}))
    assert (fixed["fixed_runs"], fixed["fixed_s"], fixed["together"]) == (12, 6.0, 2)
    t = time_to_answer(load_study(_concurrent_spec(tmp_path, ci_rel_half_width=0.03, max_repetitions=10)))
    assert (t["min_runs"], t["max_runs"], t["max_s"]) == (12, 40, 20.0)
    from storagebench import studies
    from storagebench._adaptive import time_text

    lines = time_text(studies.get("ka_consolidation").spec(quick=True))
    assert "11 s per run (runtime 10 s + ramp_time 1 s), 2 runs at a time (concurrent: workload)" in lines[0]
    assert lines[1] == "fixed: 1 repetition(s) per point = 12 runs, fio time 0:01:06"


def test_dry_run_prints_the_time_and_runs_nothing(tmp_path):
    spec = tmp_path / "ad.yaml"
    spec.write_text(json.dumps(_spec(ci_rel_half_width=0.03, max_repetitions=10)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "storagebench.cli", "run", str(spec), "--dry-run", "--out",
                          str(tmp_path / "res"), "--assumed-cv", "0.02"], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "adaptive (precision): 3 to 10 repetitions per point" in out.stdout
    assert "at most:  60 runs, fio time 0:01:00" in out.stdout
    assert "at a run-to-run CV of 0.02, given" in out.stdout
    assert not (tmp_path / "res").exists()


# ---- concurrent groups: a round runs whole groups ------------------------------------------------------

def _concurrent_spec(root: Path, **precision) -> dict:
    """Two workloads run at the same time (``concurrent``), each on its own file, at two queue depths."""
    return {"name": "adc", "factors": {"iodepth": [1, 2],
                                       "workload": [{"name": "x", "target": str(root / "x.dat")},
                                                    {"name": "y", "target": str(root / "y.dat")}]},
            "fixed": {"rw": "randread", "bs": "4k"}, "runtime": 1, "size": "4m", "seed": 5,
            "concurrent": ["workload"], "precision": precision}


def test_a_round_of_a_concurrent_study_runs_every_group_with_an_unfinished_point_whole(tmp_path):
    """Plan level: (iodepth 1, x) is answered after 3 rounds, its partner (iodepth 1, y) is not; round 4 runs
    both (the pair is one unit, as in a fixed sweep); the pairs of iodepth 2, both answered, not at all."""
    from storagebench._runrounds import _State, round_groups

    study = load_study(_concurrent_spec(tmp_path, ci_rel_half_width=0.03, min_repetitions=3, max_repetitions=6))
    plan = study.expand()
    assert all(len(g) == 2 for g in plan.groups())
    state = _State(plan, study.precision, study.factors)
    quiet, noisy = [1000.0, 1001.0, 999.0], [1000.0, 1400.0, 700.0]
    state.set_runs({p.run_id: (noisy if p.factors["iodepth"] == 1 and p.factors["workload"] == "y" else quiet)
                    [p.repetition - 1] for p in plan if p.repetition <= 3})
    d = state.decide(4)
    y1 = point_key(next(p.factors for p in plan if p.factors["iodepth"] == 1 and p.factors["workload"] == "y"))
    assert set(state.keys) - set(d.finished) == {y1}  # only its partner-less point is open
    todo = state.todo(d, 4)
    assert sorted((p.factors["iodepth"], p.factors["workload"], p.repetition) for p in todo) == \
        [(1, "x", 4), (1, "y", 4)]
    (group,) = round_groups(plan, todo, study.seed)
    assert [p.factors["workload"] for p in group] == ["x", "y"]  # one group, the plan's own cut and order
    # without concurrent the same values run the open point alone
    alone = load_study({**_concurrent_spec(tmp_path, ci_rel_half_width=0.03, min_repetitions=3, max_repetitions=6),
                        "concurrent": []})
    st2 = _State(alone.expand(), alone.precision, alone.factors)
    st2.set_runs({p.run_id: v for p, v in ((q, state.run_values.get(q.run_id)) for q in alone.expand()) if v})
    assert [p.factors["workload"] for p in st2.todo(st2.decide(4), 4)] == ["y"]


def test_ka_consolidation_adaptive_rounds_are_blocks_of_concurrent_pairs():
    """Plan level, the known-answer testbed of two workloads on one throttled bucket (set-ups in blocks): each
    round is one block, a build per layout, each build running the two workloads as one group."""
    from storagebench import studies
    from storagebench._runrounds import _State, round_units

    quick = studies.get("ka_consolidation").spec(quick=True)
    study = load_study({**quick.spec_dict(), "precision": {"compare": "layout", "ci_rel_half_width": 0.02,
                                                          "min_repetitions": 3, "max_repetitions": 10}})
    plan = study.expand()
    state = _State(plan, study.precision, study.factors)
    for r in (1, 2):
        units = round_units(plan, state.todo(state.decide(r), r), r, study.seed)
        assert sorted(u.arm["layout"] for u in units) == ["isolated", "shared"] and {u.block for u in units} == {r}
        for u in units:
            (group,) = u.groups
            assert sorted(p.factors["workload"] for p in group) == ["oltp", "store"]
            assert {p.setup for p in group} == {r}
    with pytest.raises(StudyError, match="precision.compare: 'workload' is in concurrent"):
        load_study({**quick.spec_dict(), "precision": {"compare": "workload", "ci_rel_half_width": 0.02}})


def test_adaptive_concurrent_sweep_runs_pairs_together(tmp_path, fio_bin):
    """Real fio: the runs in raw/ are whole pairs, those the decisions replayed on their values ask for (closed
    over the pairs), and each pair ran at the same time."""
    from datetime import datetime

    from storagebench import run_study
    from storagebench._store import StudyStore

    study = load_study({**_concurrent_spec(tmp_path, ci_rel_half_width=0.5, min_repetitions=2, max_repetitions=3),
                        "factors": {"workload": _concurrent_spec(tmp_path)["factors"]["workload"]}})
    res = run_study(study, out_dir=tmp_path / "res", fio_bin=fio_bin, progress=False)
    assert res.ok, res.errors
    ids = _complete(res.raw_dir)
    plan = study.expand()
    rounds = replay(plan, study.precision, study.factors, read_values(res.raw_dir, sorted(ids), "iops"))
    asked = {p.run_id for p in plan
             if all(rd["round"] != p.repetition or point_key(p.factors) not in rd["finished"] for rd in rounds)}
    assert ids == {q.run_id for g in plan.groups() if any(p.run_id in asked for p in g) for q in g}
    assert 4 <= len(ids) <= 6 and len(ids) % 2 == 0
    store = StudyStore(res.root)
    for g in plan.groups():
        if g[0].run_id not in ids:
            continue
        spans = [[datetime.fromisoformat(json.loads((store.run_dir(p.run_id) / "provenance.json").read_text())[k]
                                         .replace("Z", "+00:00")) for k in ("started_at", "finished_at")] for p in g]
        assert (min(e for _, e in spans) - max(s for s, _ in spans)).total_seconds() > 0.5  # they overlapped
    rec = json.loads((res.root / PRECISION_FILE).read_text())
    assert len({p["repetitions"] for p in rec["points"]}) == 1  # a pair's points have the same runs
    from storagebench._precision import read_precision, rule_words

    typed = read_precision(res.root)
    assert typed["concurrent"] == ["workload"]
    assert "The levels of workload ran at the same time (concurrent), so a round ran each such group whole" in \
        rule_words(typed["rule"], typed["unit"], typed["blocks"], typed["concurrent"])


# ---- the runner: rounds, resume after SIGKILL ----------------------------------------------------------

_DRIVER = """
import hashlib, json, math, sys
from pathlib import Path
from statistics import NormalDist
import storagebench._runrounds as rr
from storagebench import load_study, run_study

real = rr.read_values

def synthetic(raw_dir, run_ids, metric):
    # the real reader decides which runs are complete; the value is a fixed function of the run's point (its
    # factors but the target path, and its repetition; CV 2.5 %), so two sweeps see the same data and must make
    # the same decisions, and every run of the test makes the same ones (a target path is the test's tmp_path)
    out = {}
    for rid in real(raw_dir, run_ids, metric):
        p = json.loads((Path(raw_dir) / rid / "point.json").read_text())
        key = json.dumps([{k: v for k, v in p["factors"].items() if k != "target"}, p["repetition"]], sort_keys=True)
        u = (int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) + 0.5) / 16**12
        out[rid] = 1000.0 * math.exp(0.025 * NormalDist().inv_cdf(u))
    return out

rr.read_values = synthetic
run_study(load_study(sys.argv[1]), target=None if sys.argv[2] == "-" else sys.argv[2], out_dir=sys.argv[3],
          fio_bin=sys.argv[4], progress=False)
"""


def _synthetic(raw: Path, rid: str) -> float:
    """The driver's value of run ``rid`` (a function of its point.json's factors but the target, and repetition)."""
    from statistics import NormalDist

    p = json.loads((raw / rid / "point.json").read_text())
    key = json.dumps([{k: v for k, v in p["factors"].items() if k != "target"}, p["repetition"]], sort_keys=True)
    u = (int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) + 0.5) / 16**12
    return 1000.0 * math.exp(0.025 * NormalDist().inv_cdf(u))


def _complete(raw: Path) -> set[str]:
    return {p.name for p in raw.iterdir() if not p.name.startswith(".")} if raw.is_dir() else set()


@pytest.mark.slow
@pytest.mark.parametrize("concurrent", [False, True], ids=["alone", "concurrent"])
def test_killed_adaptive_sweep_resumes_to_the_same_runs_and_decisions(tmp_path, fio_bin, concurrent):
    rule = {"ci_rel_half_width": 0.04, "min_repetitions": 3, "max_repetitions": 6}
    spec = {"name": "adk", "factors": {"iodepth": [1, 2, 4]}, "fixed": {"rw": "randread", "bs": "4k"},
            "runtime": 1, "size": "4m", "seed": 5, "precision": rule}
    if concurrent:  # two workloads run together (two pairs): the pairs are what is killed and resumed
        spec = {**_concurrent_spec(tmp_path, **rule), "name": "adk"}
    path = tmp_path / "adk.yaml"
    path.write_text(json.dumps(spec))
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(out: Path, target: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(driver), str(path), "-" if concurrent else target, str(out),
                                 fio_bin], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sweep(out: Path, kills: int) -> int:
        rnd = random.Random(20261128)
        killed = 0
        for _ in range(kills + 1):
            proc = start(out, str(tmp_path / "t.dat"))
            if kills:
                at = len(_complete(out / "adk" / "raw")) + rnd.randint(2, 5)
                deadline = time.monotonic() + 120
                while len(_complete(out / "adk" / "raw")) < at and proc.poll() is None:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                time.sleep(rnd.uniform(0, 1.2))  # a random moment: often inside a run
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                kills -= 1
            _, err = proc.communicate(timeout=300)
            assert proc.returncode in (0, -signal.SIGKILL), err
            killed += proc.returncode == -signal.SIGKILL
        return killed

    if concurrent:  # the spec names the targets (part of the run ids): the two sweeps one after the other
        assert sweep(tmp_path / "a", 0) == 0
    else:  # the uninterrupted sweep runs beside the killed one, on its own file: its values are the run ids' own
        # (the driver's), so sharing the host changes no decision, and make test saves its fio time
        alone = start(tmp_path / "a", str(tmp_path / "ta.dat"))
    assert sweep(tmp_path / "b", 2) == 2  # killed twice, then resumed to the end
    if not concurrent:
        _, err = alone.communicate(timeout=300)
        assert alone.returncode == 0, err
    ids_a, ids_b = _complete(tmp_path / "a" / "adk" / "raw"), _complete(tmp_path / "b" / "adk" / "raw")
    rec_a = json.loads((tmp_path / "a" / "adk" / PRECISION_FILE).read_text())
    rec_b = json.loads((tmp_path / "b" / "adk" / PRECISION_FILE).read_text())
    assert ids_a == ids_b
    assert [(p["factors"], p["repetitions"], p["stopped"]) for p in rec_a["points"]] == \
        [(p["factors"], p["repetitions"], p["stopped"]) for p in rec_b["points"]]
    stops = {p["stopped"] for p in rec_a["points"]}
    reps = {p["repetitions"] for p in rec_a["points"]}
    study = load_study(path)
    plan = study.expand()
    assert len(ids_a) < len(plan) and (len(reps) > 1 or stops == {"target"}), rec_a  # the rule decided something
    # the decision function replayed on the recorded runs gives exactly the runs that exist (with concurrent:
    # the whole pair of every run it asks for)
    rounds = replay(plan, study.precision, study.factors, {r: _synthetic(tmp_path / "b" / "adk" / "raw", r) for r in ids_b})
    final = rounds[-1]["finished"]
    expected = {p.run_id for p in plan
                if all(rd["round"] != p.repetition or point_key(p.factors) not in rd["finished"] for rd in rounds)}
    assert {q.run_id for g in plan.groups() if any(p.run_id in expected for p in g) for q in g} == ids_b
    assert final == {point_key(p["factors"]): p["stopped"] for p in rec_b["points"]}


def test_adaptive_sweep_with_real_values_replays(tmp_path, fio_bin):
    """A real sweep (real fio, real IOPS): the runs in raw/ are exactly those the decisions replayed on their
    values ask for, and precision.json reports each point's repetitions and CI reached."""
    from storagebench import run_study

    study = load_study({"name": "adr", "factors": {"iodepth": [1, 4]}, "fixed": {"rw": "randread", "bs": "4k"},
                        "runtime": 1, "size": "4m", "seed": 1,
                        "precision": {"ci_rel_half_width": 0.2, "min_repetitions": 2, "max_repetitions": 4,
                                      "compare": "iodepth", "detect_ratio": 1.5}})
    res = run_study(study, target=tmp_path / "t.dat", out_dir=tmp_path / "res", fio_bin=fio_bin, progress=False)
    assert res.ok, res.errors
    ids = _complete(res.raw_dir)
    values = read_values(res.raw_dir, sorted(ids), "iops")
    assert set(values) == ids
    rounds = replay(study.expand(), study.precision, study.factors, values)
    expected = {p.run_id for p in study.expand()
                if all(rd["round"] != p.repetition or point_key(p.factors) not in rd["finished"] for rd in rounds)}
    assert expected == ids
    rec = json.loads((res.root / PRECISION_FILE).read_text())
    assert sum(p["repetitions"] for p in rec["points"]) == len(ids)
    assert all(2 <= p["repetitions"] <= 4 and p["stopped"] in ("target", "budget") for p in rec["points"])
    (comp,) = rec["comparisons"]
    assert comp["comparison"] == "iodepth=4 vs 1" and comp["decision"] == rounds[-1]["verdicts"]["iodepth=4 vs 1"][
        "decision"]
    assert 0 < comp["ci_low"] <= comp["ratio"] <= comp["ci_high"] and 2 <= comp["n"] <= 4


# ---- the write-up: precision.json read typed, every value through the HTML gate ------------------------

def _record(tmp_path: Path, **over) -> Path:
    study = tmp_path / "st"
    study.mkdir(exist_ok=True)
    rec = {"study": "st", "rule": {"metric": "iops", "ci_rel_half_width": 0.03, "min_repetitions": 3,
                                   "max_repetitions": 10, "compare": "stripe"},
           "points": [{"factors": {"stripe": "<script>alert(1)</script>"}, "repetitions": 4, "stopped": "target",
                       "ci_rel_half_width": 0.021, "run_ids": ["a"]},
                      {"factors": {"stripe": "1"}, "repetitions": 10, "stopped": "budget",
                       "ci_rel_half_width": 0.05, "run_ids": []}],
           "comparisons": [{"comparison": "stripe=<img src=x onerror=alert(2)> vs 1", "decision": "different",
                            "n": 4, "ratio": 1.9, "ci_low": 1.5, "ci_high": 2.4, "ci_level": 0.9993}]}
    rec.update(over)
    (study / "precision.json").write_text(json.dumps(rec))
    return study


def test_precision_section_states_rule_runs_and_precision_with_values_escaped(tmp_path):
    from storagebench import show
    from storagebench.show import _html_of

    parts = show.precision_section(_record(tmp_path))
    page = "\n".join(str(_html_of(p)) for p in parts).replace("\\", "")  # Markdown's escapes
    assert "Chow" in page and "Lan-DeMets" in page and "or until it had 10 runs" in page
    assert "2 points used 14 runs in all (at most 20): 4 to 10 runs per point" in page
    assert "±2.1% to ±5.0% (target ±3.0%)" in page
    assert ">1.90<" in page and ">1.50<" in page and "repeated confidence interval" in page
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert show.precision_section(tmp_path) is None  # not an adaptive study: nothing to say


@pytest.mark.parametrize("over, words", [
    ({"rule": {"ci_rel_half_widht": 0.03}}, "did you mean 'ci_rel_half_width'"),
    ({"points": [{"factors": {"a": 1}, "repetitions": -1, "stopped": "target"}]}, "repetitions must be an integer"),
    ({"points": [{"factors": {"a": [1]}, "repetitions": 1, "stopped": "target"}]}, "factor levels must be scalars"),
    ({"points": [{"factors": {"a": 1}, "repetitions": 1, "stopped": "<b>x</b>"}]}, "stopped must be one of"),
    ({"points": [{"factors": {"a": 1}, "repetitions": 1, "stopped": "target", "ci_rel_half_width": "NaN"}]},
     "ci_rel_half_width must be a finite number"),
    ({"comparisons": [{"comparison": "x", "decision": "maybe", "n": 3}]}, "a decision of"),
    ({"comparisons": [{"comparison": "x", "decision": None, "n": 3, "ratio": "1e999"}]}, "ratio must be a finite"),
    ({"comparisons": [{"comparison": "x", "decision": None, "n": 3, "ci_level": 1.5}]}, "ci_level must be"),
    ({"points": {}}, "must be a mapping with points and comparisons lists"),
    ({"concurrent": "workload"}, "concurrent must be a list of at most 64 factor names, got 'workload'"),
    ({"concurrent": [["workload"]]}, "concurrent must be a list of at most 64 factor names"),
    ({"concurrent": [""]}, "concurrent must be a list"),
])
def test_a_bad_precision_record_is_refused_by_name(tmp_path, over, words):
    from storagebench._precision import read_precision
    from storagebench.errors import SchemaError

    with pytest.raises(SchemaError, match="precision.json") as exc:
        read_precision(_record(tmp_path, **over))
    assert words in str(exc.value)


def test_an_undecided_comparison_without_spread_says_why_it_has_no_interval(tmp_path):
    """A comparison the rule left undecided because neither arm had any spread (a ratio, no CI: every value of each
    arm identical, as a rate cap counted to the same I/O) is worded as that, not as a budget too small."""
    from storagebench._precision import NO_SPREAD, VERDICTS, read_precision

    rows = read_precision(_record(tmp_path, comparisons=[
        {"comparison": "flat", "decision": None, "n": 3, "ratio": 2.0, "ci_low": None, "ci_high": None},
        {"comparison": "wide", "decision": None, "n": 3, "ratio": 1.1, "ci_low": 0.8, "ci_high": 1.5},
        {"comparison": "short", "decision": None, "n": 1}]))["comparisons"]
    assert [r["verdict"] for r in rows] == [NO_SPREAD, VERDICTS[None], VERDICTS[None]]


def _hostile_record(tmp_path: Path, payload: str) -> Path:
    return _record(tmp_path, points=[
        {"factors": {payload: payload}, "repetitions": 3, "stopped": "target", "ci_rel_half_width": 0.02},
        {"factors": {payload: "b"}, "repetitions": 5, "stopped": "budget", "ci_rel_half_width": None}],
        comparisons=[{"comparison": payload, "decision": None, "n": 5}], concurrent=[payload])


def test_hostile_values_in_precision_json_reach_the_page_only_as_text(tmp_path):
    """The hostile-value suite's payloads planted in every string field of precision.json a reader sees (factor
    names, levels, comparison labels): every part of the section renders to a page with no problem, the payload
    shown as text. (The rule is checked by the spec's own gate; a planted rule value is refused above.)"""
    from test_html_gate import PAYLOADS, _page

    from storagebench import _html, show

    for i, payload in enumerate(PAYLOADS):
        (tmp_path / str(i)).mkdir()
        parts = show.precision_section(_hostile_record(tmp_path / str(i), payload))
        for part in parts:
            html = str(_html.render_markdown(part._repr_markdown_())) if hasattr(part, "_repr_markdown_") \
                else part.to_html()
            assert _html.page_problems(_html.secure_page(_page(html)).replace(str(_html.CSP_META), "", 0)) == [], html
        shown = part.to_html()
        assert payload.replace("\x00", "") in stdhtml_unescape(shown) or "\x00" in payload or "\n" in payload


def stdhtml_unescape(fragment: str) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("\x00", "")


def test_partial_banner_of_an_adaptive_sweep_says_runs_used_and_the_most_allowed(tmp_path):
    """A study with precision: plans max_repetitions per point, a maximum, not what it runs: the banner of a
    sweep still measuring says the runs used so far and the most the rule allows, not "planned runs"."""
    from storagebench._store import StudyStore
    from storagebench.errors import PublishError
    from storagebench.publish import partial_banner

    for precision, words in (({"ci_rel_half_width": 0.03, "max_repetitions": 10},
                               "0 runs used so far, of at most 60 that precision: allows (max_repetitions; the "
                               "adaptive sweep stops each point once it is answered)"),
                              (None, "0 of 18 planned runs done")):
        spec = {**_spec(**(precision or {})), "name": f"ad{'a' if precision else 'f'}"}
        if precision is None:
            spec = {**{k: v for k, v in spec.items() if k != "precision"}, "repetitions": 3}
        study = load_study(spec)
        store = StudyStore(tmp_path / study.name)
        with store.lock():
            store.ensure_spec(study)
            banner = partial_banner(store.root, partial=True)
            assert words in banner and ("planned" in banner) == (precision is None), banner
            with pytest.raises(PublishError) as exc:
                partial_banner(store.root)
            assert words in str(exc.value)
        assert partial_banner(store.root, partial=True) is None  # the lock released: no banner
