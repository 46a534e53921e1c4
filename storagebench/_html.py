"""The HTML gate: the one way text from data reaches a write-up or the site index.

Everything a page shows that did not come from storagebench's own code -- a target path, a device's model
string from sysfs, a hostname, a fio version, a study name, a factor level, a DiskSPD computer name, an
Iometer specification name, a directory name -- is *text*. It reaches HTML only through this module:

* :func:`escape` (markupsafe's): text -> HTML text. A :class:`markupsafe.Markup` value is HTML that was
  built here and passes unchanged; anything else is escaped (``& < > " '``). :func:`html` fills an HTML
  template with escaped values (``Markup.format``), which is how every tag with data in it is written.
* :func:`markdown` / :func:`markdown_text`: text -> Markdown source that shows exactly the text: every ASCII
  punctuation character is backslash-escaped (CommonMark: a backslash-escaped character is literal, so it
  can start no tag, link, emphasis, heading or list) and line breaks and control characters become spaces.
* :func:`render_markdown`: Markdown a notebook displayed at run time -> HTML with raw HTML *escaped* and
  links with a harmful scheme (``javascript:``, ``data:``, ``vbscript:``, ``file:``) replaced by
  ``#harmful-link``. :func:`storagebench.publish.build_page` renders every Markdown output with it, so
  even Markdown a library built carelessly cannot carry a tag into the page.
* :func:`site_href`: the link rule of the site index (a relative path, without scheme or ``..``, to a
  regular file that exists under the site root).
* :func:`secure_page`: the last step of every page. It puts the Content-Security-Policy :data:`CSP` first in
  ``<head>`` (the pages are offline and need no script: none may run) and refuses a page that still holds
  a script, an event-handler attribute, a script URL, a frame, an object, a form, a ``<base>`` or a
  refresh (:func:`page_problems`), so a gap in the escaping is an error rather than a live page.

``docs/SECURITY.md`` (section 1) says what the gate guarantees; ``tests/test_html_gate.py`` and
``tests/test_html_gate_browser.py`` plant hostile values in every field a write-up shows.
"""

from __future__ import annotations

import os
import re
import string
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from markupsafe import Markup
from markupsafe import escape as _escape

from .errors import PublishError

__all__ = ["CSP", "CSP_META", "Markup", "escape", "html", "markdown_text", "markdown", "render_markdown",
           "site_href", "page_problems", "secure_page"]

#: The Content-Security-Policy of every page: no script, no frame, no plug-in, no fetch, no form, no
#: ``<base>``; images only from ``data:`` URIs (the figures are embedded), styles only inline (the page's
#: stylesheet and the tables' ``<style>``). A ``<meta http-equiv>`` cannot carry ``frame-ancestors``.
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
       "object-src 'none'; frame-src 'none'")

#: The ``<meta>`` element that carries :data:`CSP`, the first element of ``<head>``.
CSP_META = Markup(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">')  # a constant: no data in it


def escape(value: Any) -> Markup:
    """Text for HTML: the one escaping function of storagebench (markupsafe's ``escape``).

    Parameters
    ----------
    value : object
        Any value; ``str(value)`` is escaped. A :class:`markupsafe.Markup` (HTML built by this module or by
        :func:`html`) is returned as it is.

    Returns
    -------
    markupsafe.Markup
        ``&``, ``<``, ``>``, ``"`` and ``'`` replaced by entities: safe as element text and as a quoted
        attribute value.
    """
    return _escape(value)


def html(template: str, *args: Any, **kwargs: Any) -> Markup:
    """An HTML fragment: ``template`` (storagebench's own markup) with every value escaped.

    ``html('<li class="x">{}</li>', sentence)`` escapes ``sentence``; a value that is already
    :class:`~markupsafe.Markup` (an inner fragment made by this function) is inserted as it is. Format specs
    work as in :meth:`str.format` (``{:.0%}``).

    Parameters
    ----------
    template : str
        HTML written by the code (a literal), never data.
    *args, **kwargs
        The values.

    Returns
    -------
    markupsafe.Markup
    """
    return Markup(template).format(*args, **kwargs)


#: Characters a CommonMark renderer may read as markup, each written backslash-escaped.
_MD_PUNCT = frozenset(string.punctuation)


def markdown_text(value: Any) -> str:
    """Text for Markdown: the source that a CommonMark renderer shows as exactly ``str(value)``.

    Every ASCII punctuation character is backslash-escaped (so ``<img ...>`` starts no tag, ``[x](...)``
    no link, ``*``/``_`` no emphasis, ``#``/``-``/``1.`` no heading or list), and line breaks, tabs and
    other control characters become one space each (a value cannot start a block of its own). Not for use
    inside a code span (between backticks nothing is escaped): put values in plain text.
    """
    out = []
    for ch in str(value):
        if ch in _MD_PUNCT:
            out.append("\\" + ch)
        elif ch in "\u2028\u2029" or unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\u200d":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


class MarkdownText(str):
    """Markdown source built by :func:`markdown` (its values neutralised); inserted as it is by a later one."""


class _MarkdownFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, MarkdownText):
            return str(value)
        return markdown_text(format(value, format_spec))


