"""The HTML gate in a real browser: write-ups and the site index published from hostile values, opened in
Debian's headless Chromium (docs/SECURITY.md, section 1).

One hostile results tree is built per module (from committed captured fixtures, no fio run): every string
field a write-up shows is set to all :data:`test_html_gate.PAYLOADS` at once, joined by spaces, so that each
payload appears in every field in one build:

* the analysis write-up (``analyze.ipynb`` through :func:`publish_report`, as ``storagebench report`` runs it)
  of the demo study with every ``provenance.json`` field rewritten -- target (and its real path), hostname,
  fio version, kernel, OS, CPU model, device name/path/model/vendor/scheduler, filesystem type/mount
  point/source -- and the study name in ``point.json``;
* ``compare.ipynb`` on a table whose factor levels (``pattern``) are the payloads one each, with the
  experimental unit's words and the query's column hostile;
* ``studies/cross_tool.ipynb`` on the DiskSPD fixtures with their computer names and target paths rewritten
  against three 1-s fio runs, the two tool labels hostile;
* Iometer files with hostile access-specification names, read as a result set and shown as a write-up shows
  a result set's tables; and ``studies/cross_tool.ipynb`` on them against a 1-s fio run of the configuration
  of one Iometer test (4 KiB, 70 % read, 100 % random, 64 outstanding I/Os, one worker: a constructed pairing,
  since no Iometer twin of a fio run is committed) with hostile tool labels (the page names a configuration
  by its options, so the specification name reaches a page through the result set's table);
* ``studies/hdd_iops.ipynb`` and ``studies/vsan_stripe.ipynb`` on tables (``-p table=``/``stripe_table=``)
  with hostile job and target labels, stored under a directory path made of the payloads (the write-ups show
  the table's path as their source);
* ``studies/scaling.ipynb`` on the committed scale-out run (``study_dir=``) with every ``provenance.json``
  field and the study name in ``point.json`` hostile;
* ``studies/testbed.ipynb`` on a quick testbed study whose ``testbed.json`` (notes, targets, device paths,
  backing files, filesystem types) is hostile;
* the site index over all of them, plus one directory per payload named after it.

Each page is loaded with a canary (installed through CDP before any page script could run) that records
every ``alert``/``confirm``/``prompt``/``print``/``open`` call and every CSP violation. 0 may fire. The DOM
must hold no ``<script>``, no ``on*`` attribute and no ``javascript:``/``data:`` link, and the page must open
its ``<head>`` with the CSP. The same page with its CSP removed must run nothing either: escaping alone holds.
"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

import pytest
from conftest import FIXTURES
from test_html_gate import PAYLOADS
from test_report_browser import _load, _save_full_page, _screenshot_dir, browser  # noqa: F401 (fixture)

from storagebench import _html

#: Every payload in one value (NUL and lone surrogates are not storable in every format: replaced).
HOSTILE = " ".join(PAYLOADS).replace("\x00", "\ufffd")
#: The same on one line (for formats with one value per line).
HOSTILE_LINE = " ".join(HOSTILE.split())


def _rewrite_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _hostile_demo(target: Path) -> None:
    shutil.copytree(FIXTURES / "study_demo", target, ignore=shutil.ignore_patterns("tidy", "notebooks", "report.*"))

    def prov(d):
        for key in ("target", "target_realpath", "hostname", "fio_version", "kernel", "kernel_version", "os",
                    "cpu_model"):
            d[key] = HOSTILE
        d["device"].update(name=HOSTILE, path=HOSTILE, model=HOSTILE, vendor=HOSTILE, scheduler=HOSTILE,
                           model_note=HOSTILE)
        d["filesystem"].update(fstype=HOSTILE, mountpoint=HOSTILE, source=HOSTILE)

    for run in sorted((target / "raw").iterdir()):
        if run.is_dir():
            _rewrite_json(run / "provenance.json", prov)
            _rewrite_json(run / "point.json", lambda d: d.update(study=HOSTILE))


def _hostile_compare_table(path: Path) -> None:
    from storagebench.published import load_published

    df = load_published("vsan_stripe")
    levels = sorted(df["pattern"].unique())
    df["pattern"] = df["pattern"].map({lv: PAYLOADS[i % len(PAYLOADS)].replace("\x00", "") + f" #{i}"
                                       for i, lv in enumerate(levels)})
    df.to_csv(path, index=False)


def _hostile_loadgen(directory: Path) -> None:
    directory.mkdir()
    for src in sorted((FIXTURES / "diskspd").iterdir()):
        if src.suffix == ".xml":
            text = src.read_text(encoding="utf-8-sig")
            text = re.sub(r"<ComputerName>[^<]*</ComputerName>", f"<ComputerName>{xml_escape(HOSTILE_LINE)}"
                                                                 "</ComputerName>", text)
            text = re.sub(r"<Path>[^<]*</Path>", f"<Path>{xml_escape(HOSTILE_LINE)}</Path>", text)
            (directory / src.name).write_text(text, encoding="utf-8")
        elif src.suffix == ".txt":
            text = src.read_text(encoding="utf-8-sig")
            text = re.sub(r"(path: ')[^']*(')", lambda m: m[1] + HOSTILE_LINE.replace("'", "`") + m[2], text)
            (directory / src.name).write_text(text, encoding="utf-8")


def _hostile_iometer(directory: Path) -> None:
    directory.mkdir()
    for src in sorted((FIXTURES / "iometer").glob("*.csv")):
        text = src.read_text(encoding="utf-8-sig")
        text = text.replace("4 KiB; 70% Read; 100% random", HOSTILE_LINE.replace(",", ";"))
        (directory / src.name).write_text(text, encoding="utf-8")


def _fio_runs(directory: Path, fio_bin: str) -> None:
    """The three configurations the DiskSPD fixtures share, 1-s fio runs (tests/conftest.py's CROSSTOOL_FIO)."""
    from conftest import CROSSTOOL_FIO, run_fio_json

    directory.mkdir()
    for name, opts in CROSSTOOL_FIO.items():
        run_fio_json(directory, fio_bin, name, **opts)
    (directory / "target.dat").unlink()


def _hostile_testbed(target: Path) -> None:
    shutil.copytree(FIXTURES / "testbed_quick" / "stripe_width", target,
                    ignore=shutil.ignore_patterns("tidy", "notebooks", "analysis", "report.*"))

    def record(r):
        r["targets"] = {k: HOSTILE_LINE for k in r.get("targets", {})}
        r["notes"] = [HOSTILE_LINE, *r.get("notes", [])]
        for dev in r.get("devices", []):
            for key in ("path", "backing_file", "backing_fs", "fstype", "mountpoint", "profile", "role"):
                if key in dev:
                    dev[key] = HOSTILE_LINE
            if "devices" in dev:
                dev["devices"] = [HOSTILE_LINE]
        # a throttle's record (issue 20): hostile device paths and cgroup, caps that are no caps
        r.setdefault("devices", []).append({"kind": "throttle", "cgroup": HOSTILE_LINE, "cgroup_version": HOSTILE_LINE,
                                            "caps": {HOSTILE_LINE: {"riops": 200}, "/dev/loop9": {HOSTILE_LINE: 1}},
                                            "devnos": {HOSTILE_LINE: HOSTILE_LINE}})

    def edit(d):
        record(d["latest"])
        for r in d.get("set_ups", []):
            record(r)

    _rewrite_json(target / "testbed.json", edit)


def _hostile_path(base: Path) -> Path:
    """A directory whose path holds every payload (60 characters a component, ``/`` as U+2215)."""
    d, text = base, HOSTILE_LINE.replace("/", "\u2215")
    for i in range(0, len(text), 60):
        d = d / (text[i:i + 60].strip() or "_")
    d.mkdir(parents=True)
    return d


def _hostile_tables(directory: Path) -> None:
    """hdd_iops and vsan_stripe tables with hostile job/target labels (their levels and tools stay those the
    notebooks' published claims are about), under a hostile path."""
    from storagebench.published import load_published

    d = _hostile_path(directory)
    for name, file in (("hdd_iops", "hdd.csv"), ("vsan_stripe", "stripe.csv")):
        df = load_published(name)
        for col in ("job", "target", "note"):
            if col in df:
                df[col] = HOSTILE_LINE
        df.to_csv(d / file, index=False)
    (directory / "where").write_text(str(d))


def _hostile_scaling(target: Path) -> None:
    shutil.copytree(FIXTURES / "scaling_quick", target, ignore=shutil.ignore_patterns("README.md"))

    def prov(d):
        for key in ("target", "target_realpath", "hostname", "fio_version", "kernel", "kernel_version", "os",
                    "cpu_model"):
            d[key] = HOSTILE

    for run in sorted((target / "raw").iterdir()):
        if run.is_dir():
            _rewrite_json(run / "provenance.json", prov)
            _rewrite_json(run / "point.json", lambda d: d.update(study=HOSTILE))


def _fio_run_like_iometer(directory: Path, fio_bin: str) -> None:
    """One 1-s fio run of an Iometer fixture test's configuration (randrw 70 % read, 4 KiB, QD 64, 1 worker)."""
    from conftest import run_fio_json

    directory.mkdir()
    run_fio_json(directory, fio_bin, "rw7030qd64", rw="randrw", rwmixread=70, bs="4k", iodepth=64, numjobs=1)
    (directory / "target.dat").unlink()


#: name -> (notebooks, parameters); the study directory is made by :func:`hostile_pages`.
def _writeups(root: Path) -> dict:
    tables = (root / "tables" / "where").read_text()
    return {
        "hostile_demo": (None, None),
        "hostile_compare": (["compare.ipynb"], {"table": str(root / "compare.csv"), "factor": "stripe_width",
                                                "baseline": 1, "metric": "iops", "by": ["pattern", "source_tool"],
                                                "pair_on": ["vms"], "unit": HOSTILE}),
        "hostile_cross_tool": (["studies/cross_tool.ipynb"], {
            "results_a": str(root / "loadgen"), "results_b": str(root / "fio-runs"),
            "labels": [PAYLOADS[1], PAYLOADS[0]], "tool_col": "tool_label", "baseline": PAYLOADS[1], "match_on": [], "by": [], "sweep_table": "", "out_dir": str(root / "ct_out")}),
        "hostile_testbed": (["studies/testbed.ipynb"], {"study": "stripe_width"}),
        "hostile_iometer_cross_tool": (["studies/cross_tool.ipynb"], {
            "results_a": str(root / "iometer"), "results_b": str(root / "fio-iometer"),
            "labels": [PAYLOADS[1], PAYLOADS[0]], "tool_col": "tool_label", "baseline": PAYLOADS[1], "match_on": [],
            "by": [], "sweep_table": "", "out_dir": str(root / "ct_io_out")}),
        "hostile_hdd_iops": (["studies/hdd_iops.ipynb"], {"table": str(Path(tables) / "hdd.csv")}),
        # sweep_table stays the published one: the write-up's claims table needs its metadata
        "hostile_vsan_stripe": (["studies/vsan_stripe.ipynb"], {"stripe_table": str(Path(tables) / "stripe.csv")}),
        "hostile_scaling": (["studies/scaling.ipynb"], {"study_dir": str(root / "scaling_study")}),
    }


@pytest.fixture(scope="module")
def hostile_pages(tmp_path_factory, fio_bin) -> dict[str, Path]:
    """Every hostile write-up published once, the index over them and over one directory per payload."""
    from storagebench.publish import build_site, publish_report

    root = tmp_path_factory.mktemp("hostile")
    _hostile_demo(root / "hostile_demo")
    _hostile_compare_table(root / "compare.csv")
    _hostile_loadgen(root / "loadgen")
    _fio_runs(root / "fio-runs", fio_bin)
    _hostile_testbed(root / "hostile_testbed")
    _hostile_iometer(root / "iometer")
    _fio_run_like_iometer(root / "fio-iometer", fio_bin)
    _hostile_tables(root / "tables")
    _hostile_scaling(root / "scaling_study")
    pages, errors = {}, {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {}
        for name, (notebooks, params) in _writeups(root).items():
            (root / name).mkdir(exist_ok=True)
            jobs[name] = pool.submit(publish_report, root / name, notebooks=notebooks, parameters=params)
        for name, job in jobs.items():
            try:
                pages[name] = Path(job.result())
            except Exception as exc:  # reported by the test of that page, the others still run
                errors[name] = exc
    demo = pages.get("hostile_demo")
    if demo is not None:  # the site index also links directories named after every payload
        for i, p in enumerate(PAYLOADS):
            d = root / "named" / (p.replace("/", "\u2215").replace("\x00", "")[:120] + f" {i}")
            d.mkdir(parents=True)
            shutil.copy(demo, d / "report.html")
            shutil.copy(demo.with_suffix(".json"), d / "report.json")
    pages["index"] = build_site(root)[0]
    pages["_errors"] = errors
    return pages


_CANARY = """
window.__sb_fired = [];
window.__sb_violations = [];
for (const name of ['alert', 'confirm', 'prompt', 'print', 'open']) {
  const orig = window[name];
  window[name] = function (...args) { window.__sb_fired.push(name + '(' + args.join(',') + ')'); };
}
document.addEventListener('securitypolicyviolation', e => {
  window.__sb_violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""

_DOM = """
const bad = [];
for (const el of document.querySelectorAll('*')) {
  const tag = el.tagName.toLowerCase();
  if (['script', 'iframe', 'object', 'embed', 'base', 'form', 'frame', 'frameset', 'link'].includes(tag))
    bad.push('<' + tag + '>');
  if (tag === 'meta' && (el.getAttribute('http-equiv') || '').toLowerCase() === 'refresh') bad.push('meta refresh');
  for (const a of el.attributes) {
    const n = a.name.toLowerCase();
    const v = a.value.replace(/[\\s\\x00-\\x1f]/g, '').toLowerCase();
    if (n.startsWith('on')) bad.push(tag + ' ' + n);
    if (n === 'srcdoc') bad.push(tag + ' srcdoc');
    if (['href', 'action', 'formaction', 'xlink:href', 'data'].includes(n) &&
        (v.startsWith('javascript:') || v.startsWith('vbscript:') || v.startsWith('data:')))
      bad.push(tag + ' ' + n + '=' + v.slice(0, 30));
    if (n === 'src' && !v.startsWith('data:image/')) bad.push(tag + ' src=' + v.slice(0, 30));
  }
}
const head = document.head.firstElementChild;
return {bad: bad, csp: head && head.tagName === 'META' && head.httpEquiv === 'Content-Security-Policy'
                       ? head.content : null,
        csps: document.querySelectorAll('meta[http-equiv="Content-Security-Policy"]').length,
        text: document.body.innerText, links: Array.from(document.links).map(a => a.getAttribute('href'))};
"""


def _open(driver, page: Path) -> dict:
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _CANARY})
    _load(driver, page)
    # let deferred handlers (an image's onerror, ontoggle, a refresh) fire before looking
    driver.execute_async_script("const done = arguments[arguments.length - 1]; setTimeout(done, 300);")
    dom = driver.execute_script(_DOM)
    dom["fired"] = driver.execute_script("return window.__sb_fired")
    dom["violations"] = driver.execute_script("return window.__sb_violations")
    dom["console"] = driver.get_log("browser")
    return dom


PAGES = ["hostile_demo", "hostile_compare", "hostile_cross_tool", "hostile_testbed", "hostile_iometer_cross_tool",
         "hostile_hdd_iops", "hostile_vsan_stripe", "hostile_scaling", "index"]


@pytest.mark.slow
@pytest.mark.parametrize("name", PAGES)
def test_no_script_runs_in_a_hostile_writeup(browser, hostile_pages, name):  # noqa: F811
    if name in hostile_pages["_errors"]:
        raise hostile_pages["_errors"][name]
    page = hostile_pages[name]
    html = page.read_text()
    assert _html.page_problems(html) == []
    got = _open(browser, page)
    _save_full_page(browser, _screenshot_dir() / f"{name}.png")
    assert got["fired"] == [] and got["violations"] == [], (got["fired"], got["violations"])
    assert got["console"] == [], got["console"]
    assert got["bad"] == [], got["bad"]
    assert got["csp"] == _html.CSP and got["csps"] == 1
    # the values are on the page as text a reader sees (not eaten by the parser)
    shown = " ".join(got["text"].split())
    # (a table's path cannot hold "/" in a name: its "</script>" is "<\u2215script>")
    assert "onerror=alert(2)" in shown and "<script>alert(1)<" in shown, shown[:2000]
    if name == "index":
        assert len(got["links"]) >= len(PAYLOADS)
        assert all(h and ":" not in h and not h.startswith("/") and ".." not in h.split("/") for h in got["links"])
    # without the CSP, escaping alone holds: the same page runs nothing either
    bare = page.with_name(page.stem + ".nocsp.html")
    bare.write_text(html.replace(str(_html.CSP_META), "", 1))
    got = _open(browser, bare)
    bare.unlink()
    assert got["fired"] == [] and got["bad"] == [] and got["csp"] is None, (got["fired"], got["bad"])


@pytest.mark.slow
def test_every_field_holds_every_payload(hostile_pages):
    """The suite plants what it says: each write-up's page shows the hostile fields it was fed."""
    demo = hostile_pages["hostile_demo"].read_text()
    esc = str(_html.escape(PAYLOADS[1]))
    assert demo.count(esc) >= 5, demo.count(esc)  # provenance line, captions' provenance, meta line ...
    # the fields fed to the other write-ups reach their pages (as text): the Iometer specification name as a
    # cross-tool configuration, the tables' paths as the hdd/vSAN write-ups' source, the scaling provenance
    for name, least in (("hostile_hdd_iops", 1), ("hostile_vsan_stripe", 1), ("hostile_scaling", 2)):
        if name in hostile_pages["_errors"]:
            raise hostile_pages["_errors"][name]
        assert hostile_pages[name].read_text().count(esc) >= least, name
    # the Iometer pairing is real (one configuration matched) and its hostile tool labels are shown; the cross-tool
    # write-up shows configurations by their options, not by the Iometer specification name (that name reaches a
    # page through a result set's table: test_iometer_specification_names_reach_a_table_as_text)
    iometer = hostile_pages["hostile_iometer_cross_tool"].read_text()
    assert "measured 1 common configuration" in iometer
    assert str(_html.escape(PAYLOADS[0])) in iometer and str(_html.escape(PAYLOADS[1])) in iometer
    side = json.loads(hostile_pages["hostile_demo"].with_suffix(".json").read_text())
    assert all(p.replace("\x00", "\ufffd") in json.dumps(side["provenance"], ensure_ascii=False)
               for p in PAYLOADS[:3])


@pytest.mark.slow
def test_iometer_specification_names_reach_a_table_as_text(tmp_path):
    """Iometer's access-specification names, read by the real reader, shown through the write-ups' table()."""
    from storagebench import show, tables
    from storagebench.published import load_result_sets

    _hostile_iometer(tmp_path / "iometer")
    sets = load_result_sets([str(tmp_path / "iometer")], labels=[PAYLOADS[2]], tool_col="tool_label")
    runs = sets.runs
    hostile_cols = [c for c in runs.columns if runs[c].astype(str).str.contains("onerror=alert", regex=False).any()]
    assert hostile_cols, list(runs.columns)  # the specification name is in the table
    part = show.collapsed(HOSTILE, tables.table(runs[hostile_cols + ["iops"]], caption=HOSTILE), sets.sources)
    page = _html.secure_page(f"<!DOCTYPE html><html><head><title>t</title></head><body>{part._repr_html_()}"
                             "</body></html>")
    assert _html.page_problems(page) == [] and str(_html.escape(PAYLOADS[1])) in page
