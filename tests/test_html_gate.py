"""The HTML gate (docs/SECURITY.md, section 1) without a browser: the escaping function, Markdown made literal,
runtime Markdown rendered without raw HTML, the site index's link rule, the page check, and the rule that
notebooks and the library write HTML and Markdown from data only through the gate.

The browser half (every write-up and the index published from hostile values, opened in Chromium) is
tests/test_html_gate_browser.py; :data:`PAYLOADS` is shared with it.
"""

from __future__ import annotations

import ast
import html as stdhtml
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from storagebench import _html
from storagebench.errors import PublishError
from storagebench.findings import Finding, Findings
from storagebench.show import Collapsed, FigureHTML, collapsed
from storagebench.tables import table

#: Hostile values planted in every string field a write-up shows. Each one that could run calls
#: ``alert(N)`` with its own number, so the browser suite can say which one ran.
PAYLOADS: tuple[str, ...] = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "<svg onload=alert(3)>",
    "<body onload=alert(4)>",
    "javascript:alert(5)",
    "data:text/html,<script>alert(6)</script>",
    "</title><script>alert(7)</script>",
    "</style><script>alert(8)</script>",
    "</textarea><script>alert(9)</script>",
    "--><script>alert(10)</script><!--",
    '<div style="background:url(javascript:alert(11))">x</div>',
    '<p style="width:expression(alert(12))">y</p>',
    "[click](javascript:alert(13))",
    '<iframe srcdoc="<script>alert(14)</script>"></iframe>',
    "&lt;script&gt;alert(15)&lt;/script&gt;",
    "&#60;img src=x onerror=alert(16)&#62;",
    '" onmouseover="alert(17)" x="',
    "' onfocus='alert(18)' autofocus x='",
    "`<img src=x onerror=alert(19)>`",
    "{{ 7*7 }}{% raw %}<script>alert(20)</script>{% endraw %}",
    "\u202e\u2028<img src=x onerror=alert(21)>\u0000\u200b",
    '<a href="javascript:alert(22)">a link</a>',
    "![i](javascript:alert(23))",
    '<object data="javascript:alert(24)"></object><embed src="javascript:alert(24)">',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(25)">',
    '<base href="javascript:alert(26)//">',
    "<details open ontoggle=alert(27)>",
    "\uff1cscript\uff1ealert(28)\uff1c/script\uff1e",
    "x\n# <img src=x onerror=alert(29)>\n* [y](javascript:alert(29))",
    '<form action="javascript:alert(30)"><button>go</button></form>',
    "<math><mtext></p><img src=x onerror=alert(31)></mtext></math>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(32)>\">",
)


class _Tree(HTMLParser):
    """Tags, attributes and text of a fragment, as Python's HTML tokenizer reads it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def _parse(fragment: str) -> _Tree:
    tree = _Tree()
    tree.feed(str(fragment))
    tree.close()
    return tree


def _page(fragment: str) -> str:
    return f"<!DOCTYPE html><html><head><title>t</title></head><body>{fragment}</body></html>"


def test_there_are_at_least_20_payloads_of_every_kind():
    assert len(PAYLOADS) >= 20 and len(set(PAYLOADS)) == len(PAYLOADS)
    joined = "\n".join(PAYLOADS)
    for kind in ("<script>", "onerror=", "onload=", "javascript:", "data:", "</title>", "</style>", "</textarea>",
                 "-->", "expression(", "url(javascript:", "](javascript:", "<svg", "srcdoc", "&lt;", "&#60;", "`",
                 "{{", "\u202e", "\uff1c"):
        assert kind in joined, kind


@pytest.mark.parametrize("payload", PAYLOADS)
def test_escape_makes_text_of_every_payload(payload):
    out = _html.escape(payload)
    assert not set("<>\"'") & set(out)
    assert stdhtml.unescape(out) == payload
    # in element text and in a quoted attribute: no tag and no attribute but the template's
    frag = _html.html('<p title="{}">{}</p>', payload, payload)
    tree = _parse(frag)
    assert [t for t, _ in tree.tags] == ["p"] and [a for a, _ in tree.tags[0][1]] == ["title"]
    assert tree.tags[0][1][0][1] == payload and "".join(tree.text) == payload
    assert _html.page_problems(_html.secure_page(_page(frag)).replace(str(_html.CSP_META), "", 0)) == []


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text())
def test_escape_round_trips_any_text(text):
    out = _html.escape(text)
    assert "<" not in out and ">" not in out and '"' not in out and stdhtml.unescape(str(out)) == text
    assert _html.escape(out) is not None and str(_html.escape(out)) == str(out)  # Markup is not escaped twice


def _shown(text: str) -> str:
    """What a reader sees of text in a Markdown paragraph: control characters as spaces, spaces collapsed."""
    return " ".join(_html.markdown_text(text).replace("\\", "\x00").replace("\x00\x00", "\\").replace("\x00", "")
                    .split())


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_values_are_literal_even_for_a_renderer_that_passes_raw_html(payload):
    """A value in show.markdown() opens no tag, link or block, in our renderer and in nbconvert's own
    (``escape=False``: raw HTML passed through)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    source = _html.markdown("Provenance: {} end", payload)
    for rendered in (_html.render_markdown(source), markdown2html_mistune(source)):
        tree = _parse(rendered)
        assert [t for t, _ in tree.tags] == ["p"], (payload, rendered)
        text = " ".join("".join(tree.text).split())
        assert text == " ".join(f"Provenance: {_shown(payload)} end".split()), rendered


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_markdown_text_is_literal_for_any_text(text):
    source = _html.markdown("a {} b", text)
    tree = _parse(_html.render_markdown(source))
    assert {t for t, _ in tree.tags} <= {"p"}
    assert " ".join("".join(tree.text).split()) == " ".join(f"a {_shown(text)} b".split())