def markdown(template: str, *args: Any, **kwargs: Any) -> MarkdownText:
    """Markdown source: ``template`` (the notebook's or the library's own Markdown) with every value made
    literal by :func:`markdown_text` (a :class:`MarkdownText` value is inserted as it is).

    ``markdown("Provenance: {}", caption)`` shows the caption as plain text whatever it holds.
    """
    return MarkdownText(_MarkdownFormatter().vformat(template, args, kwargs))


def render_markdown(source: str) -> Markup:
    """HTML of Markdown displayed at run time, with raw HTML escaped and harmful link schemes removed.

    nbconvert renders Markdown with raw HTML passed through (``escape=False``) and every link scheme allowed;
    this renders it with nbconvert's own renderer (so math, tables and code look the same) but
    ``escape=True`` and ``allow_harmful_protocols=False``: ``<script>`` in the source is shown as text,
    ``[x](javascript:...)`` links to ``#harmful-link``, and an image that is not a ``data:image/`` URI is
    shown as its alt text.
    """
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class Renderer(IPythonRenderer):
        def image(self, text: str, url: str, title: str | None = None) -> str:
            # a write-up embeds its images: one from anywhere else would only be blocked by the CSP
            if not _IMAGE_DATA.match(_url_text(url)):
                return str(escape(text))
            return super().image(text, url, title)

    renderer = Renderer(escape=True, allow_harmful_protocols=False, exclude_anchor_links=True)
    return Markup(MarkdownWithMath(renderer=renderer).render(str(source)))


def site_href(target: str | os.PathLike, root: str | os.PathLike) -> str | None:
    """The link to ``target`` from a page in ``root``, or None when the link rule refuses it.

    The rule of the site index: a link is a relative path, percent-encoded segment by segment (``:`` is
    ``%3A``, so a directory named ``javascript:alert(1)`` is a path, never a scheme), to a regular file that
    exists under ``root`` once every symlink is resolved; no scheme, no ``..``, no absolute path, no query or
    fragment. Anything else is shown as text without a link.

    Parameters
    ----------
    target : str or path
        The file to link to (absolute, or relative to ``root``).
    root : str or path
        The directory of the page (the site root).

    Returns
    -------
    str or None
    """
    base = Path(root).resolve()
    path = Path(target) if os.path.isabs(target) else base / target
    try:
        real = path.resolve(strict=True)  # a symlink leaving the root is judged where it leads
        rel = real.relative_to(base)
    except (OSError, ValueError, RuntimeError):
        return None
    if not real.is_file() or not rel.parts or ".." in rel.parts:
        return None
    href = "/".join(quote(part, safe="") for part in rel.parts)  # ":" is %3A: no segment reads as a scheme
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or parts.query or parts.fragment:  # cannot happen after quoting: checked anyway
        return None
    return href


# --------------------------------------------------------------------------- the page's last step

_FORBIDDEN_TAGS = frozenset({"script", "iframe", "frame", "frameset", "object", "embed", "applet", "base", "form",
                             "input", "button", "textarea", "select", "link", "portal", "fencedframe", "noscript",
                             "template", "animate", "set", "animatemotion", "animatetransform", "handler",
                             "foreignobject", "math"})
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "xlink:href", "srcset", "poster", "data",
                        "background", "ping", "lowsrc", "dynsrc", "codebase", "cite", "longdesc", "usemap",
                        "manifest", "icon", "archive", "classid", "profile", "itemtype"})
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|svg\+xml)[;,]", re.I)
_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_CSS_BAD = re.compile(r"javascript:|vbscript:|expression\s*\(|-moz-binding|behavior\s*:|@import|url\s*\(\s*['\"]?"
                      r"(?!data:image/)", re.I)
_META_OK = {"content-security-policy", "content-type"}


