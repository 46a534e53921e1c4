"""fio's own steady-state detection as a run-length option (issue 21 item 2).

The spec accepts ``steadystate`` / ``steadystate_duration`` / ``steadystate_ramp_time`` (and fio's aliases
``ss`` / ``ss_dur`` / ``ss_ramp``) only when fio will apply them within the study's ``runtime``; a run records
the requested rule in ``provenance.json``; ingest reads fio's ``steadystate`` block into ``runs`` (``ss_*``);
and the sweep's write-up says how many runs fio stopped early and how many never became steady.

Real fio runs of 2 s on a small file: one rule fio meets at once (``iops:50%`` over a 1 s window: one sample
is its own mean) and one it cannot meet (``iops:0.001%`` over a 2 s window: two one-second IOPS samples never
agree to 10 ppm on a file in the page cache of a shared VM).
"""

from __future__ import annotations

import json

import pytest

from storagebench._runner import run_study
from storagebench._specvalues import steadystate_request
from storagebench._study import load_study
from storagebench.errors import StudyError
from storagebench.ingest import ingest_paths
from storagebench.stats.steady import steadystate_sentence

_BASE = {"name": "ss", "factors": {"iodepth": [1]}, "fixed": {"rw": "randread", "bs": "4k"}, "runtime": 2,
         "size": "8m"}


def _spec(**fixed):
    return {**_BASE, "fixed": {**_BASE["fixed"], **fixed}}


@pytest.mark.parametrize(("fixed", "words"), [
    ({"ss": "iops:50%"}, "needs steadystate_duration (ss_dur) > 0"),
    ({"steadystate": "bw:5%", "steadystate_duration": 0}, "needs steadystate_duration (ss_dur) > 0"),
    ({"ss": "iops:5%", "ss_dur": "2s", "ss_ramp": "500ms"}, "2.5 s, longer than runtime 2 s"),
    ({"ss": "iops:5%", "ss_dur": "3"}, "3 s, longer than runtime 2 s"),
    ({"ss": "iops_slope:1%", "ss_dur": 1}, "a slope needs a window of at least 2 s"),
    ({"ss_dur": 1}, "steadystate='iops_slope:0.01%': a slope needs a window of at least 2 s"),  # fio's default rule
], ids=["no-window", "zero-window", "window-plus-ramp", "window-over-runtime", "slope-1s", "default-rule-1s"])
def test_spec_refuses_a_rule_fio_would_not_apply(fixed, words):
    with pytest.raises(StudyError, match="steadystate") as info:
        load_study(_spec(**fixed))
    assert words in str(info.value)


def test_spec_refuses_it_in_a_factor_level_too():
    spec = {**_BASE, "factors": {"rule": [{"name": "a", "ss": "iops:5%", "ss_dur": 1},
                                          {"name": "b", "ss": "bw_slope:1%", "ss_dur": 1}]}}
    with pytest.raises(StudyError, match="bw_slope:1%.*at least 2 s"):
        load_study(spec)


def test_spec_accepts_a_rule_within_runtime_and_provenance_reads_it():
    study = load_study(_spec(ss="iops:5%", ss_dur="1s", ss_ramp="500ms"))
    (point,) = list(study.expand())
    assert steadystate_request(point.options, study.runtime) == {
        "rule": "iops:5%", "duration_s": 1.0, "ramp_time_s": 0.5, "runtime_s": 2.0}
    assert steadystate_request({"rw": "read"}, 2.0) is None
    assert steadystate_request({"steadystate_duration": "2"}, 3.0)["rule"] == "iops_slope:0.01%"  # fio's default


@pytest.fixture(scope="module")
def ss_sweep(tmp_path_factory, fio_bin):
    """One sweep of two runs: a rule fio meets at once and one it never meets."""
    tmp = tmp_path_factory.mktemp("ss")
    spec = {**_BASE, "factors": {"rule": [{"name": "loose", "ss": "iops:50%", "ss_dur": 1},
                                          {"name": "never", "ss": "iops:0.001%", "ss_dur": 2}]}}
    res = run_study(load_study(spec), target=tmp / "data", out_dir=tmp / "results", fio_bin=fio_bin,
                    progress=False)
    assert res.ok, res.errors
    ing = ingest_paths([tmp / "results" / "ss"])
    assert ing.ok, ing.errors
    return tmp / "results" / "ss", ing


