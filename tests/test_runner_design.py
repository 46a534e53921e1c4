"""run_study with set-ups built by a testbed, concurrency groups, and exact resume at both levels.

Real fio runs of 1 s on files in tmp directories; the "testbed" here makes a fresh directory per
set-up (a new file placement each build), so no root is needed. Loop devices: tests/test_studies_testbed.py.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from storagebench._runner import SetUp, run_study
from storagebench._store import StudyStore
from storagebench._study import load_study
from storagebench.errors import StudyError
from storagebench.ingest import ingest_study

SPEC = {
    "name": "designrun",
    "factors": {"arm": [{"name": "a", "target": "ta"}, {"name": "b", "target": "tb"}],
                "rw": ["randread", "randwrite"]},
    "fixed": {"bs": "4k", "ioengine": "psync", "write_iops_log": "iops", "log_avg_msec": 1000},
    "runtime": 1, "size": "1m", "seed": 3, "setups": 2, "setup_factors": ["arm"], "blocks": True,
}


class FileBed:
    """A testbed of plain files: every build a new directory under ``root``; counts what it built."""

    def __init__(self, root: Path):
        self.root = root
        self.built: list[tuple[int, dict]] = []

    @contextlib.contextmanager
    def __call__(self, unit):
        d = self.root / f"build-{len(self.built)}"
        d.mkdir(parents=True)
        self.built.append((unit.setup, dict(unit.arm)))
        targets = {f"t{lv}": str(d / f"{lv}.dat") for lv in ("a", "b")}
        try:
            yield SetUp(targets=targets, devices=({"kind": "directory", "path": str(d)},), notes=(f"files in {d}",))
        finally:
            shutil.rmtree(d)


def _point(run_dir: Path) -> dict:
    return json.loads((run_dir / "point.json").read_text())


def _prov(run_dir: Path) -> dict:
    return json.loads((run_dir / "provenance.json").read_text())


def test_each_set_up_is_built_recorded_and_resumed_as_a_whole(tmp_path, fio_bin):
    study = load_study(SPEC)
    bed = FileBed(tmp_path / "bed")
    out = tmp_path / "results"
    res = run_study(study, out_dir=out, fio_bin=fio_bin, progress=False, testbed=bed)
    assert res.ok and len(res.completed) == len(study.expand()) == 8
    units = study.expand().units()
    assert bed.built == [(u.setup, u.arm) for u in units] and len(res.builds) == 4
    store = StudyStore(out / "designrun")
    records = store.setup_records()
    assert [r.build_id for r in records] == list(res.builds)
    for r, u in zip(records, units, strict=True):
        assert (r.setup, r.block, r.arm, r.run_ids) == (u.setup, u.block, u.arm, u.run_ids)
        for rid in u.run_ids:  # every run keeps the build it was measured on
            assert _prov(store.run_dir(rid))["set_up"] == {"setup": u.setup, "block": u.block, "arm": u.arm,
                                                           "build_id": r.build_id}
            assert _point(store.run_dir(rid))["setup"] == u.setup
    runs = ingest_study(out / "designrun").runs
    assert {"setup", "block"} <= set(runs.columns)
    assert sorted(runs.groupby(["arm", "setup"]).run_id.nunique()) == [2, 2, 2, 2]
    # a set-up measured in part: its other run is moved aside, the set-up built and measured again
    victim_unit = units[2]
    gone = victim_unit.run_ids[1]
    shutil.rmtree(store.run_dir(gone))
    bed.built.clear()
    again = run_study(study, out_dir=out, fio_bin=fio_bin, progress=False, testbed=bed)
    assert bed.built == [(victim_unit.setup, victim_unit.arm)]  # nothing else is rebuilt
    assert set(again.completed) == set(victim_unit.run_ids) and set(again.set_aside) == {victim_unit.run_ids[0]}
    assert len(again.skipped) == 6 and len(again.builds) == 1
    aside = store.set_aside_runs()
    kept = aside[victim_unit.run_ids[0]][0]
    assert (kept / "output.json").exists()  # moved aside, not deleted
    reason = json.loads((kept.parent / "reason.json").read_text())
    assert "interrupted after 1 of its 2 runs" in reason["reason"] and reason["setup"] == victim_unit.setup
    new_build = again.builds[0]
    for rid in victim_unit.run_ids:
        assert _prov(store.run_dir(rid))["set_up"]["build_id"] == new_build
    assert len(store.setup_records()) == 5
    # nothing left to do: no build at all
    bed.built.clear()
    third = run_study(study, out_dir=out, fio_bin=fio_bin, progress=False, testbed=bed)
    assert bed.built == [] and third.completed == () and len(third.skipped) == 8
    # ingest reads raw/ only: the run moved aside is not a replicate
    assert ingest_study(out / "designrun").runs.run_id.nunique() == 8


def test_setups_need_a_testbed(tmp_path, fio_bin):
    with pytest.raises(StudyError, match="setups: 2 builds each arm's testbed afresh 2 times, so it needs a testbed"):
        run_study(load_study(SPEC), out_dir=tmp_path, fio_bin=fio_bin, progress=False,
                  targets={"ta": str(tmp_path / "a"), "tb": str(tmp_path / "b")})
    assert not (tmp_path / "designrun").exists()


def test_a_testbed_must_yield_a_set_up(tmp_path, fio_bin):
    @contextlib.contextmanager
    def wrong(unit):
        yield {"ta": str(tmp_path / "a")}

    with pytest.raises(StudyError, match="must yield a storagebench._runner.SetUp, got dict"):
        run_study(load_study(SPEC), out_dir=tmp_path, fio_bin=fio_bin, progress=False, testbed=wrong)


def test_concurrent_groups_run_together_and_resume_whole(tmp_path, fio_bin):
    spec = {"name": "pairs", "factors": {"workload": [{"name": "x", "rw": "randread"}, {"name": "y", "rw": "randwrite"}]},
            "fixed": {"bs": "4k", "ioengine": "psync"}, "runtime": 1, "size": "1m", "repetitions": 2,
            "concurrent": ["workload"], "seed": 1}
    targets = tmp_path / "t"
    targets.mkdir()
    # one file per workload (two fio processes on one file would be one workload)
    x, y = spec["factors"]["workload"]
    study = load_study({**spec, "factors": {"workload": [{**x, "target": str(targets / "x")},
                                                         {**y, "target": str(targets / "y")}]}})
    res = run_study(study, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    assert res.ok and len(res.completed) == 4
    store = StudyStore(tmp_path / "r" / "pairs")
    for group in study.expand().groups():
        assert len(group) == 2
        spans = []
        for p in group:
            prov = _prov(store.run_dir(p.run_id))
            spans.append((datetime.fromisoformat(prov["started_at"].replace("Z", "+00:00")),
                          datetime.fromisoformat(prov["finished_at"].replace("Z", "+00:00"))))
        (s1, e1), (s2, e2) = spans
        overlap = (min(e1, e2) - max(s1, s2)).total_seconds()
        assert overlap > 0.5 * min((e1 - s1).total_seconds(), (e2 - s2).total_seconds())
    # half a group: the measured half is moved aside and the whole group measured again, together
    group = study.expand().groups()[1]
    shutil.rmtree(store.run_dir(group[0].run_id))
    again = run_study(study, out_dir=tmp_path / "r", fio_bin=fio_bin, progress=False)
    assert set(again.completed) == {p.run_id for p in group} and again.set_aside == (group[1].run_id,)
    assert len(again.skipped) == 2
    assert group[1].run_id in store.set_aside_runs()
    reason = json.loads((store.set_aside_runs()[group[1].run_id][0].parent / "reason.json").read_text())
    assert "measured again as a whole" in reason["reason"]


def test_study_data_and_the_set_up_analysis_on_a_file_testbed(tmp_path, fio_bin):
    """load_data/compare_arms/setup_variance (storagebench.studies) on real runs: the set-up is the unit."""
    import numpy as np

    from storagebench.stats import variance_components
    from storagebench.studies import load_data
    from storagebench.studies._base import compare_arms, setup_variance

    spec = {**SPEC, "factors": {"arm": SPEC["factors"]["arm"], "rw": ["randread"]}, "repetitions": 2}
    study = load_study(spec)
    run_study(study, out_dir=tmp_path, fio_bin=fio_bin, progress=False, testbed=FileBed(tmp_path / "bed"))
    data = load_data("designrun", tmp_path / "designrun")
    pr = data.per_run
    assert len(pr) == 8 and set(pr["setup"]) == {1, 2} and set(pr["block"]) == {1, 2}
    assert pr.groupby(["arm", "setup"])["build_id"].nunique().eq(1).all() and pr["build_id"].nunique() == 4
    assert (pr["steady"] == False).all()  # noqa: E712  1 s runs: no per-second round to test
    assert data.design() == {"unit": "setup", "pair_on": "block", "blocks": ["block"]}
    table, v, findings = compare_arms(data, "arm", "a", "iops", up="faster", down="slower")
    g = pr.assign(lg=np.log(pr["iops"])).groupby(["arm", "block"])["lg"].mean().unstack(0)
    assert v.loc[0, "ratio"] == np.exp((g["b"] - g["a"]).mean()) and v.loc[0, "n"] == "2"
    assert (findings[0].n, findings[0].unit_of_replication) == (2, "blocks; unit: set-up")
    assert v.loc[0, "runs"] == 8 and v.loc[0, "runs_not_steady"] == 8
    var, f = setup_variance(data, "iops", ["arm"])
    for _, row in var.iterrows():
        vc = variance_components(pr[pr["arm"] == row["arm"]], ["setup", "repetition"], "iops")
        t2 = np.clip(vc.t2, 0, None)
        assert row["setup_share"] == t2[0] / t2.sum() and (row["setups"], row["reps"]) == (2, 2)
    assert len(f) == 1 and f[0].kind == "variance" and "Kalibera & Jones" in f[0].sentence
    # a set-up holding runs of two builds (raw/ edited by hand) is refused
    rid = pr.loc[0, "run_id"]
    prov_path = tmp_path / "designrun" / "raw" / rid / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["set_up"]["build_id"] = "000000000000"
    prov_path.write_text(json.dumps(prov))
    with pytest.raises(StudyError, match="holds runs of 2 testbed builds"):
        load_data("designrun", tmp_path / "designrun")
