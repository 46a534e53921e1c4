"""Captions of a figure: the provenance of its runs in one paragraph, written under the figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text

from .._checks import need_columns
from ..records import provenance_records


def _uniq(values) -> list[str]:
    out = []
    for v in values:
        if v is None or (not isinstance(v, (Mapping, list, tuple)) and pd.isna(v)):
            continue
        s = str(v)
        if s and s not in out:
            out.append(s)
    return out


def provenance_caption(runs: pd.DataFrame, provenance: Any = None, *, target: bool = False) -> str:
    """One-paragraph provenance text for a figure: workload, device, fio version, host, date.

    A figure's caption names what was measured by its device and filesystem, not by the target's path (a
    file in the user's temporary directory says nothing to a reader, and would be printed under every
    figure); ``target=True`` adds the paths, for the one provenance line of a write-up.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy ``runs`` table: ``study``, ``fio_version``, ``hostname``, ``kernel``,
        ``started_at``, ``target``, ``rw``, ``bs_bytes``, ``ioengine``, ``direct`` are used
        when present.
    provenance : Provenance, mapping, sequence of them or DataFrame, optional
        ``provenance.json`` records of the runs (:func:`storagebench.publish.study_provenance`, or
        their JSON form: :func:`storagebench.records.provenance_records`); the device
        (:attr:`storagebench.records.DeviceInfo.label`) and filesystem are taken from them.
    target : bool
        Also name the targets (``runs["target"]``, at most three): ``on /tmp/x``.

    Returns
    -------
    str
        e.g. ``"study demo, 36 runs: randread bs=4 KiB libaio direct=1 · device /dev/vda (virtio disk,
        non-rotational, 256 GiB), filesystem ext4 · fio-3.33 · kernel 6.1.0 · host h · 2026-11-22 05:41–05:45
        UTC"`` (with ``target=True``: ``... direct=1 on /tmp/x · ...``).
    """
    need_columns(runs, ["run_id"], "runs")
    recs = provenance_records(provenance)
    parts = []
    head = []
    if "study" in runs:
        head.append("study " + "/".join(_uniq(runs["study"])))
    head.append(f"{runs['run_id'].nunique()} runs")
    wl = []
    if "rw" in runs:
        wl.append("/".join(_uniq(runs["rw"])))
    if "bs_bytes" in runs:
        wl.append("bs=" + "/".join(f"{int(b) / 1024:g} KiB" for b in sorted(set(runs["bs_bytes"].dropna()))))
    if "ioengine" in runs:
        wl.append("/".join(_uniq(runs["ioengine"])))
    if "direct" in runs:
        wl.append("direct=" + "/".join(_uniq(runs["direct"].astype("boolean").astype("Int64"))))
    if target and "target" in runs:
        wl.append("on " + ", ".join(_uniq(runs["target"])[:3]))
    parts.append(", ".join(head) + (": " + " ".join(wl) if wl else ""))
    devs = _uniq(r.device.label for r in recs if r.device is not None)
    fss = _uniq(r.filesystem.fstype for r in recs if r.filesystem is not None)
    if devs:
        parts.append("device " + ", ".join(devs[:3]) + (f", filesystem {'/'.join(fss)}" if fss else ""))
    fio = _uniq(runs["fio_version"]) if "fio_version" in runs else _uniq(r.fio_version for r in recs)
    if fio:
        parts.append(", ".join(fio))
    kern = _uniq(runs["kernel"]) if "kernel" in runs else _uniq(r.kernel for r in recs)
    if kern:
        parts.append("kernel " + ", ".join(kern))
    hosts = _uniq(runs["hostname"]) if "hostname" in runs else _uniq(r.hostname for r in recs)
    if hosts:
        parts.append("host " + ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else ""))
    times = pd.to_datetime(runs["started_at"], utc=True) if "started_at" in runs else \
        pd.to_datetime(pd.Series([r.started_at for r in recs], dtype=object), utc=True)
    times = times.dropna()
    if len(times):
        t0, t1 = times.min(), times.max()
        end = t1.strftime("%H:%M") if t0.date() == t1.date() else t1.strftime("%Y-%m-%d %H:%M")
        parts.append(f"{t0:%Y-%m-%d %H:%M}–{end} UTC")
    return " · ".join(parts)


def add_caption(fig: Figure, text: str, *, fontsize: str | float = "x-small") -> Text:
    """Write ``text`` under the figure (left aligned, wrapped), e.g. :func:`provenance_caption`.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Also accepts an Axes (its figure is used).
    text : str
    fontsize : str or float

    Returns
    -------
    matplotlib.text.Text
        The caption artist (in ``fig.texts``); figures saved with ``bbox_inches="tight"`` (as
        Jupyter's inline backend does) include it.
    """
    if isinstance(fig, Axes):
        fig = fig.figure
    if not isinstance(fig, Figure):
        raise TypeError(f"`fig` must be a matplotlib Figure or Axes, but {type(fig).__name__} was passed.")
    if not isinstance(text, str) or not text:
        raise ValueError("`text` must be a non-empty string.")
    return fig.text(0.01, -0.01, text, ha="left", va="top", fontsize=fontsize, color="0.25", wrap=True,
                    gid="storagebench-caption")
