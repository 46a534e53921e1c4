"""The design keys of a spec: set-ups, setup_factors, blocks, concurrent groups, and the quick variant."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from storagebench._study import load_study
from storagebench.errors import StudyError

BASE = {
    "name": "design",
    "factors": {"arm": [{"name": "a", "target": "ta"}, {"name": "b", "target": "tb"}],
                "pattern": [{"name": "r4k", "rw": "randread", "bs": "4k"}, {"name": "w4k", "rw": "randwrite", "bs": "4k"}],
                "workload": [{"name": "x", "iodepth": 1}, {"name": "y", "iodepth": 4}]},
    "runtime": 1, "size": "1m", "seed": 7,
}


def _spec(**kw):
    return load_study({**BASE, **kw})


def test_defaults_keep_the_old_plan_hash_and_yaml():
    plain = _spec()
    explicit = _spec(setups=1, setup_factors=[], blocks=False, concurrent=[])
    assert plain.spec_hash == explicit.spec_hash
    assert "setups" not in plain.to_yaml() and "blocks" not in plain.to_yaml()
    plan = plain.expand()
    # the order of earlier versions: runs sorted by SHA-256 of (seed, run_id)
    ids = sorted(plan.run_ids, key=lambda r: hashlib.sha256(f"7:{r}".encode()).hexdigest())
    assert list(plan.run_ids) == ids
    assert all(p.setup == 1 and p.block is None for p in plan)
    assert "setup" not in plan.points[0].to_dict("design") and "setup" not in plan.to_frame().columns
    assert len(plan.units()) == 1 and all(len(g) == 1 for g in plan.groups())


def test_setups_blocks_and_units():
    s = _spec(setups=3, setup_factors=["arm"], blocks=True, repetitions=2)
    plan = s.expand()
    assert len(plan) == s.n_runs == 2 * 2 * 2 * 2 * 3
    units = plan.units()
    assert len(units) == 6  # 3 set-ups x 2 arms
    # block b holds the b-th set-up of every arm, blocks in sequence, arms shuffled within blocks
    assert [u.block for u in units] == [1, 1, 2, 2, 3, 3] and [u.setup for u in units] == [1, 1, 2, 2, 3, 3]
    assert {tuple(u.arm["arm"] for u in units[i:i + 2]) for i in (0, 2, 4)} == {("a", "b"), ("b", "a")}
    for u in units:
        assert {p.factors["arm"] for p in u.points} == {u.arm["arm"]} and len(u.points) == 8
        assert all(p.setup == u.setup and p.block == u.setup for p in u.points)
        # within a set-up, repetition r before r + 1 (blocks of runs)
        reps = [p.repetition for p in u.points]
        assert reps == sorted(reps)
    # the set-up is part of the run id: the same point in two set-ups is two runs
    keys = Counter((p.factors["arm"], p.factors["pattern"], p.factors["workload"], p.repetition) for p in plan)
    assert set(keys.values()) == {3} and len(set(plan.run_ids)) == len(plan)
    assert [p.run_order for p in plan] == list(range(len(plan)))
    d = plan.points[0].to_dict("design")
    assert d["setup"] == 1 and d["block"] == 1
    assert {"setup", "block"} <= set(plan.to_frame().columns)
    # the same spec plans the same order; another seed another one
    assert s.expand().run_ids == plan.run_ids
    assert _spec(setups=3, setup_factors=["arm"], blocks=True, repetitions=2, seed=8).expand().run_ids != plan.run_ids


def test_unblocked_setups_and_whole_testbed_units():
    s = _spec(setups=2)  # no setup_factors: one build holds every arm
    units = s.expand().units()
    assert [u.setup for u in units] in ([1, 2], [2, 1]) and all(u.arm == {} and u.block is None for u in units)
    assert all(len(u.points) == 8 for u in units)
    blocked = _spec(blocks=True, repetitions=3).expand()  # no set-ups: block = repetition
    assert [p.block for p in blocked] == sorted(p.block for p in blocked)
    assert all(p.block == p.repetition for p in blocked)


def test_concurrent_groups_are_adjacent_and_whole():
    s = _spec(setups=2, setup_factors=["arm"], concurrent=["workload"], repetitions=2)
    plan = s.expand()
    groups = plan.groups()
    assert len(groups) == len(plan) // 2
    for g in groups:
        assert [p.factors["workload"] for p in g] == ["x", "y"]
        assert len({(p.setup, p.repetition, p.factors["arm"], p.factors["pattern"]) for p in g}) == 1
        assert g[1].run_order == g[0].run_order + 1
    for u in plan.units():
        assert sum(len(g) for g in u.groups) == len(u.points)


def test_quick_variant_from_the_yaml_keys():
    s = _spec(setups=4, setup_factors=["arm"], blocks=True, test_factors={"pattern": ["w4k"], "arm": ["b", "a"]},
              test_settings={"runtime": 0.5, "setups": 2, "size": "64k"})
    q = s.test_variant()
    assert q.name == "design-quick" and q.runtime == 0.5 and q.setups == 2 and q.size == "64k"
    assert [lv["name"] for lv in q.factors["pattern"]] == ["w4k"]
    assert [lv["name"] for lv in q.factors["arm"]] == ["a", "b"]  # the order of factors, not of test_factors
    assert q.test_factors == {} and q.test_settings == {}
    assert q.n_runs == 1 * 2 * 2 * 2
    # the quick grid is not part of the study's hash: editing it does not make a different study
    other = _spec(setups=4, setup_factors=["arm"], blocks=True, test_factors={"pattern": ["r4k"]})
    assert other.spec_hash == s.spec_hash != q.spec_hash
    assert "test_factors" in s.to_yaml()
    again = load_study(s.spec_dict())
    assert again.test_variant().spec_hash == q.spec_hash


@pytest.mark.parametrize("bad, match", [
    ({"setups": 0}, r"setups: must be an integer from 1 to 100"),
    ({"setups": 1.5}, r"setups: must be an integer"),
    ({"setups": "3"}, r"setups: must be an integer"),
    ({"setups": 101}, r"setups: must be an integer from 1 to 100"),
    ({"blocks": "yes"}, r"blocks: must be true or false"),
    ({"blocks": 1}, r"blocks: must be true or false"),
    ({"setup_factors": ["nope"]}, r"setup_factors: 'nope' is not a factor of this study; must be one of \['arm'"),
    ({"setup_factors": "arm"}, r"setup_factors: must be a list of factor names"),
    ({"setup_factors": ["arm", "arm"]}, r"more than once"),
    ({"concurrent": ["workload"], "setup_factors": ["workload"]}, r"concurrent: \['workload'\] also in setup_factors"),
    ({"concurrent": ["x"]}, r"concurrent: 'x' is not a factor"),
    ({"factors": {"setup": [1, 2]}}, r"factors.setup: 'setup' is a column the plan adds"),
    ({"factors": {"block": ["a", "b"]}}, r"factors.block"),
    ({"test_factors": {"nope": ["a"]}}, r"test_factors.nope: not a factor"),
    ({"test_factors": {"arm": ["c"]}}, r"test_factors.arm: 'c' is not a level of factors.arm; must be one of \['a', 'b'\]"),
    ({"test_factors": {"arm": []}}, r"test_factors.arm: must be a non-empty list"),
    ({"test_factors": {"arm": ["a", "a"]}}, r"levels must be distinct"),
    ({"test_settings": {"seed": 3}}, r"unknown key\(s\) \['seed'\]: the quick variant may change only"),
    ({"test_settings": {"runtime": -1}}, r"the quick variant .*runtime: must be > 0 s"),
    ({"test_settings": {"setups": 0}}, r"the quick variant .*setups: must be an integer from 1"),
    ({"test_settings": [1]}, r"test_settings: must be a mapping"),
    ({"fixed": {"bs": ""}}, r"fixed.bs: must be a positive block size"),
])
def test_bad_design_keys_are_refused_naming_key_and_value(bad, match):
    with pytest.raises(StudyError, match=match):
        _spec(**bad)


def test_quick_name_too_long_is_refused():
    with pytest.raises(StudyError, match="quick variant"):
        load_study({**BASE, "name": "n" * 60, "test_settings": {"runtime": 0.5}})