def test_markdown_keeps_format_specs_and_inserts_its_own_blocks_as_they_are():
    inner = _html.markdown("**{}**", "<b>")
    assert _html.markdown("{:.0%} {} {x:.2f}", 0.95, inner, x=1.234) == "95\\% **\\<b\\>** 1\\.23"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_render_markdown_escapes_raw_html_and_harmful_links(payload):
    """Markdown a library built carelessly (the value not made literal) still carries no tag into the page."""
    rendered = _html.render_markdown(f"Provenance: {payload}\n\n[a]({payload}) ![b]({payload})")
    assert _html.page_problems(_html.secure_page(_page(rendered)).replace(str(_html.CSP_META), "", 0)) == []
    tree = _parse(rendered)
    assert {t for t, _ in tree.tags} <= {"p", "a", "img", "h1", "ul", "li", "code", "em", "strong"}, rendered
    for _, attrs in tree.tags:
        for name, value in attrs:
            assert not name.startswith("on") and not (value or "").lower().lstrip().startswith(("javascript:", "data:"))


# --------------------------------------------------------------------------- the page check


@pytest.mark.parametrize("bad, what", [
    ("<script>alert(1)</script>", "<script>"),
    ("<SCRIPT SRC=x></SCRIPT>", "<script>"),
    ("<img src=x onerror=alert(1)>", "onerror"),
    ('<img src="data:text/html,x">', "data:image/"),
    ('<a href="javascript:alert(1)">x</a>', "javascript"),
    ('<a href=" java\tscript:alert(1)">x</a>', "javascript"),
    ('<a href="vbscript:x">x</a>', "vbscript"),
    ('<iframe srcdoc="x"></iframe>', "<iframe>"),
    ('<object data="x"></object>', "<object>"),
    ('<embed src="x">', "<embed>"),
    ('<base href="http://x/">', "<base>"),
    ('<form action="x"></form>', "<form>"),
    ('<meta http-equiv="refresh" content="0;url=x">', "refresh"),
    ('<div style="background:url(http://x/)">', "url("),
    ('<div style="width:expression(alert(1))">', "expression("),
    ("<style>a{background:url(javascript:alert(1))}</style>", "url("),
    ("<style>a{behavior: url(x.htc)}</style>", "<style>"),
    ('<svg><animate attributeName="href" to="javascript:alert(1)"/></svg>', "<animate>"),
    ('<link rel="stylesheet" href="http://x/">', "<link>"),
    # Python's tokenizer and a browser's disagree on these; each hides a live <img onerror> from the first and
    # not from the second (html5lib parses as a browser does)
    ("<!--> <img src=x onerror=alert(1)> -->", "onerror"),  # <!--> is an empty comment to a browser
    ("<!---> <img src=x onerror=alert(1)> -->", "onerror"),
    ("<!-- --!><img src=x onerror=alert(1)> -->", "onerror"),  # --!> ends a comment
    ("<![CDATA[><img src=x onerror=alert(1)>]]>", "onerror"),  # a bogus comment up to the first > outside SVG
    ('<noframes><img title="</noframes><img src=x onerror=alert(1)>"></noframes>', "onerror"),  # raw text
    ("<svg><style><img src=x onerror=alert(1)></style></svg>", "onerror"),  # <img> breaks out of SVG
])
def test_secure_page_refuses_a_page_that_could_run_script(bad, what):
    with pytest.raises(PublishError, match="would carry script") as exc:
        _html.secure_page(_page(f"<p>ok</p>{bad}"), "the test page")
    assert what.lower() in str(exc.value).lower() and "the test page" in str(exc.value)


