"""Provenance and the site index over published reports: the study's provenance, atomic writes, sidecars and
the index page (part of :mod:`storagebench.publish`).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path
from typing import Any

import orjson

from ._html import Markup, html, secure_page, site_href
from ._inputs import read_input, walk
from ._pubpage import (
    REPORT_CSS,
)
from ._store import StudyStore

# papermill, nbformat, nbconvert, jupyter_client and jinja2 are imported inside the functions that use them:
# `import storagebench` loads this module, and they would add about a second to every command.
from ._version import __version__
from .errors import PublishError, SchemaError
from .records import Provenance


def study_provenance(study_dir: str | os.PathLike) -> list[Provenance]:
    """The ``provenance.json`` records of the completed runs of a study, for captions.

    Parameters
    ----------
    study_dir : str or path
        ``results/<study>/``; records are read from ``raw/<run_id>/provenance.json``
        (:meth:`storagebench._store.StudyStore.provenance`, any format version this storagebench reads).

    Returns
    -------
    list of storagebench.records.Provenance
        One record per run, in run-id order.

    Raises
    ------
    PublishError
        ``study_dir`` has no ``raw/`` directory, or a record is not valid (not JSON, a newer format,
        a field of the wrong type; the message names the file).
    """
    store = StudyStore(study_dir)
    if not store.raw_dir.is_dir():
        raise PublishError(f"study_dir {str(study_dir)!r} has no raw/ directory of completed runs")
    try:
        return list(store.provenance().values())
    except SchemaError as exc:
        raise PublishError(str(exc)) from exc


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by one rename, with the mode any new file gets here (0666 less the umask).

    ``tempfile.mkstemp`` would create the file 0600 whatever the umask, and a report nobody else can read
    cannot be served or shared; ``os.open(..., 0o666)`` lets the kernel apply the umask as for any file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk says nothing of where: name the file being written
        tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: Version of the ``report.json`` sidecar format (:func:`publish_report`, read by :func:`build_site`).
SIDECAR_VERSION = 1


def sidecar_path(report: str | os.PathLike) -> Path:
    """``report.json`` beside ``report.html`` (the same name with ``.json``)."""
    return Path(report).with_suffix(".json")


def _relative(value: Any, base: Path) -> Any:
    """A parameter for the sidecar: paths inside the report's directory written relative to it."""
    if isinstance(value, str) and os.path.isabs(value):
        try:
            return str(Path(value).resolve().relative_to(base.resolve())) or "."
        except ValueError:
            return value
    return value


def _provenance_summary(study_dir: Path) -> dict[str, Any]:
    """Runs, hosts, fio versions and dates of a study directory's ``raw/`` records ({} without ``raw/``)."""
    if not (study_dir / "raw").is_dir():
        return {}
    recs = study_provenance(study_dir)
    if not recs:
        return {"runs": 0}

    def uniq(key: str) -> list[str]:
        return sorted({str(getattr(r, key)) for r in recs if getattr(r, key) not in (None, "")})

    started = uniq("started_at")
    out: dict[str, Any] = {"runs": len(recs), "hosts": uniq("hostname"), "fio_versions": uniq("fio_version"),
                           "kernels": uniq("kernel"), "first_run": started[0] if started else None,
                           "last_run": started[-1] if started else None}
    when = f", {started[0][:10]}" + (f" to {started[-1][:10]}" if started and started[-1][:10] != started[0][:10]
                                       else "") if started else ""
    out["summary"] = (f"{len(recs)} fio runs on {', '.join(out['hosts'][:3]) or 'an unknown host'}"
                      f" ({', '.join(out['fio_versions']) or 'fio version unknown'}){when}")
    return out


#: Largest ``report.json`` sidecar read, bytes (:func:`build_site`; a sidecar is a few KiB).
MAX_SIDECAR_BYTES = 16 * 2**20


