"""The report page: the nbconvert template, the CSS, titles, findings and figure numbering, and notebooks to
HTML (part of :mod:`storagebench.publish`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._html import html, render_markdown, secure_page
from ._pubexec import (
    read_notebook,
)

# papermill, nbformat, nbconvert, jupyter_client and jinja2 are imported inside the functions that use them:
# `import storagebench` loads this module, and they would add about a second to every command.
from .errors import PublishError
from .findings import MIME_TYPE, Findings

#: The page's stylesheet (screen and print). It replaces JupyterLab's 250 KB theme: a write-up needs
#: readable text, tables that fit the page and figures with captions, not the lab's widgets. The print
#: rules keep every column of a wide table on A4 (smaller type, wrapping cells) instead of cutting it off.
REPORT_CSS = """
:root { --sb-text: #1f2328; --sb-muted: #57606a; --sb-accent: #1a7f37; --sb-rule: #d0d7de; }
html { font-size: 16px; -webkit-text-size-adjust: 100%; }
body { margin: 0; color: var(--sb-text); line-height: 1.5; background: #fff;
       font-family: "DejaVu Sans", "Liberation Sans", "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 1.5rem 2rem 3rem; box-sizing: border-box; }
.jp-Collapser, .jp-InputPrompt, .jp-OutputPrompt, .jp-InputArea-prompt, .jp-OutputArea-prompt { display: none; }
h1 { font-size: 1.9rem; line-height: 1.25; margin: .3em 0 .2em; }
h2 { font-size: 1.4rem; margin: 1.8em 0 .5em; padding-bottom: .2em; border-bottom: 1px solid var(--sb-rule); }
h3 { font-size: 1.15rem; margin: 1.4em 0 .4em; }
p, li { max-width: 80ch; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: .88em; background: #f6f8fa;
       padding: 0 .2em; border-radius: 3px; overflow-wrap: anywhere; }
pre { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: .82rem; white-space: pre-wrap;
      overflow-wrap: anywhere; background: #f6f8fa; padding: .5em .7em; margin: .4em 0; }
table { border-collapse: collapse; margin: .5em 0 1.2em; font-size: .85rem; font-variant-numeric: tabular-nums;
        max-width: 100%; }
th, td { padding: .3em .55em; text-align: right; vertical-align: top; border-bottom: 1px solid #eaeef2;
         white-space: normal; overflow-wrap: break-word; }
thead th { vertical-align: bottom; border-bottom: 2px solid #8c959f; hyphens: manual; }
tbody tr:nth-child(even) { background: #f6f8fa; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .3em; }
figure.sb-figure { margin: 1.6em 0; }
figure.sb-figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: .92rem; max-width: 100ch; margin-top: .5em; }
.sb-fignum { font-weight: 700; }
.sb-provenance { color: var(--sb-muted); }
.sb-findings { border-left: 4px solid var(--sb-accent); background: #f0f8f2; padding: .3em 1.2em .6em;
               margin: 1.2em 0 2em; }
.sb-findings h2 { border: none; margin: .5em 0 .3em; }
.sb-findings li { margin: .35em 0; }
.sb-findings-question { font-style: italic; margin: 0 0 .3em; }
.sb-finding-detail { color: var(--sb-muted); font-size: .85em; }
.sb-findings li.sb-caveat { color: #7a4a00; }
.sb-report-meta { color: var(--sb-muted); font-size: .88rem; }
.sb-partial { border: 2px solid #b45309; background: #fff7ed; padding: .2rem .8rem; margin: .8rem 0; }
.sb-table-note { color: var(--sb-muted); font-size: .85rem; margin: .2em 0; max-width: 100ch; }
details.sb-details { margin: .4em 0 1.2em; }
details.sb-details > summary { cursor: pointer; color: #0969da; }
.sb-scroll { overflow-x: auto; max-width: 100%; }
.sb-scroll th, .sb-scroll td { white-space: nowrap; }
@media print {
  @page { size: A4; margin: 14mm 12mm; }
  html { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  table { font-size: 7.5pt; width: 100%; table-layout: auto; page-break-inside: auto; }
  th, td { padding: 1.5pt 3pt; white-space: normal !important; }
  thead { display: table-header-group; }
  tr, figure.sb-figure, .sb-findings li { break-inside: avoid; }
  h1, h2, h3 { break-after: avoid; }
  figure.sb-figure img { max-height: 200mm; width: auto; }
  details.sb-details > summary { color: inherit; font-weight: 600; list-style: none; }
  details.sb-details::details-content { content-visibility: visible; }  /* paper cannot be clicked open */
  .sb-scroll { overflow: visible; }
  .sb-scroll table { font-size: 6.5pt; }
  .sb-scroll th, .sb-scroll td { white-space: normal; overflow-wrap: anywhere; padding: 1pt 2pt; }
  a { color: inherit; text-decoration: none; }
}
"""


_TEMPLATE = (
    "{%- extends 'index.html.j2' -%}\n"
    "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}\n"
    "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n"
    "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
    "{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}\n"
    "{%- block data_javascript -%}{%- endblock data_javascript -%}\n"
    "{%- block data_widget_view -%}{%- endblock data_widget_view -%}\n"
    "{%- block notebook_css -%}<style type=\"text/css\">{{ resources.storagebench_css }}</style>"
    "{%- endblock notebook_css -%}\n"
)


# reprs of matplotlib objects left as a cell's value (``Text(0.01, -0.01, '...')``, ``<Axes: ...>``): never content
_STRAY_REPR = re.compile(r"^\s*(\[?<matplotlib\.|\[?<(Figure|Axes)\b|Text\(|\[?<Axes:|<seaborn\.)")


_FIGNUM = re.compile(r'(<figure class="sb-figure" id="figure-)\d+(">)|(<span class="sb-fignum">Figure )\d+(\.</span>)')


def _is_stray(out) -> bool:
    data = out.get("data", {})
    return (out.get("output_type") == "execute_result" and set(data) == {"text/plain"}
            and bool(_STRAY_REPR.match(str(data["text/plain"]))))


def _findings_of(nb) -> list:
    """Pop the :class:`~storagebench.findings.Findings` outputs of a notebook's cells (in order)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.outputs:
            if MIME_TYPE in out.get("data", {}):
                try:
                    found.append(Findings.from_dict(out["data"][MIME_TYPE]))
                except PublishError as exc:
                    raise PublishError(f"a Findings output of the notebook cannot be read: {exc}") from exc
            else:
                keep.append(out)
        cell.outputs = keep
    return found


def _renumber_figures(nb) -> int:
    """Number the ``sb-figure`` outputs of the merged page 1, 2, ... in page order; return the count."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            htm = out.get("data", {}).get("text/html")
            if htm is None or "sb-figure" not in (htm if isinstance(htm, str) else "".join(htm)):
                continue
            n += 1
            text = htm if isinstance(htm, str) else "".join(htm)
            out["data"]["text/html"] = _FIGNUM.sub(
                lambda m, k=n: f"{m[1]}{k}{m[2]}" if m[1] else f"{m[3]}{k}{m[4]}", text)
            if "text/plain" in out["data"]:
                out["data"]["text/plain"] = re.sub(r"^Figure \d+\.", f"Figure {n}.", str(out["data"]["text/plain"]))
    return n


_H1 = re.compile(r"^#\s+(.+?)\s*$", flags=re.M)


def _markdown_outputs(cell) -> list:
    """The ``text/markdown`` outputs of an executed code cell (``display(Markdown(...))``)."""
    return [o for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def _markdown_plain(text: str) -> str:
    """A Markdown heading's text as plain text: the backslash escapes of :func:`storagebench._html.markdown_text`
    undone (the page's ``<title>`` and the sidecar hold text; they are escaped again when written)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def notebook_title(nb) -> str:
    """The first ``# heading`` of a notebook ("" when it has none).

    It is looked for in cell order, in markdown cells and in the Markdown a code cell displayed, so that
    one template can title each write-up from its results (``display(Markdown(f"# {result.title}"))``,
    as ``notebooks/studies/testbed.ipynb`` does for each testbed study).
    """
    for cell in nb.cells:
        texts = [cell.source] if cell.cell_type == "markdown" else \
            [_text(o["data"]["text/markdown"]) for o in _markdown_outputs(cell)] if cell.cell_type == "code" else []
        for text in texts:
            m = _H1.search(text)
            if m:
                return _markdown_plain(m[1])
    return ""


def _pop_title(cells) -> str | None:
    """Take the page's ``# heading`` out of the first cell holding one (source or displayed Markdown).

    Returns the heading line, or None when no cell before the first other heading holds one.
    """
    for cell in cells:
        if cell.cell_type == "markdown":
            m = _H1.search(cell.source)
            if m:
                cell.source = (cell.source[:m.start()] + cell.source[m.end():]).strip()
                return m[0].strip()
            if cell.source.lstrip().startswith("#"):  # another heading comes first: the page has no title of its own
                return None
        elif cell.cell_type == "code":
            for out in _markdown_outputs(cell):
                text = _text(out["data"]["text/markdown"])
                m = _H1.search(text)
                if m:
                    rest = (text[:m.start()] + text[m.end():]).strip()
                    out["data"]["text/markdown"] = rest
                    if "text/plain" in out["data"]:
                        out["data"]["text/plain"] = rest
                    if not rest:
                        cell.outputs = [o for o in cell.outputs if o is not out]
                    return m[0].strip()
    return None


def build_page(notebooks: Sequence[str | os.PathLike], title: str | None = None, *,
               meta: str = "", banner: str | None = None, calibration: Sequence[str] = ()) -> tuple[str, Any]:
    """The HTML of a write-up and its findings: see :func:`notebooks_to_html`; ``banner`` (text, escaped) is shown
    above everything but the title (a partial study: :func:`partial_banner`); each ``calibration`` sentence (text,
    escaped: :func:`storagebench.publish.calibration_citations`) is a paragraph after the findings.

    Returns
    -------
    (str, Findings)
        The page, and the findings of all notebooks in order (empty when none displayed any).
    """
    import nbformat
    from nbconvert import HTMLExporter


    merged = None
    findings = []
    for path in notebooks:
        nb = read_notebook(path)
        # a cell tagged "nbval-only" holds a check for the tests (a gold value printed for nbval), not content
        nb.cells = [c for c in nb.cells if "nbval-only" not in c.metadata.get("tags", [])]
        for cell in nb.cells:
            if cell.cell_type == "code":
                # progress bars and warnings on stderr, and stray matplotlib reprs, are noise in a write-up
                cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream"
                                                                 and o.get("name") == "stderr") and not _is_stray(o)]
        findings += _findings_of(nb)
        if merged is None:
            merged = nb
        else:
            merged.cells.extend(nb.cells)
    page_title = title or notebook_title(merged) or "storagebench report"
    merged.metadata["title"] = page_title
    all_findings = Findings.concat(findings)
    # the page opens with the title, the meta line and the findings; everything else follows
    head: list = []
    h1 = _pop_title(merged.cells)
    if h1 is not None:  # a heading a code cell displayed may hold data: rendered as every Markdown output is
        title_cell = nbformat.v4.new_code_cell("")
        title_cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": str(render_markdown(h1))})]
        head.append(title_cell)
        merged.cells = [c for c in merged.cells if not (c.cell_type == "markdown" and not c.source.strip())]
    if banner:  # text from data: escaped (markupsafe), never formatted into HTML as it is
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": str(html('<div class="sb-partial" role="alert"><p><strong>{}</strong></p></div>', banner)),
            "text/plain": banner})]
        head.append(cell)
    if meta:
        meta_cell = nbformat.v4.new_code_cell("")
        meta_cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": str(html('<p class="sb-report-meta">{}</p>', meta))})]
        head.append(meta_cell)
    if len(all_findings):
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": all_findings._repr_html_(),
                                                                      "text/plain": all_findings.text()})]
        head.append(cell)
    for text in calibration:  # from calibration.json: escaped (markupsafe), never formatted into HTML as it is
        cal_cell = nbformat.v4.new_code_cell("")
        cal_cell.outputs = [nbformat.v4.new_output("display_data", data={
            "text/html": str(html('<p class="sb-calibration">{}</p>', text)), "text/plain": text})]
        head.append(cal_cell)
    merged.cells = head + [c for c in merged.cells if c is not None]
    _markdown_outputs_to_html(merged)
    merged.metadata.pop("widgets", None)  # widget state is written as <script> elements: a write-up has no widgets
    _renumber_figures(merged)
    offline = jinja2_loader()
    exporter = HTMLExporter(template_name="lab", extra_loaders=[offline], template_file="storagebench_report.html.j2")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.exclude_anchor_links = True
    exporter.embed_images = True
    body, _ = exporter.from_notebook_node(merged, resources={"storagebench_css": REPORT_CSS})
    return secure_page(body, f"the write-up of {[Path(p).name for p in notebooks]}"), all_findings


def _markdown_outputs_to_html(nb) -> None:
    """Render every Markdown output of the code cells with :func:`storagebench._html.render_markdown`.

    A cell's ``display(Markdown(...))`` is built at run time and may hold data; nbconvert would render it with
    raw HTML passed through. Here it becomes an HTML output with raw HTML escaped and harmful link schemes
    removed (the Markdown cells of the template, written by its author, are left to nbconvert). Other
    types of output the page never shows as HTML (``application/javascript``, widget views) are dropped.
    """
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not data:
                continue
            for mime in [m for m in data if m in _SCRIPT_TYPES]:
                del data[mime]
            if "text/markdown" in data and "text/html" not in data:
                data["text/html"] = str(render_markdown(_text(data["text/markdown"])))
            data.pop("text/markdown", None)
        cell.outputs = [o for o in cell.outputs if o.get("data", True)]  # nothing left to show


#: Output types that are script or run script when shown: never put on a page.
_SCRIPT_TYPES = frozenset({"application/javascript", "text/javascript", "application/vnd.jupyter.widget-view+json",
                           "application/vnd.jupyter.widget-state+json", "text/vnd.mermaid"})


def jinja2_loader():
    """The Jinja loader of the report template (nbconvert ``lab`` without CDN scripts or the lab theme)."""
    import jinja2

    return jinja2.DictLoader({"storagebench_report.html.j2": _TEMPLATE})


def notebooks_to_html(notebooks: Sequence[str | os.PathLike], title: str | None = None) -> str:
    """One self-contained HTML page of executed notebooks, for reading offline and printing.

    Parameters
    ----------
    notebooks : sequence of str or path
        Executed ``.ipynb`` files, concatenated in this order.
    title : str, optional
        Page title; default: the first notebook's ``# heading``.

    Returns
    -------
    str
        HTML (nbconvert ``lab`` template without CDN scripts, with :data:`REPORT_CSS` for screen and
        print): code cells and prompts hidden, stderr streams, stray matplotlib reprs and cells tagged
        ``nbval-only`` (checks printed for the tests) dropped, figures embedded. The page opens with the first heading and then a *Findings* section made of every
        :class:`storagebench.findings.Findings` the notebooks displayed (taken out of their cells);
        ``storagebench.show`` figures are numbered again in page order.
    """
    return build_page(notebooks, title)[0]