def test_secure_page_puts_the_csp_first_and_keeps_a_clean_page():
    page = _html.secure_page(_page('<p>ok <a href="other/report.html">r</a> <a href="#x">x</a> '
                                   '<a href="https://example.org/">w</a> <img src="data:image/png;base64,AA==" alt="">'
                                   '<style>td.col0 {text-align: left;}</style></p>'))
    assert page.index(str(_html.CSP_META)) == page.index("<head>") + len("<head>")
    assert _html.page_problems(page) == []
    assert "script-src" not in _html.CSP and "default-src 'none'" in _html.CSP and "img-src data:" in _html.CSP
    # a page without the CSP, or with a second one a value smuggled in, is refused
    assert any("Content-Security-Policy" in p for p in _html.page_problems(_page("<p>x</p>")))
    twice = page.replace("<p>ok", str(_html.CSP_META) + "<p>ok")
    assert any("1" not in p and "Content-Security-Policy" in p for p in _html.page_problems(twice))
    with pytest.raises(PublishError, match="has no <head>"):
        _html.secure_page("<p>no head</p>")


# --------------------------------------------------------------------------- the site index's link rule


def test_site_href_links_only_to_files_under_the_root(tmp_path):
    root = tmp_path / "site"
    (root / "ok").mkdir(parents=True)
    (root / "ok" / "report.html").write_text("x")
    assert _html.site_href(root / "ok" / "report.html", root) == "ok/report.html"
    assert _html.site_href("ok/report.html", root) == "ok/report.html"
    for name in ("javascript:alert(1)", "data:text,x", "a?b#c", "%2e%2e", " x", "<img src=x onerror=alert(1)>",
                 "http:", "//evil", "\\\\server"):
        d = root / name.replace("/", "\u2215")
        d.mkdir()
        (d / "report.html").write_text("x")
        href = _html.site_href(d / "report.html", root)
        assert href is not None and ":" not in href and "?" not in href and "#" not in href and "<" not in href
        assert not href.startswith(("/", "\\", ".")) or href.startswith("%"), href
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc and (root / unquote(href)).resolve() == (d / "report.html")
    outside = tmp_path / "outside.html"
    outside.write_text("x")
    assert _html.site_href(outside, root) is None  # absolute, outside
    assert _html.site_href("../outside.html", root) is None  # ..
    assert _html.site_href(root / "ok" / ".." / ".." / "outside.html", root) is None
    (root / "link.html").symlink_to(outside)
    assert _html.site_href(root / "link.html", root) is None  # a symlink leaving the root
    assert _html.site_href(root / "ok", root) is None  # not a file
    assert _html.site_href(root / "missing.html", root) is None
    assert _html.site_href("ok/report.html\x00", root) is None