def test_provenance_records_the_requested_rule(ss_sweep):
    study_dir, ing = ss_sweep
    by_rule = {}
    for prov in study_dir.glob("raw/*/provenance.json"):
        rec = json.loads(prov.read_text())["steadystate"]
        by_rule[rec["rule"]] = rec
    assert by_rule == {"iops:50%": {"rule": "iops:50%", "duration_s": 1.0, "ramp_time_s": 0.0, "runtime_s": 2.0},
                       "iops:0.001%": {"rule": "iops:0.001%", "duration_s": 2.0, "ramp_time_s": 0.0,
                                       "runtime_s": 2.0}}


def test_runs_table_has_fios_verdict(ss_sweep):
    _, ing = ss_sweep
    for table in (ing.runs, ing.run_totals):
        rows = table.set_index("rule")
        loose, never = rows.loc["loose"], rows.loc["never"]
        assert loose["ss_rule"] == "iops:50.000000%" and loose["ss_window_s"] == 1.0
        assert bool(loose["ss_attained"]) and loose["ss_criterion"] == 0.0
        assert loose["runtime_s"] < 1.9  # fio stopped it early, once steady
        assert never["ss_rule"] == "iops:0.001000%" and never["ss_window_s"] == 2.0
        assert not bool(never["ss_attained"]) and never["ss_criterion"] > 0.001
        assert never["runtime_s"] >= 1.99  # the full runtime


def test_write_up_says_which_runs_stopped_early_and_which_never_became_steady(ss_sweep):
    _, ing = ss_sweep
    text = steadystate_sentence(ing.run_totals)
    assert text.startswith("Run length: fio's own steady-state detection (iops:0.001000% over 2 s; "
                           "iops:50.000000% over 1 s) stopped 1 of 2 runs early, once steady (after ")
    assert "; 1 never became steady and ran their full runtime: their numbers are not steady-state numbers." in text
    # a table without the rule (older tidy/, another tool): nothing to say
    assert steadystate_sentence(ing.run_totals.drop(columns=["ss_rule"])) == ""
    assert steadystate_sentence(ing.run_totals.assign(ss_rule="")) == ""


def test_the_sentence_goes_through_the_html_gate(ss_sweep):
    """A hostile rule (fio's ss string is outside input) reaches the page escaped (show.markdown)."""
    from storagebench import show
    from storagebench._html import render_markdown

    _, ing = ss_sweep
    hostile = ing.run_totals.assign(ss_rule="<script>alert(1)</script>")
    html = str(render_markdown(str(show.markdown("* {}", steadystate_sentence(hostile)))))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(("block", "expect"), [
    ({"criterion": "abc%"}, {"ss_criterion": "nan"}),
    ({"criterion": "-nan%"}, {"ss_criterion": "nan"}),
    ({"criterion": "1e400%"}, {"ss_criterion": "nan"}),
    ({"criterion": "-3.5%"}, {"ss_criterion": -3.5}),
    ({"ss": "<b>x</b>\nrule"}, {"ss_rule": "<b>x</b>\nrule"}),
    ({"attained": 0}, {"ss_attained": False}),
    ({"attained": -1}, "refused"),
    ({"duration": "2"}, "refused"),
], ids=["criterion-text", "criterion-nan", "criterion-huge", "criterion-negative", "rule-markup", "not-attained",
        "attained-negative", "duration-string"])
def test_a_bad_steadystate_block_is_read_as_fio_means_it_or_refused(ss_sweep, tmp_path, block, expect):
    """fio's steadystate block is outside input: a criterion that is not a number becomes NaN (fio prints
    "-nan%" itself), a string stays a string (the HTML gate shows it), a count of the wrong type refuses the file
    naming the field, as any other count of fio's output."""
    study_dir, _ = ss_sweep
    src = next(p for p in sorted(study_dir.glob("raw/*/output.json")) if b'"iops:50.000000%"' in p.read_bytes())
    doc = json.loads(src.read_bytes())
    for job in doc["jobs"]:
        job["steadystate"].update(block)
    f = tmp_path / "out.json"
    f.write_text(json.dumps(doc))
    res = ingest_paths([f])
    if expect == "refused":
        assert not res.ok and "steadystate" in str(res.errors[0])
        return
    assert res.ok, res.errors
    row = res.runs.iloc[0]
    for col, want in expect.items():
        if want == "nan":
            assert row[col] != row[col]
        else:
            assert row[col] == want