def _read_sidecar(path: Path, root: Path | None = None) -> dict[str, Any]:
    try:
        data = orjson.loads(read_input(path, max_bytes=MAX_SIDECAR_BYTES, what="report sidecar", error=PublishError,
                                       root=root))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise PublishError(f"{path}: not a readable report sidecar: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list) or "title" not in data:
        raise PublishError(f"{path}: not a report sidecar (no title and findings)")
    version = data.get("format_version")
    if not isinstance(version, int) or version > SIDECAR_VERSION:
        raise PublishError(f"{path}: sidecar format_version {version!r} is not one this storagebench reads "
                           f"(<= {SIDECAR_VERSION}); upgrade storagebench")
    return data


def build_site(results_dir: str | os.PathLike, out: str | os.PathLike | None = None, *,
               headline: int = 3) -> tuple[Path, list[Path], list[str]]:
    """An offline index page of every write-up published under ``results_dir``.

    Parameters
    ----------
    results_dir : str or path
        Directory searched (recursively, up to 4 levels) for ``report.json`` sidecars written by
        :func:`publish_report`; each is listed when its report (``report.html``) is beside it.
    out : str or path, optional
        The index page; default ``<results_dir>/index.html``. Links are relative to it, so the
        directory can be copied or served as it is.
    headline : int
        Findings shown per write-up (results first, then caveats).

    Returns
    -------
    (pathlib.Path, list of Path, list of str)
        The page, the sidecars listed (newest first) and one line per sidecar left out and why.

    Raises
    ------
    PublishError
        ``results_dir`` is not a directory.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise PublishError(f"results_dir {str(results_dir)!r} is not a directory")
    page_path = Path(out) if out is not None else root / "index.html"
    found, skipped = [], []
    # the one walk of inputs (storagebench._inputs.walk): regular files only, symlinks leaving the tree not followed,
    # FIFOs, sockets and devices never opened; hidden names skipped, as a glob would
    for d, dirs, files, bad in walk(root, max_depth=4):
        dirs[:] = [n for n in dirs if not n.startswith(".") and n != "notebooks"]
        skipped += [f"{r.path}: {r.reason}" for r in bad
                    if not os.path.basename(r.path).startswith(".") and (r.path.endswith((".json", ".html"))
                                                                         or "directory" in r.reason)]
        listed = set(files)
        for name in sorted(n for n in files if n.endswith(".json") and not n.startswith(".")):
            sidecar, html_name = Path(d) / name, name[: -len(".json")] + ".html"
            if html_name not in listed:
                if name == "report.json":
                    skipped.append(f"{sidecar}: no {html_name} (a regular file inside the tree) beside it")
                continue
            try:
                data = _read_sidecar(sidecar, root)
            except PublishError as exc:
                if name == "report.json":
                    skipped.append(str(exc))
                continue
            found.append((str(data.get("date") or ""), sidecar, data))
    found.sort(key=lambda t: (t[0], str(t[1])), reverse=True)
    base = page_path.parent.resolve()
    items = []
    for date, sidecar, data in found:
        # the link rule (storagebench._html.site_href): a relative path to a file under the index's directory
        href = site_href(sidecar.with_suffix(".html").absolute(), base)
        fnd = [f for f in data["findings"] if isinstance(f, dict) and f.get("sentence")]
        fnd = [f for f in fnd if not f.get("caveat")] + [f for f in fnd if f.get("caveat")]
        lis = Markup("").join(html('<li class="sb-caveat"><strong>Caveat:</strong> {}</li>', f["sentence"])
                              if f.get("caveat") else html("<li>{}</li>", f["sentence"]) for f in fnd[:headline])
        more = len(fnd) - headline
        when = date.replace("T", " ").replace("Z", " UTC") if date else "date unknown"
        where = str(sidecar.parent.relative_to(root)) if sidecar.parent != root else "."
        summary = data["provenance"].get("summary") if isinstance(data.get("provenance"), dict) else None
        # a write-up published with --partial says so in the index too (its sidecar keeps the banner's text)
        partial = (html('<p class="sb-partial" role="note"><strong>Partial write-up:</strong> {}</p>', data["partial"])
                   if data.get("partial") else "")
        title = (html('<a href="{}">{}</a>', href, data["title"]) if href is not None
                 else html('{} <span class="sb-report-meta">(not linked: {} is not a file under {})</span>',
                           data["title"], sidecar.with_suffix(".html").name, base.name or str(base)))
        items.append(html(
            '<article class="sb-site-entry"><h2>{}</h2><p class="sb-report-meta">{} · {}{}</p>{}{}{}</article>',
            title, when, where, html(" · {}", summary) if summary else "", partial,
            html("<ul>{}</ul>", lis) if lis else Markup("<p>No findings recorded.</p>"),
            html('<p class="sb-report-meta">{} more finding(s) in the write-up.</p>', more) if more > 0 else ""))
    now = dt.datetime.now(dt.timezone.utc)
    left_out = Markup("").join(html("<li>{}</li>", s) for s in skipped)
    page = str(html(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        "<title>storagebench write-ups</title><style>{css}</style></head><body><main>"
        '<h1>storagebench write-ups</h1><p class="sb-report-meta">{n} write-up(s) under this '
        "directory; index built {now} UTC with storagebench {version}.</p>{items}{left}</main></body></html>\n",
        css=Markup(REPORT_CSS), n=len(found), now=f"{now:%Y-%m-%d %H:%M}", version=__version__,
        items=Markup("").join(items), left=html("<h2>Not listed</h2><ul>{}</ul>", left_out) if skipped else ""))
    page = secure_page(page, f"the index of {root}")
    _atomic_write(page_path, page)
    return page_path, [s for _, s, _ in found], skipped