def _sidecar(directory: Path, title: str, sentence: str, summary: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.html").write_text("<!DOCTYPE html><title>x</title>")
    (directory / "report.json").write_text(json.dumps({
        "format_version": 1, "title": title, "date": "2026-01-01T00:00:00Z", "report": "report.html",
        "findings": [{"sentence": sentence}, {"sentence": sentence, "caveat": True}],
        "provenance": {"summary": summary}, "partial": sentence}))  # a hostile tree writes every field


def test_build_site_shows_hostile_names_as_text_and_links_by_the_rule(tmp_path):
    from storagebench.publish import build_site

    root = tmp_path / "results"
    for p in PAYLOADS:
        _sidecar(root / p.replace("/", "\u2215").replace("\x00", "")[:200], p, p, p)
    # a report.html that is a symlink out of the tree: never opened nor linked (the walk of _inputs refuses it and
    # the index names it under "Not listed")
    outside = tmp_path / "elsewhere.html"
    outside.write_text("x")
    (root / "escape").mkdir()
    (root / "escape" / "report.html").symlink_to(outside)
    (root / "escape" / "report.json").write_text((root / PAYLOADS[0].replace("/", "\u2215") / "report.json").read_text())
    page_path, listed, skipped = build_site(root)
    page = page_path.read_text()
    assert len(listed) == len(PAYLOADS)
    assert any("escape" in s and "report.html" in s for s in skipped)
    assert _html.page_problems(page) == []
    hrefs = re.findall(r'<a href="([^"]*)"', page)
    assert len(hrefs) == len(PAYLOADS)  # every report but the symlinked one
    for href in hrefs:
        assert ":" not in href and not href.startswith("/") and ".." not in href.split("/")
    assert "escape" in page and "Not listed" in page and "elsewhere.html\"" not in page  # named, never linked
    tree = _parse(page)
    text = "".join(tree.text)
    for p in PAYLOADS:
        assert " ".join(p.replace("\x00", "\ufffd").split())[:30] in " ".join(text.split()) or "\x00" in p


# --------------------------------------------------------------------------- the library's HTML


@pytest.mark.parametrize("payload", PAYLOADS)
def test_findings_figures_collapsed_and_tables_escape_every_value(payload):
    f = Findings((Finding(payload, method=payload * 20, unit_of_replication=payload, n=2),
                  Finding(payload, caveat=True)), title=payload, provenance=payload)
    fig = FigureHTML(1, payload, payload, payload, "image/png", b"\x89PNG", 10, 10)
    df = pd.DataFrame({payload: [payload, 1.5], "x": [payload, payload]}, index=pd.Index([payload, "b"], name=payload + " (index)"))
    parts = [f._repr_html_(), fig._repr_html_(), collapsed(payload, payload, df)._repr_html_(),
             table(df, caption=payload, labels={"x": payload}).to_html()]
    for part in parts:
        assert _html.page_problems(_html.secure_page(_page(part)).replace(str(_html.CSP_META), "", 0)) == [], part
        assert payload.replace("\x00", "") in stdhtml.unescape(re.sub(r"<[^>]+>", "", part)).replace("\x00", "") \
            or "\x00" in payload or "\n" in payload
    with pytest.raises(PublishError, match="SVG or PNG"):
        FigureHTML(1, "c", "a", "", 'image/png" onerror="alert(1)', b"", 1, 1)._repr_html_()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_known_answer_checks_table_escapes_every_value(payload):
    """A known-answer check's name and rule carry level names from the results tree (issue 20): through the
    table gate they are text."""
    from storagebench.studies import KnownAnswerCheck
    from storagebench.studies._results import TestbedResult

    checks = (KnownAnswerCheck.of(payload, 2.0, 2.01, (1.99, 2.03), payload, tost_margin=0.01, tost_p=0.02),
              KnownAnswerCheck.of(payload * 2, 0.5, 0.49, (float("nan"), 0.6), payload))
    res = TestbedResult(name=payload, title=payload, question=payload, findings=(), verdicts=pd.DataFrame(),
                        tables={}, figures={}, confidence=0.95, unit=payload, drift=None, runs=0, runs_not_steady=0,
                        runs_cache_not_medium=0, checks=checks)
    part = res.checks_table().to_html()
    assert _html.page_problems(_html.secure_page(_page(part)).replace(str(_html.CSP_META), "", 0)) == [], part
    assert payload.replace("\x00", "") in stdhtml.unescape(re.sub(r"<[^>]+>", "", part)).replace("\x00", "") \
        or "\x00" in payload or "\n" in payload
    assert [c.covered for c in checks] == [True, False]  # a CI that is not finite covers nothing


def test_collapsed_text_is_text_and_html_is_made_by_show_html():
    from storagebench import show

    assert "&lt;b&gt;" in Collapsed("s", ("<b>x</b>",))._repr_html_()
    frag = show.html("<ul>{}</ul>", show.html("").join(show.html("<li>{}</li>", p) for p in PAYLOADS))
    assert frag._repr_html_().count("<li>") == len(PAYLOADS) and "<script>" not in frag
    assert "<ul>" in Collapsed("s", (frag,))._repr_html_()
    md = show.markdown("Provenance: {}", PAYLOADS[1])
    assert md._repr_markdown_() == "Provenance: " + _html.markdown_text(PAYLOADS[1])
    assert show.markdown("# {not a field}")._repr_markdown_() == "# {not a field}"  # library Markdown, no values


def test_build_page_renders_markdown_outputs_and_the_title_through_the_gate(tmp_path):
    """Executed notebooks holding hostile outputs of every kind (no kernel needed): the page is clean."""
    from storagebench.publish import build_page

    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("")
    payload = " ".join(PAYLOADS)
    f = Findings((Finding(payload),), title=payload)
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"text/markdown": "# " + payload}),  # careless library Markdown
        nbformat.v4.new_output("display_data", data={"text/markdown": payload, "text/plain": payload}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(99)"}),
        nbformat.v4.new_output("display_data", data={"text/html": f._repr_html_(), "text/plain": f.text(),
                                                     "application/vnd.storagebench.findings+json": f.to_dict()}),
        nbformat.v4.new_output("stream", name="stdout", text=payload),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg' "
                                                                      "onload='alert(98)'></svg>"}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("Intro"), code]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, str(path))
    page, found = build_page([path], title=payload, meta=payload)
    assert _html.page_problems(page) == [] and len(found) == 1
    assert "alert(99)" not in page  # the application/javascript output is dropped; the SVG is an <img> data: URI
    assert page.count("<script") == 0 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# --------------------------------------------------------------------------- one gate: no second way in