def _url_text(value: str) -> str:
    """A URL as a browser reads it: tabs and line breaks removed, leading/trailing C0 and spaces stripped."""
    return re.sub(r"[\t\n\r]", "", value).strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11"
                                                  "\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")


def _element_problems(tag: str, attrs: list[tuple[str, str | None]], where: str) -> list[str]:
    """What one element (its tag and attributes) could run or load; ``where`` names its place in the page."""
    problems = []
    if tag in _FORBIDDEN_TAGS:
        problems.append(f"<{tag}> element at {where}")
    for name, value in attrs:
        name, value = name.lower(), value or ""
        if name.startswith("on"):
            problems.append(f"event-handler attribute {name}= on <{tag}> at {where}")
        elif name == "srcdoc":
            problems.append(f"srcdoc= on <{tag}> at {where}")
        elif name == "style" and _CSS_BAD.search(value):
            problems.append(f"style= with {_CSS_BAD.search(value)[0]!r} on <{tag}> at {where}")
        elif name in _URL_ATTRS or name.endswith(":href"):
            url = _url_text(value)
            scheme = urlsplit(url).scheme.lower() if ":" in url.split("/", 1)[0] else ""
            if name in ("src", "srcset", "poster", "lowsrc", "dynsrc", "background"):
                if not _IMAGE_DATA.match(url):
                    problems.append(f"{name}={url[:60]!r} on <{tag}> at {where} (only data:image/ URIs are embedded)")
            elif name == "href" and tag == "a":
                if scheme and scheme not in _LINK_SCHEMES:
                    problems.append(f"link to a {scheme}: URL on <a> at {where}")
            else:
                problems.append(f"{name}= on <{tag}> at {where}")
    if tag == "meta":
        equiv = {k.lower(): (v or "") for k, v in attrs}.get("http-equiv", "").lower()
        if equiv and equiv not in _META_OK:
            problems.append(f"<meta http-equiv={equiv!r}> at {where}")
    return problems


