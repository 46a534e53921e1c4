"""The published write-ups in a real browser: Debian's headless Chromium driven by Selenium.

For the demo report (published here from the committed real fio output, tests/fixtures/study_demo) and
every study write-up (the published-table studies from data/, the four testbed studies from their committed
quick-variant results in tests/fixtures/testbed_quick, the scale-out study from the small real run in
tests/fixtures/scaling_quick), the page is opened in Chromium at a
1280 px wide viewport and checked as a reader would meet it: the Findings section comes first, every
image loads, nothing is wider than the viewport, the browser console is empty, and the PDF the browser
prints still holds every table's last column (``p_adjusted`` where the page has one), collapsed tables
included (print opens them). Full-page
screenshots and the printed PDFs are saved under ``results/screenshots/`` (``SB_SCREENSHOT_DIR``
overrides it) so people can look at them.

Selenium with Debian's ``chromium-driver`` rather than Playwright: Playwright's Python package is built
around browser builds it downloads itself (``playwright install``), which cannot work here, and only
drives another Chromium through ``executable_path`` without a version guarantee; chromedriver comes from
the same Debian source package as chromium, so the two always match. ``make test`` installs both.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import tempfile
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and os.path.exists(p)), None)
CHROMEDRIVER = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver") if p and os.path.exists(p)), None)
VIEWPORT = 1280

#: write-ups published from committed data: name -> (notebooks, parameters, committed results copied into the
#: study directory first). "demo" is the study fixture; the testbed write-ups are published from the real
#: quick-variant results of tests/fixtures/testbed_quick (no root, no loop devices), the scale-out write-up from
#: the small real run of tests/fixtures/scaling_quick (its notebook publishes a finished study_dir without fio).
WRITEUPS = {
    "demo": (None, None, FIXTURES / "study_demo"),
    "vsan_stripe": (["studies/vsan_stripe.ipynb"], None, None),
    "hdd_iops": (["studies/hdd_iops.ipynb"], None, None),
    "cross_tool": (["studies/cross_tool.ipynb"], None, None),
    **{study: (["studies/testbed.ipynb"], {"study": study}, FIXTURES / "testbed_quick" / study)
       for study in ("rdm_vs_vmfs", "stripe_width", "consolidation", "fast_vs_slow")},
    "scaling": (["studies/scaling.ipynb"], None, FIXTURES / "scaling_quick"),
}
#: Kernels publishing at once: each is a Python process importing pandas and matplotlib; more than this on a
#: 2-core machine only makes every one of them slower.
PUBLISH_WORKERS = 4

#: Write-ups whose pages hold comparison tables: the printed PDF must keep their p_adjusted column.
P_ADJUSTED = {"vsan_stripe", "rdm_vs_vmfs", "stripe_width", "consolidation", "fast_vs_slow"}


def _screenshot_dir() -> Path:
    d = Path(os.environ.get("SB_SCREENSHOT_DIR") or ROOT / "results" / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("Chromium or chromedriver is not installed (make test installs Debian's chromium and "
                    "chromium-driver as root)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sb-chromium-")
    opts = Options()
    opts.binary_location = CHROMIUM
    # --disable-background-networking & co: no connection attempts of its own (this machine's network is closed)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={VIEWPORT},900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    except WebDriverException as exc:
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"Chromium could not be started: {exc.msg}")
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict[str, Path]:
    """Every write-up of :data:`WRITEUPS` published into a temp dir (in parallel kernels), plus the site index."""
    from storagebench.publish import build_site, publish_report

    root = tmp_path_factory.mktemp("writeups")
    jobs = {}
    with ThreadPoolExecutor(max_workers=PUBLISH_WORKERS) as pool:
        for name, (notebooks, params, results) in WRITEUPS.items():
            target = root / name
            if results is not None:  # committed results: copied, so the analysis can write tidy/ beside raw/
                shutil.copytree(results, target, ignore=shutil.ignore_patterns(
                    "tidy", "notebooks", "analysis", "report.*", ".gitignore", "README.md"))
            target.mkdir(exist_ok=True)
            jobs[name] = pool.submit(publish_report, target, notebooks=notebooks, parameters=params)
        pages = {name: Path(job.result()) for name, job in jobs.items()}
    pages["index"] = build_site(root)[0]
    return pages


def _load(driver, page: Path) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": VIEWPORT, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(page.resolve().as_uri())
    driver.execute_script("return document.readyState")


def _pdf_text(driver) -> tuple[bytes, str]:
    from pypdf import PdfReader
    from selenium.webdriver.common.print_page_options import PrintOptions

    opts = PrintOptions()
    opts.page_width, opts.page_height = 21.0, 29.7  # A4, cm
    opts.background = True
    pdf = base64.b64decode(driver.print_page(opts))
    text = "\n".join(page.extract_text() or "" for page in PdfReader(io.BytesIO(pdf)).pages)
    return pdf, text


def _save_full_page(driver, path: Path) -> None:
    height = int(driver.execute_script("return Math.ceil(document.documentElement.scrollHeight)"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": VIEWPORT, "height": min(height, 16000), "deviceScaleFactor": 1, "mobile": False})
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})
    path.write_bytes(base64.b64decode(shot["data"]))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": VIEWPORT, "height": 900, "deviceScaleFactor": 1, "mobile": False})


_FIRST_SECTION = """
const main = document.querySelector('main');
const findings = document.getElementById('findings');
const first = main.querySelector('h2, table, figure, img, pre, details');
return {found: !!findings, first: first ? first.outerHTML.slice(0, 120) : null,
        inside: !!(findings && first && findings.contains(first)),
        heading: findings ? findings.querySelector('h2').textContent : null,
        items: findings ? findings.querySelectorAll('li').length : 0};