def _notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").rglob("*.ipynb"))


_FORBIDDEN_DISPLAY = {"Markdown", "HTML", "display_markdown", "display_html", "Javascript", "Latex", "SVG", "IFrame"}


def _formats_strings(node: ast.AST) -> str | None:
    """Why an argument builds text by formatting (f-string, ``%``, ``.format``), or None."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            return "an f-string"
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mod):
            return "% formatting"
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("format",
                                                                                                    "format_map"):
            return ".format()"
    return None


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_notebooks_build_no_html_or_markdown_by_string_formatting(path):
    """Markdown and HTML with data in them come only from show.markdown / show.html, whose template is the
    notebook's own text: IPython's Markdown()/HTML() are not used, and no template is formatted in place."""
    nb = nbformat.read(path, as_version=4)
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree = ast.parse("\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = {a.name.split(".")[-1] for a in node.names}
                if names & _FORBIDDEN_DISPLAY or (isinstance(node, ast.ImportFrom) and node.module == "html"):
                    problems.append(f"cell {i}: imports {sorted(names)} from {getattr(node, 'module', '')}")
            if isinstance(node, ast.FunctionDef) and node.name in ("_repr_html_", "_repr_markdown_"):
                problems.append(f"cell {i}: defines {node.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "markdown", "html") and node.args:
                why = _formats_strings(node.args[0])
                if why:
                    problems.append(f"cell {i}: the template of show.{node.func.attr}() is built by {why}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_html":
                if any(k.arg == "escape" for k in node.keywords):
                    problems.append(f"cell {i}: to_html(escape=...)")
    assert not problems, problems


def test_the_library_has_one_escaping_function():
    """No module but storagebench/_html.py escapes HTML itself (html.escape, markupsafe), writes a Styler's
    HTML without escaping, or renders Markdown."""
    problems = []
    for path in sorted((ROOT / "storagebench").rglob("*.py")):
        if path.name == "_html.py":
            continue
        text = path.read_text()
        rel = path.relative_to(ROOT)
        for pattern, why in ((r"^import html\b|^from html import|\bhtml\.escape\(", "uses the stdlib html escape"),
                             (r"^from markupsafe|^import markupsafe", "imports markupsafe directly"),
                             (r"escape\s*=\s*False", "turns escaping off"),
                             (r"markdown2html|mistune", "renders Markdown itself")):
            if re.search(pattern, text, re.M):
                problems.append(f"{rel}: {why}")
        if "Styler(" in text and path.name != "tables.py":
            problems.append(f"{rel}: builds a Styler outside tables.table")
    assert not problems, problems


def test_every_page_writer_ends_with_secure_page():
    """build_page (write-ups, batch pages) and build_site (the index) both end in the gate's secure_page."""
    funcs = {}
    for part in ("publish.py", "_pubpage.py", "_pubsite.py"):  # publish and its parts: the page, the site
        src = (ROOT / "storagebench" / part).read_text()
        funcs.update({n.name: ast.get_source_segment(src, n) for n in ast.parse(src).body
                      if isinstance(n, ast.FunctionDef)})
    assert "secure_page(" in funcs["build_page"] and "secure_page(" in funcs["build_site"]
    assert "_atomic_write(html_path, page)" in funcs["publish_report"] and "build_page(" in funcs["publish_report"]
    batch = (ROOT / "storagebench" / "_batch.py").read_text()
    assert "notebooks_to_html(" in batch and "write_text(" in batch
    assert os.path.basename(_html.__file__) == "_html.py"
