"""Study spec validation, grid expansion, stable run ids, seeded run order."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storagebench._specvalues import RW_VALUES
from storagebench._study import load_study
from storagebench.errors import StudyError

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
name: t
factors:
  rw: [randread, read]
  iodepth: [1, 2, 4]
fixed:
  ioengine: libaio
  direct: 1
runtime: 1
size: 16m
repetitions: 2
seed: 7
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, must_name",
    [
        (GOOD + "runtme: 5\n", ["runtme", "unknown key", "runtime"]),
        (GOOD.replace("[randread, read]", "[randread, randwite]"), ["factors.rw", "randwite", "must be one of"]),
        (GOOD.replace("[1, 2, 4]", "[1, -2, 4]"), ["factors.iodepth", "-2", "an integer from 1 to"]),
        (GOOD.replace("[1, 2, 4]", "[]"), ["factors.iodepth", "non-empty list"]),
        (GOOD.replace("iodepth: [1, 2, 4]", "iodepth: [1, 2, 4"), ["not valid YAML"]),
        (GOOD.replace("direct: 1", "direct: 2"), ["fixed.direct", "must be 0 or 1", "2"]),
        (GOOD.replace("direct: 1", "rwmixred: 70"), ["fixed.rwmixred", "not an option fio-3.33 knows", "rwmixread"]),
        (GOOD.replace("direct: 1", "exec_prerun: rm -rf /tmp/x"), ["exec_prerun", "runs a program"]),
        (GOOD.replace("ioengine: libaio", "ioengine: exec"), ["ioengine=exec"]),
        (GOOD.replace("ioengine: libaio", "ioengine: libaoi"), ["fixed.ioengine", "libaoi", "must be one of"]),
        (GOOD.replace("direct: 1", "runtime: 5"), ["fixed.runtime", "set by the runner"]),
        (GOOD.replace("size: 16m", "size: 16q"), ["size", "16q"]),
        (GOOD.replace("runtime: 1", "runtime: -1"), ["runtime", "-1"]),
        (GOOD.replace("repetitions: 2", "repetitions: 0"), ["repetitions", "0"]),
        (GOOD.replace("[1, 2, 4]", "[1, 2, 2]"), ["factors.iodepth", "distinct", "2"]),
        (GOOD.replace("rw: [randread, read]", "rw: randread"), ["factors.rw", "must be a list of levels", "randread"]),
        (GOOD.replace("name: t", "name: a b"), ["name", "a b"]),
    ],
)
def test_invalid_specs_name_the_key_and_value(tmp_path, text, must_name):
    with pytest.raises(StudyError) as info:
        load_study(_write(tmp_path, text))
    msg = str(info.value)
    for word in must_name:
        assert word in msg, (word, msg)


def test_bad_rw_message_lists_allowed_values(tmp_path):
    with pytest.raises(StudyError) as info:
        load_study(_write(tmp_path, GOOD.replace("[randread, read]", "[randread, randwite]")))
    assert "factors.rw: must be one of [" + ", ".join(RW_VALUES) + "] (optionally ':N'), got 'randwite'" in str(info.value)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(StudyError, match="study spec does not exist"):
        load_study(tmp_path / "nope.yaml")
    with pytest.raises(StudyError, match="must be a mapping"):
        load_study(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(StudyError, match="name: required key is missing"):
        load_study({"factors": {"iodepth": [1]}})


def test_allow_exec_lets_exec_options_through():
    spec = {"name": "x", "fixed": {"exec_prerun": "true"}, "allow_exec": True}
    assert load_study(spec).fixed["exec_prerun"] == "true"


def test_option_set_twice_is_refused():
    with pytest.raises(StudyError, match=r"factors\.bs: also set by fixed"):
        load_study({"name": "x", "fixed": {"bs": "4k"}, "factors": {"bs": ["8k"]}})
    with pytest.raises(StudyError, match=r"factors\.pattern\[0\]\.bs: also set by bs"):
        load_study({"name": "x", "factors": {"bs": ["8k"], "pattern": [{"name": "a", "bs": "4k"}]}})


def test_grid_size_and_points():
    study = load_study(_write_tmp(GOOD))
    plan = study.expand()
    assert len(plan) == 2 * 3 * 2
    combos = {(p.factors["rw"], p.factors["iodepth"], p.repetition) for p in plan}
    assert combos == set(itertools.product(["randread", "read"], [1, 2, 4], [1, 2]))
    assert sorted(p.run_order for p in plan) == list(range(len(plan)))
    for p in plan:
        assert len(p.run_id) == 12 and int(p.run_id, 16) >= 0
        assert p.options["rw"] == p.factors["rw"] and p.options["iodepth"] == p.factors["iodepth"]
        assert p.options["ioengine"] == "libaio" and p.options["direct"] == 1
        assert p.options["runtime"] == 1 and p.options["time_based"] is True and p.options["size"] == "16m"
        assert p.options["group_reporting"] == 1
    assert len(set(plan.run_ids)) == len(plan)
    frame = plan.to_frame()
    assert list(frame.columns) == ["run_id", "repetition", "run_order", "rw", "iodepth"]


def _write_tmp(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def test_mapping_levels_set_several_options_and_name_the_column():
    study = load_study({
        "name": "patterns",
        "factors": {
            "pattern": [
                {"name": "4k_randread", "rw": "randread", "bs": "4k"},
                {"name": "8k_7030", "rw": "randrw", "rwmixread": 70, "bs": "8k"},
            ],
            "stripe_width": [1, 4],
        },
        "labels": ["stripe_width"],
        "fixed": {"ioengine": "libaio"},
    })
    plan = study.expand()
    assert len(plan) == 4
    for p in plan:
        assert p.factors["pattern"] in ("4k_randread", "8k_7030")
        assert "stripe_width" not in p.options  # a study factor, not an fio option
        if p.factors["pattern"] == "8k_7030":
            assert (p.options["rw"], p.options["rwmixread"], p.options["bs"]) == ("randrw", 70, "8k")
        else:
            assert (p.options["rw"], p.options["bs"]) == ("randread", "4k") and "rwmixread" not in p.options
    with pytest.raises(StudyError, match=r"factors\.pattern\[1\]\.rw: must be one of"):
        load_study({"name": "x", "factors": {"pattern": [{"name": "a", "rw": "read"}, {"name": "b", "rw": "rread"}]}})


def test_run_ids_stable_across_processes_and_key_order():
    spec = _write_tmp(GOOD)
    ids = load_study(spec).expand().run_ids
    # same spec, fixed options written in another order: same runs
    spec2 = dict(spec, fixed=dict(reversed(list(spec["fixed"].items()))))
    assert set(load_study(spec2).expand().run_ids) == set(ids)
    code = (
        "import json,sys; from storagebench._study import load_study; "
        "print(json.dumps(load_study(json.loads(sys.argv[1])).expand().run_ids))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)
    assert tuple(json.loads(out.stdout)) == ids


def test_run_id_changes_with_every_option_and_repetition():
    base = load_study(_write_tmp(GOOD)).expand()
    longer = load_study(dict(_write_tmp(GOOD), runtime=2)).expand()
    assert not set(base.run_ids) & set(longer.run_ids)
    other_fixed = load_study(dict(_write_tmp(GOOD), fixed={"ioengine": "psync", "direct": 1})).expand()
    assert not set(base.run_ids) & set(other_fixed.run_ids)
    reps = {}
    for p in base:
        reps.setdefault((p.factors["rw"], p.factors["iodepth"]), set()).add(p.run_id)
    assert all(len(v) == 2 for v in reps.values())


def test_run_order_is_seeded_shuffle():
    spec = _write_tmp(GOOD)
    a = load_study(spec).expand()
    b = load_study(spec).expand()
    c = load_study(dict(spec, seed=8)).expand()
    assert a.run_ids == b.run_ids
    assert set(a.run_ids) == set(c.run_ids) and a.run_ids != c.run_ids
    grid_order = [(p.factors["rw"], p.factors["iodepth"], p.repetition) for p in a]
    assert grid_order != sorted(grid_order) and grid_order != sorted(grid_order, reverse=True)


def test_spec_hash_ignores_description_not_content():
    spec = _write_tmp(GOOD)
    h = load_study(spec).spec_hash
    assert load_study(dict(spec, description="reworded", timeout=999)).spec_hash == h
    assert load_study(dict(spec, runtime=3)).spec_hash != h
    assert load_study(dict(spec, seed=3)).spec_hash != h


def test_timeout_default_is_generous():
    s = load_study({"name": "x", "runtime": 60, "ramp_time": 10})
    assert s.timeout_s >= 70 + 120
    assert load_study({"name": "x", "timeout": 5}).timeout_s == 5


def test_committed_studies_load():
    qd = load_study(ROOT / "data" / "studies" / "qd_threads.yaml")
    assert len(qd.expand()) == 4 * 8 * qd.repetitions
    assert qd.factors["iodepth"] == [1, 2, 4, 8, 16, 32, 64, 128] and qd.factors["numjobs"] == [1, 2, 4, 8]
    assert qd.fixed["rw"] == "randread" and qd.fixed["bs"] == "4k" and qd.fixed["direct"] == 1
    demo = load_study(ROOT / "data" / "studies" / "demo.yaml")
    assert len(demo.expand()) == 2 * 6 * 3  # numjobs 1, 4 x iodepth 1..32 x 3 runs: 36 runs, ~2.5 min
    assert demo.factors["numjobs"] == [1, 4] and demo.factors["iodepth"] == [1, 2, 4, 8, 16, 32]
    assert (demo.runtime, demo.ramp_time, demo.size, demo.repetitions) == (2, 1, "256m", 3)


def test_hosts_forms():
    assert load_study({"name": "x", "hosts": ["127.0.0.1,8765", "localhost"]}).hosts == ["127.0.0.1,8765", "localhost"]
    assert load_study({"name": "x", "hosts": "hosts.txt"}).hosts == "hosts.txt"
    with pytest.raises(StudyError, match="hosts"):
        load_study({"name": "x", "hosts": []})


# ---- the clients factor (client/server scale-out) -------------------------------------------

HOSTS3 = ["127.0.0.1,18860", "127.0.0.1,18861", "127.0.0.1,18862"]


def _clients_spec(**extra) -> dict:
    spec = {"name": "cl", "factors": {"clients": [1, 2, 3], "bs": ["4k", "64k"]},
            "fixed": {"rw": "randread"}, "runtime": 1, "repetitions": 2, "seed": 5, "hosts": HOSTS3}
    spec.update(extra)
    return spec


@pytest.mark.parametrize("extra, must_name", [
    ({"hosts": None}, ["factors.clients", "needs 'hosts'", "[1, 2, 3]"]),
    ({"hosts": HOSTS3[:2]}, ["factors.clients", "level 3 needs 3 hosts", "levels must be <= 2"]),
    ({"factors": {"clients": [0, 1]}}, ["factors.clients", "positive integers", "[0]"]),
    ({"factors": {"clients": [1, "2"]}}, ["factors.clients", "positive integers", "['2']"]),
    ({"factors": {"clients": [True]}}, ["factors.clients", "positive integers", "[True]"]),
    ({"factors": {"clients": [{"name": "two", "bs": "4k"}]}}, ["factors.clients", "positive integers"]),
])
def test_clients_factor_refused_without_hosts_or_beyond_them(extra, must_name):
    spec = {k: v for k, v in _clients_spec(**extra).items() if v is not None}
    with pytest.raises(StudyError) as ei:
        load_study(spec)
    for s in must_name:
        assert s in str(ei.value), (s, str(ei.value))


def test_clients_factor_one_plan_interleaved_and_hosts_prefix():
    study = load_study(_clients_spec())
    plan = study.expand()
    assert len(plan) == 3 * 2 * 2
    # clients enters the run id like any factor: 12 distinct runs, distinct from the same spec without it
    assert len(set(plan.run_ids)) == 12
    levels = [p.factors["clients"] for p in plan]
    # seed 5: the run order interleaves client counts: grouped by count (the old sub-study
    # workaround, 1,1,..,2,2,..,3,3,..) would be exactly 3 blocks of equal levels
    blocks = [n for n, _ in itertools.groupby(levels)]
    assert len(blocks) > 3, levels
    assert all("clients" not in p.options for p in plan)  # not a fio option: nothing in the job file
    for p in plan:
        assert study.hosts_for(p) == HOSTS3[: p.factors["clients"]]
    # a host file is read at run time: a level beyond its hosts is refused then
    from_file = load_study(_clients_spec(hosts="hosts.txt"))
    with pytest.raises(StudyError, match=r"level 3 needs 3 hosts, but hosts has 2"):
        for p in from_file.expand():
            from_file.hosts_for(p, HOSTS3[:2])
    # without a clients factor every point runs on every host; a local study has none
    assert load_study(_clients_spec(factors={"bs": ["4k"]})).hosts_for(plan.points[0]) == HOSTS3
    assert load_study({"name": "local"}).hosts_for(plan.points[0]) is None


# ---- specs bounded before expansion (issue 8 item 5) -------------------------------------------


@pytest.mark.parametrize("spec, words", [
    ({"name": "x\n"}, ["name", "'x\\n'", "1-64 letters, digits and _.+-"]),
    ({"name": "a" * 65}, ["name", "1-64 letters"]),
    ({"name": "-x"}, ["name", "starting with a letter or digit"]),
    ({"name": "x", "factors": {"a b": [1]}}, ["factors: a factor name must be", "'a b'"]),
    ({"name": "x", "factors": {"p": [{"name": "ok\n", "rw": "read"}]}}, ["factors.p[0].name", "'ok\\n'"]),
    ({"name": "x", "factors": {"sw": ["a;b"]}}, ["factors.sw[0]", "'a;b'", "1-64 letters"]),
    ({"name": "x", "factors": {"p": [{"name": True, "rw": "read"}]}}, ["factors.p[0].name", "True"]),
    ({"name": "x", "factors": {"bs": [4096, "8k"]}}, ["factors.bs", "one type", "integer 4096", "string '8k'"]),
    ({"name": "x", "factors": {"sw": [0.5, 1]}}, ["factors.sw", "one type", "float 0.5", "integer 1"]),
    ({"name": "x", "factors": {"sw": {"a", "b"}}}, ["factors.sw", "must be a list of levels", "set"]),
    ({"name": "x", "factors": {"iops": [1, 2]}}, ["factors.iops", "column of the tidy runs table"]),
    ({"name": "x", "runtime": 1e-7}, ["runtime", "whole microseconds"]),
    ({"name": "x", "runtime": 30 * 86400 + 1}, ["runtime", "at most 2,592,000 s", "2592001"]),
    ({"name": "x", "runtime": "60"}, ["runtime", "a number of seconds", "'60'"]),
    ({"name": "x", "ramp_time": float("nan")}, ["ramp_time", "finite", "nan"]),
    ({"name": "x", "timeout": float("inf")}, ["timeout", "finite", "inf"]),
    ({"name": "x", "repetitions": 1001}, ["repetitions", "from 1 to 1,000", "1001"]),
    ({"name": "x", "repetitions": True}, ["repetitions", "bool True"]),
    ({"name": "x", "seed": 2**64}, ["seed", "beyond 64 bits"]),
    ({"name": "x", "seed": -1}, ["seed", "from 0 to 18,446,744,073,709,551,615", "-1"]),
    ({"name": "x", "size": "8388608p"}, ["size", "2**63-1 bytes", "8388608p"]),
    ({"name": "x", "size": True}, ["size", "True"]),
    ({"name": "x", "fixed": {"randrepeat": 2}}, ["fixed.randrepeat", "fio boolean: must be 0 or 1", "2"]),
    ({"name": "x", "fixed": {"randrepeat": None}}, ["fixed.randrepeat", "0 or 1"]),
    ({"name": "x", "fixed": {"rate_iops": None}}, ["fixed.rate_iops", "requires an argument"]),
    ({"name": "x", "fixed": {"rate_iops": 2**63}}, ["fixed.rate_iops", "signed 64-bit", str(2**63)]),
    ({"name": "x", "fixed": {"description": "a\u2028b"}}, ["fixed.description", "control characters", "\\u2028"]),
    ({"name": "x", "fixed": {"description": "d" * 5000}}, ["fixed.description", "5,000 characters", "ddd..."]),
    ({"name": "x", "target": "/tmp/a;b"}, ["target", "';'"]),
    ({"name": "x", "hosts": ["h\n1"]}, ["hosts", "host[,port]", "'h\\n1'"]),
    ({"name": "x", "allow_remote": {"h;1": ["/dev/sdb"]}}, ["allow_remote", "'h;1'"]),
    ({"name": "x", "description": "a\x1b[2Jb"}, ["description", "control character", "\\x1b"]),
])
def test_bounds_name_the_key_the_value_and_what_is_allowed(spec, words):
    with pytest.raises(StudyError) as info:
        load_study(spec)
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)
    assert "\n" not in msg and len(msg) < 600, msg


def test_bounds_keep_what_committed_specs_use():
    s = load_study({"name": "a+b.c-1", "factors": {"p": [{"name": 1, "target": "w1"}, {"name": 4, "target": "w4"}],
                                                   "sw": [0.5, 1.0], "flag": [True, False]},
                    "labels": ["sw", "flag"],
                    "runtime": 0.5, "ramp_time": 0.25, "seed": 2**64 - 1, "repetitions": 1000, "size": "1p",
                    "fixed": {"randrepeat": True, "norandommap": None, "description": "d" * 4096},
                    "description": "two lines\n\tand a tab"})
    assert s.n_runs == 2 * 2 * 2 * 1000
    assert s.check_max_runs() == 8000


def test_a_true_boolean_is_rendered_as_1_and_fio_reads_it(tmp_path, fio_bin):
    from storagebench._jobfile import render_jobfile, rendered_options, verify_fio_parse

    study = load_study({"name": "b", "fixed": {"randrepeat": True, "norandommap": True, "direct": True}, "runtime": 1})
    point = study.expand().points[0]
    text = render_jobfile(point, study, tmp_path / "data")
    lines = text.splitlines()
    assert "randrepeat=1" in lines and "norandommap" in lines and "direct=1" in lines
    path = tmp_path / "b.fio"
    path.write_text(text)
    verify_fio_parse(path, rendered_options(point, tmp_path / "data"), fio_bin)  # fio: "requires an argument" before


def test_safe_name_from_free_text():
    from storagebench._specvalues import safe_name

    assert safe_name("4K; 70% Read; 100% random") == "4K_70pct_Read_100pct_random"
    assert safe_name("..\n[global]") == "global"
    assert safe_name("é") == "x" and len(safe_name("a" * 300)) == 64