"""

_IMAGES = """
return Array.from(document.images).map(i => ({src: i.src.slice(0, 40), complete: i.complete, w: i.naturalWidth,
                                              alt: i.alt}));
"""

# An element inside a box that scrolls sideways (a collapsed 60-column table in its div.sb-scroll) is reached by
# scrolling that box, not the page: it is not counted, but the box itself must fit.
_TOO_WIDE = """
const vw = document.documentElement.clientWidth;
const out = [];
const inScroller = el => {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o === 'auto' || o === 'scroll') return true;
  }
  return false;
};
let scrollers = 0;
for (const el of document.querySelectorAll('body *')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > vw + 1) {
    if (inScroller(el)) { scrollers++; continue; }
    out.push(el.tagName + '.' + el.className + ' right=' + Math.round(r.right));
  }
}
return {vw: vw, scroll: document.documentElement.scrollWidth, wide: out.slice(0, 10), in_scrollers: scrollers};
"""

_LAST_HEADERS = """
return Array.from(document.querySelectorAll('table')).map(t => {
  const ths = t.querySelectorAll('thead th');
  return ths.length ? ths[ths.length - 1].textContent.trim() : null;
}).filter(x => x);
"""


@pytest.mark.parametrize("name", [*WRITEUPS, "index"])
def test_writeup_reads_well_in_chromium(browser, published, name):
    page = published[name]
    _load(browser, page)
    shots = _screenshot_dir()
    _save_full_page(browser, shots / f"{name}.png")
    # the Findings section comes first (the index page lists findings per write-up instead)
    if name != "index":
        first = browser.execute_script(_FIRST_SECTION)
        assert first["found"] and first["heading"] == "Findings" and first["inside"], first
        assert first["items"] >= 2, first
    else:
        assert browser.execute_script("return document.querySelectorAll('article').length") == len(WRITEUPS)
    # every image loads, and says what it shows
    images = browser.execute_script(_IMAGES)
    assert all(i["complete"] and i["w"] > 0 for i in images), images
    assert all(i["alt"] and "No description has been provided" not in i["alt"] for i in images), images
    if name == "demo":
        assert len(images) == 4
    # nothing wider than the 1280 px viewport
    width = browser.execute_script(_TOO_WIDE)
    assert width["wide"] == [] and width["scroll"] <= width["vw"], width
    # the console is empty: no error, no warning
    assert browser.get_log("browser") == []
    # printing keeps every column: each table's last header (and p_adjusted where there is one) is in the PDF
    pdf, text = _pdf_text(browser)
    (shots / f"{name}.pdf").write_bytes(pdf)
    flat = re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))  # NFKC: the PDF's "ﬂ" ligature is "fl"
    for header in browser.execute_script(_LAST_HEADERS):
        assert re.sub(r"\s+", "", header) in flat, (header, name)
    if browser.execute_script("return Array.from(document.querySelectorAll('th')).some(t => t.textContent.trim() "
                              "=== 'p_adjusted')"):
        assert "p_adjusted" in flat
    if name in P_ADJUSTED:  # the comparison tables of these write-ups have the column
        assert "p_adjusted" in flat, name


#: Per write-up, words its page must hold and words it must not (issue 20, "words that overstate"): each
#: estimate named for what it is.
WORDS = {
    "hdd_iops": (["2 sequential cell(s) stream at 116 to 120 MiB/s", "is not shown for the 2 sequential cell(s)"],
                 ["served from a cache", "read-ahead cache"]),
    "scaling": (["p99 completion latency, clat: merged bins of the point's runs", "geometric mean of per-run p99",
                 "saturation is not shown"], ["saturated at 1 client"]),
    "consolidation": (["Within-run stability", "not to PTS rounds",
                       "each set-up's p90 and p99 from the merged json+ bins of its runs"],
                      ["SNIA PTS window", "Steady state ("]),
    "fast_vs_slow": (["by the geometric mean of p99 over its units", "a one-sided 97.5% upper confidence bound"],
                     ["by the mean p99", "SNIA PTS window"]),
    "vsan_stripe": (["each tool's geometric mean, their ratio with its"], ["is an equivalent cell"]),
}


@pytest.mark.parametrize("name", sorted(WORDS))
def test_writeup_words_match_the_estimate(published, name):
    """The published page (the HTML a reader gets, tags stripped) says what each estimate is."""
    import html as html_mod

    text = html_mod.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", published[name].read_text())))
    must, never = WORDS[name]
    assert [w for w in must if w not in text] == [], name
    assert [w for w in never if w in text] == [], name