class _PageCheck(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.in_style = False
        self.csp: list[str] = []
        self.head_first: str | None = None
        self.in_head = False

    def _where(self) -> str:
        line, col = self.getpos()
        return f"line {line}, column {col + 1}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        tag = tag.lower()
        if self.in_head and self.head_first is None:
            self.head_first = tag + ("|" + dict(attrs).get("http-equiv", "") if tag == "meta" else "")
        if tag == "head":
            self.in_head = True
        if tag == "style":
            self.in_style = True
        self.problems += _element_problems(tag, attrs, self._where())
        if tag == "meta":
            a = {k.lower(): (v or "") for k, v in attrs}
            if a.get("http-equiv", "").lower() == "content-security-policy":
                self.csp.append(a.get("content", ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag.lower() == "style":
            self.in_style = False

    def handle_endtag(self, tag: str) -> None:
        if tag.lower() == "style":
            self.in_style = False
        if tag.lower() == "head":
            self.in_head = False

    def handle_data(self, data: str) -> None:
        if self.in_style and _CSS_BAD.search(data):
            self.problems.append(f"<style> with {_CSS_BAD.search(data)[0]!r} at {self._where()}")


def _tree_problems(page: str) -> tuple[list[str], str | None, list[str]]:
    """:func:`_element_problems` of every element of the tree a browser builds from ``page``, the first element
    of its ``<head>`` and the content of every Content-Security-Policy ``<meta>``.

    Python's tokenizer is not the HTML5 one: it reads ``<!-->`` as the start of a comment running to the next
    ``-->`` (a browser: an empty comment, and what follows is markup), ``<![CDATA[`` outside SVG as a marked
    section (a browser: a bogus comment ending at the first ``>``), the content of ``<noframes>`` as markup
    (a browser: raw text ending at the first ``</noframes>``, even inside an attribute), and an ``<img>`` in
    an SVG ``<style>`` as CSS (a browser: an HTML element that breaks out of the SVG). html5lib builds the
    tree by the HTML5 parsing algorithm (tokenizer and tree construction, foreign content included), so what
    is judged here is what a browser would run.
    """
    import html5lib

    tree = html5lib.parse(page, namespaceHTMLElements=False)
    problems: list[str] = []
    for el in tree.iter():
        if not isinstance(el.tag, str):  # a comment or processing instruction: inert in the tree
            continue
        tag = el.tag.rsplit("}", 1)[-1].lower()
        attrs = [(str(k).rsplit("}", 1)[-1] if not str(k).startswith("{http://www.w3.org/1999/xlink}")
                  else "xlink:" + str(k).rsplit("}", 1)[-1], v) for k, v in el.attrib.items()]
        problems += _element_problems(tag, attrs, "the page as a browser parses it")
        if tag == "style" and _CSS_BAD.search(el.text or ""):
            problems.append(f"<style> with {_CSS_BAD.search(el.text or '')[0]!r} (the page as a browser parses it)")
    head = tree.find("head")
    first = next((c.tag + ("|" + c.get("http-equiv", "") if c.tag == "meta" else "") for c in
                  (head if head is not None else []) if isinstance(c.tag, str)), None)
    csp = [el.get("content", "") for el in tree.iter()
           if isinstance(el.tag, str) and el.tag.rsplit("}", 1)[-1].lower() == "meta"
           and (el.get("http-equiv") or "").lower() == "content-security-policy"]
    return problems, first, csp


def page_problems(page: str) -> list[str]:
    """What in a finished page could run script or load anything, one line each (empty: the page is clean).

    Checked with Python's HTML tokenizer (:class:`html.parser.HTMLParser`): a ``<script>``, ``<iframe>``,
    ``<object>``, ``<embed>``, ``<form>``, ``<base>``, ``<link>`` (and the other elements of
    ``_FORBIDDEN_TAGS``), any ``on*=`` attribute, ``srcdoc=``, an image source that is not a ``data:image/``
    URI, a link whose scheme is not http, https or mailto, CSS with ``javascript:``, ``expression(`` or a
    ``url()`` that is not a data image, a ``<meta http-equiv>`` other than the CSP, and a page whose
    ``<head>`` does not open with exactly one :data:`CSP`. A literal ``<script`` anywhere counts too (a
    tokenizer may disagree with a browser; the text cannot hold one, since text is escaped). The same rules
    are applied a second time to the tree html5lib builds by the HTML5 parsing algorithm, as a browser does
    (:func:`_tree_problems`): ``<!--><img onerror=...>``, ``<noframes>``, ``<![CDATA[`` and an ``<img>`` in
    an SVG ``<style>`` hide markup from Python's tokenizer, not from a browser.
    """
    check = _PageCheck()
    check.feed(page)
    check.close()
    problems = list(check.problems)
    # the same rules on the tree a browser builds (html5lib): what the two tokenizers read differently is judged
    # as the browser reads it, and a page either reading finds fault with is refused
    tree, tree_first, tree_csp = _tree_problems(page)
    problems += list(dict.fromkeys(tree))
    if re.search(r"<\s*/?\s*script", page, re.I) and not any("<script>" in p for p in problems):
        problems.append("the text '<script' in the page")
    if (tree_csp != [CSP] or tree_first != "meta|Content-Security-Policy") and check.csp == [CSP] \
            and check.head_first == "meta|Content-Security-Policy":
        problems.append("as a browser parses the page, its <head> does not open with exactly storagebench's one "
                        "Content-Security-Policy")
    if check.csp != [CSP]:
        problems.append(f"the page carries {len(check.csp)} Content-Security-Policy meta element(s), not exactly "
                        "storagebench's one")
    elif check.head_first != "meta|Content-Security-Policy":
        problems.append("the Content-Security-Policy is not the first element of <head>")
    return problems


_HEAD = re.compile(r"<head(\s[^>]*)?>", re.I)


def secure_page(page: str, what: str = "the page") -> str:
    """The last step of every page storagebench writes: :data:`CSP` first in ``<head>``, then checked.

    Parameters
    ----------
    page : str
        A whole HTML document with a ``<head>``.
    what : str
        Names the page in the error.

    Returns
    -------
    str
        The page with ``<meta http-equiv="Content-Security-Policy" ...>`` as the first element of its head.

    Raises
    ------
    PublishError
        The page has no ``<head>``, or :func:`page_problems` finds something (the message lists the first
        five); nothing is written then.
    """
    m = _HEAD.search(page)
    if m is None:
        raise PublishError(f"{what} has no <head>: cannot put the Content-Security-Policy in it")
    page = page[:m.end()] + str(CSP_META) + page[m.end():]
    problems = page_problems(page)
    if problems:
        raise PublishError(f"{what} would carry script or external content ({len(problems)} problem(s): "
                           + "; ".join(problems[:5]) + "); not written. Text from data must reach HTML only "
                           "through storagebench._html.escape/html/markdown (docs/SECURITY.md, section 1)")
    return page
