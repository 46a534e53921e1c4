"""Steady state: the SNIA PTS window criteria, and fio's own ``steadystate`` block.

The PTS judges steady state over *rounds*: whole test rounds (a full pass of the test's workloads, minutes
each). :func:`steady_state` applies its criteria to whatever values it is given; :func:`steady_state_timeseries`
to rounds of a log. Given one-second samples inside one run (as the testbed write-ups do) the same criteria
measure *within-run stability*, which is not PTS steady state and is not called so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from ..errors import StatsError
from ._common import as_list, require_columns

_PTS = ("SNIA Solid State Storage Performance Test Specification (PTS), steady state: over a measurement window "
        "of {w} rounds, max - min of the data <= {d:.0%} of the window mean and max - min of the least-squares "
        "line over the window <= {s:.0%} of the window mean")


@dataclass(frozen=True)
class SteadyState:
    """Result of the SNIA PTS steady-state window test (:func:`steady_state`).

    Attributes
    ----------
    steady : bool
        True when some window of ``window`` consecutive rounds meets both criteria.
    first_round : int or None
        0-based index of the last round of the first window that meets them (the round at which steady
        state is reached), None when never.
    window : int
        Rounds per window (PTS: 5).
    mean, data_range_pct, fit_range_pct, slope : float
        For the reported window (the first steady one, else the last one): window mean, max - min of the
        data as a fraction of the mean, max - min of the fitted line as a fraction of the mean, and the
        fitted slope (metric unit per round).
    data_limit, fit_limit : float
        The criteria (PTS: 0.20 and 0.10).
    windows : pandas.DataFrame
        Every window: ``end_round, mean, data_range_pct, fit_range_pct, slope, steady``.
    method : str
    """

    steady: bool
    first_round: int | None
    window: int
    mean: float
    data_range_pct: float
    fit_range_pct: float
    slope: float
    data_limit: float
    fit_limit: float
    windows: pd.DataFrame
    method: str


def steady_state(values: Sequence[float], *, window: int = 5, data_limit: float = 0.20,
                 fit_limit: float = 0.10) -> SteadyState:
    """SNIA PTS steady-state criteria over per-round values (e.g. IOPS of each preconditioning round).

    PTS steady state when the values are PTS rounds (whole test rounds); applied to one-second samples of
    one run the same criteria measure within-run stability, and the caller should say so.

    Parameters
    ----------
    values : sequence of float
        One value per round, in round order (IOPS in 1/s, bandwidth in bytes/s or latency in ns).
    window : int
        Measurement window in rounds (PTS: 5).
    data_limit : float
        Maximum data excursion ``(max - min) / mean`` in the window (PTS: 0.20).
    fit_limit : float
        Maximum excursion of the least-squares line over the window ``|slope| x (window - 1) / mean``
        (PTS: 0.10).

    Returns
    -------
    SteadyState

    Raises
    ------
    StatsError
        Fewer values than ``window``; NaN or non-positive mean values; ``window`` < 3; limits outside (0, 1).

    Notes
    -----
    SNIA Solid State Storage Performance Test Specification (PTS, Enterprise and Client editions),
    definition of Steady State over a Measurement Window of 5 rounds: the data excursion (max - min of
    the values) is at most 20% of the window average, and the excursion of the least-squares line fitted
    to the window (its max - min over the window) is at most 10% of the window average. The linear fit is
    ``scipy.stats.linregress`` over round numbers.
    """
    if not isinstance(window, (int, np.integer)) or window < 3:
        raise StatsError(f"window must be an int >= 3 rounds, got {window!r}")
    for name, lim in (("data_limit", data_limit), ("fit_limit", fit_limit)):
        if not (isinstance(lim, (int, float)) and 0 < lim < 1):
            raise StatsError(f"{name} must be a fraction in (0, 1), got {lim!r}")
    y = np.asarray(values, dtype=float).ravel()
    if y.size < window:
        raise StatsError(f"steady state needs at least window={window} rounds, got {y.size}")
    if not np.isfinite(y).all():
        raise StatsError(f"values have {int((~np.isfinite(y)).sum())} NaN/infinite round(s)")
    x = np.arange(window, dtype=float)
    rows = []
    for end in range(window - 1, y.size):
        w = y[end - window + 1:end + 1]
        m = float(w.mean())
        if m <= 0:
            raise StatsError(f"window ending at round {end} has mean {m} <= 0; excursions relative to the mean "
                             "need positive values")
        fit = st.linregress(x, w)
        dr = float(w.max() - w.min()) / m
        fr = abs(float(fit.slope)) * (window - 1) / m
        rows.append(dict(end_round=end, mean=m, data_range_pct=dr, fit_range_pct=fr, slope=float(fit.slope),
                         steady=bool(dr <= data_limit and fr <= fit_limit)))
    windows = pd.DataFrame(rows)
    hits = windows.index[windows["steady"]]
    pick = windows.loc[hits[0]] if len(hits) else windows.iloc[-1]
    return SteadyState(steady=bool(len(hits)), first_round=int(pick["end_round"]) if len(hits) else None,
                       window=int(window), mean=float(pick["mean"]), data_range_pct=float(pick["data_range_pct"]),
                       fit_range_pct=float(pick["fit_range_pct"]), slope=float(pick["slope"]),
                       data_limit=float(data_limit), fit_limit=float(fit_limit), windows=windows,
                       method=_PTS.format(w=window, d=data_limit, s=fit_limit))


def steady_state_timeseries(ts: pd.DataFrame, *, metric: str = "iops", round_s: float = 1.0, window: int = 5,
                            data_limit: float = 0.20, fit_limit: float = 0.10,
                            by: str | Sequence[str] | None = ("run_id", "host", "job", "direction"),
                            sum_over: str | Sequence[str] | None = None, align: str = "floor") -> pd.DataFrame:
    """The SNIA PTS window criteria on a ``timeseries`` table: samples averaged into rounds of ``round_s``.

    A "round" here is ``round_s`` of a log, not a PTS round (a whole test round): with ``round_s`` of a
    second on one run's log the result is within-run stability, not PTS steady state.

    Parameters
    ----------
    ts : pandas.DataFrame
        ``timeseries``-schema table (``t_s``, ``metric``, ``value`` and the ``by`` columns).
    metric : str
        Which ``metric`` rows to use: ``iops``, ``bw_bytes_per_s``, ``lat_ns``, ``clat_ns`` or ``slat_ns``.
    round_s : float
        Round length in seconds.
    window, data_limit, fit_limit
        As in :func:`steady_state`.
    by : list of str
        Columns identifying one series (those missing from ``ts`` are ignored).
    sum_over : str or list of str, optional
        Columns whose series are added up within each round before the test (those missing from ``ts``
        are ignored): e.g. ``["job", "log_index", "direction"]`` with ``by=["run_id"]`` tests a run's
        total IOPS (fio writes one log per job and one line per direction). Each sub-series is averaged
        within the round first. Only for additive metrics (``iops``, ``bw_bytes_per_s``).
    align : {"floor", "nearest"}
        How a sample's time gives its round: ``"floor"``, round ``k`` holds ``k x round_s <= t_s < (k+1) x
        round_s`` (per-I/O logs); ``"nearest"``, round ``k`` is the sample nearest ``k x round_s`` (logs
        averaged by fio over ``log_avg_msec = 1000 x round_s``: fio stamps each average at the end of its
        interval, give or take a few ms, e.g. 999, 2000, 2999 ms, which ``floor`` would put into rounds
        0, 2, 2).

    Returns
    -------
    pandas.DataFrame
        One row per series: the ``by`` keys, ``rounds``, ``steady``, ``first_round``, ``steady_at_s``
        (end time of that round, s), ``mean``, ``data_range_pct``, ``fit_range_pct``, ``slope``, ``note``.

    Raises
    ------
    StatsError
        Missing columns, no rows of ``metric``, ``round_s`` <= 0, unknown ``align``, ``sum_over`` of a
        latency. A series shorter than ``window`` rounds gives a row with ``steady`` False and a note.
    """
    require_columns(ts, ["t_s", "metric", "value"], "timeseries")
    if not (isinstance(round_s, (int, float)) and round_s > 0):
        raise StatsError(f"round_s must be a positive number of seconds, got {round_s!r}")
    if align not in ("floor", "nearest"):
        raise StatsError(f"align must be 'floor' or 'nearest', got {align!r}")
    if sum_over and metric not in ("iops", "bw_bytes_per_s"):
        raise StatsError(f"sum_over adds series up: only for iops or bw_bytes_per_s, got metric {metric!r}")
    sel = ts[ts["metric"] == metric]
    if sel.empty:
        raise StatsError(f"timeseries has no rows with metric {metric!r}; metrics present: "
                         f"{sorted(map(str, ts['metric'].unique()))}")
    keys = [c for c in as_list(by) if c in sel.columns]
    parts = [c for c in as_list(sum_over) if c in sel.columns and c not in keys]
    t = sel["t_s"].to_numpy(float) / round_s
    sel = sel.assign(_round=(np.rint(t) if align == "nearest" else np.floor(t)).astype(int))
    if parts:  # each sub-series' round mean, then their sum per round
        sel = (sel.groupby([*keys, *parts, "_round"], sort=True, dropna=False)["value"].mean()
               .groupby([*keys, "_round"] if keys else ["_round"], sort=True, dropna=False).sum().reset_index())
    groups = sel.groupby(keys, sort=True, dropna=False) if keys else [((), sel)]
    out = []
    for key, g in groups:
        rec = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)) if keys else {}
        per_round = g.groupby("_round")["value"].mean().sort_index()
        rec["rounds"] = len(per_round)
        try:
            r = steady_state(per_round.to_numpy(), window=window, data_limit=data_limit, fit_limit=fit_limit)
        except StatsError as exc:
            rec.update(steady=False, first_round=None, steady_at_s=math.nan, mean=math.nan,
                       data_range_pct=math.nan, fit_range_pct=math.nan, slope=math.nan, note=str(exc))
        else:
            at = math.nan
            if r.steady:  # the end of the round at which the window was first steady
                at = (per_round.index[r.first_round] + (0 if align == "nearest" else 1)) * round_s
            rec.update(steady=r.steady, first_round=r.first_round, steady_at_s=float(at), mean=r.mean,
                       data_range_pct=r.data_range_pct, fit_range_pct=r.fit_range_pct, slope=r.slope, note="")
        out.append(rec)
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- fio's steadystate block


@dataclass(frozen=True)
class FioSteadyState:
    """fio's own steady-state detection result for one job (the JSON ``steadystate`` block).

    Attributes
    ----------
    job : str
        fio jobname.
    criterion_kind : {"deviation", "slope"}
        ``ss=iops:``/``bw:`` (maximum deviation from the window mean) or ``iops_slope:``/``bw_slope:``
        (least-squares slope), fio ``steadystate.c``.
    metric : {"iops", "bw_bytes_per_s"}
    limit : float
        fio's limit (percent when ``percent`` is True, else IOPS or bytes/s).
    percent : bool
    duration_s : int
        ``ss_dur``: the window, one sample per second.
    attained : bool
        fio's verdict (``attained`` = 1: fio stopped the job early at steady state).
    criterion : float
        fio's last computed criterion (percent of the window mean when ``percent``).
    max_deviation, slope : float
        fio's ``max_deviation`` (metric unit) and ``slope`` (metric unit per second).
    iops, bw_bytes_per_s : tuple of float
        The window samples, oldest first, as fio writes them.
    recomputed_criterion : float
        The criterion recomputed from the samples with fio's rule (as fio's ``t/steadystate_tests.py``
        does): deviation ``max|y - mean| (/ mean x 100)``, slope ``linregress`` slope ``(/ mean x 100)``.
    """

    job: str
    criterion_kind: str
    metric: str
    limit: float
    percent: bool
    duration_s: int
    attained: bool
    criterion: float
    max_deviation: float
    slope: float
    iops: tuple[float, ...]
    bw_bytes_per_s: tuple[float, ...]
    recomputed_criterion: float


_SS_RE = re.compile(r"^(iops|bw)(_slope)?:([0-9.eE+-]+)(%?)$")


def _pct(text) -> float:
    s = str(text).strip()
    return float(s[:-1]) if s.endswith("%") else float(s)


def _one_ss(job: dict) -> FioSteadyState:
    name = str(job.get("jobname", "?"))
    block = job.get("steadystate")
    if not isinstance(block, dict):
        raise StatsError(f"fio job {name!r} has no 'steadystate' block (run fio with --ss=... and --ss_dur=...)")
    try:
        m = _SS_RE.match(str(block["ss"]).strip())
        if m is None:
            raise StatsError(f"fio job {name!r}: steadystate 'ss' must look like 'iops:10%' or 'bw_slope:0.1%', "
                             f"got {block['ss']!r}")
        metric = "iops" if m.group(1) == "iops" else "bw_bytes_per_s"
        kind = "slope" if m.group(2) else "deviation"
        percent = m.group(4) == "%"
        data = block["data"]
        iops = tuple(float(v) for v in data["iops"])
        bw = tuple(float(v) for v in data["bw"])
        criterion = _pct(block["criterion"])
        res = dict(job=name, criterion_kind=kind, metric=metric, limit=float(m.group(3)), percent=percent,
                   duration_s=int(block["duration"]), attained=bool(int(block["attained"])), criterion=criterion,
                   max_deviation=float(block["max_deviation"]), slope=float(block["slope"]), iops=iops,
                   bw_bytes_per_s=bw)
    except (KeyError, TypeError, ValueError) as exc:
        raise StatsError(f"fio job {name!r}: malformed steadystate block ({exc!r})") from exc
    y = np.asarray(iops if metric == "iops" else bw, dtype=float)
    if y.size == 0:
        rec = math.nan
    else:
        mean = float(y.mean())
        if kind == "slope":
            val = float(st.linregress(np.arange(y.size), y).slope) if y.size > 1 else math.nan
        else:
            val = float(np.abs(y - mean).max())
        rec = (val / mean * 100 if mean else math.nan) if percent else val
    return FioSteadyState(**res, recomputed_criterion=rec)


def fio_steadystate(output: dict) -> tuple[FioSteadyState, ...]:
    """Read fio's ``steadystate`` blocks from a parsed fio JSON output (or one job of it).

    Parameters
    ----------
    output : dict
        ``json.loads`` / ``orjson.loads`` of ``fio --output-format=json`` (the ``jobs`` list is read; in
        client/server output, ``client_stats`` too), or a single job object.

    Returns
    -------
    tuple of FioSteadyState
        One per job with a ``steadystate`` block, in output order.

    Raises
    ------
    StatsError
        Not a fio output / job, or no job has a ``steadystate`` block, or a block is malformed.

    Notes
    -----
    Fields as written by fio's ``stat.c`` from ``steadystate.c`` (``ss``, ``duration``, ``attained``,
    ``criterion``, ``max_deviation``, ``slope``, ``data.iops``/``data.bw``, one sample per second of
    ``ss_dur``); options ``steadystate``/``ss``, ``ss_dur``, ``ss_ramp`` in fio's HOWTO.
    """
    if not isinstance(output, dict):
        raise StatsError(f"output must be a parsed fio JSON object (dict), got {type(output).__name__}")
    if "jobname" in output:
        jobs = [output]
    else:
        jobs = list(output.get("jobs") or []) + [j for j in output.get("client_stats") or []
                                                 if j.get("jobname") != "All clients"]
        if not jobs and "fio version" not in output:
            raise StatsError("output is not fio JSON: no 'jobs' or 'client_stats' list")
    found = tuple(_one_ss(j) for j in jobs if "steadystate" in j)
    if not found:
        raise StatsError(f"none of the {len(jobs)} fio job(s) has a 'steadystate' block; run fio with "
                         "--ss=iops:10% --ss_dur=60 (or steadystate= in the job file)")
    return found


def steadystate_sentence(runs: pd.DataFrame) -> str:
    """What fio's own steady-state detection did to a study's runs, in one sentence ('' when no run had a rule).

    Parameters
    ----------
    runs : pandas.DataFrame
        ``runs`` or ``run_totals`` rows (``run_id``, ``ss_rule``, ``ss_window_s``, ``ss_attained``,
        ``runtime_s``; a table without ``ss_rule`` has no rule).

    Returns
    -------
    str
        How many runs fio stopped early at steady state (``ss_attained``: a shorter runtime than the study's)
        and how many never became steady (they ran the full runtime, and their numbers are not steady-state
        numbers), with the rules as fio read them. Plain text: a report shows it through its HTML gate
        (:func:`storagebench.show.markdown`).
    """
    if "ss_rule" not in runs.columns or "run_id" not in runs.columns:
        return ""
    ss = runs[runs["ss_rule"].astype(str) != ""]
    if ss.empty:
        return ""
    per_run = ss.groupby("run_id", sort=False).agg(
        attained=("ss_attained", "all"), runtime=("runtime_s", "max"))
    n, steady = len(per_run), int(per_run["attained"].sum())
    rules = sorted({f"{r} over {w:g} s" for r, w in zip(ss["ss_rule"].astype(str), ss["ss_window_s"], strict=True)})
    shown_rules = "; ".join(rules[:3]) + (f" and {len(rules) - 3} more" if len(rules) > 3 else "")
    out = (f"Run length: fio's own steady-state detection ({shown_rules}) stopped {steady} of {n} runs early, "
           "once steady")
    if steady:
        rt = per_run.loc[per_run["attained"], "runtime"]
        out += f" (after {rt.min():.3g} to {rt.max():.3g} s)"
    if steady < n:
        out += (f"; {n - steady} never became steady and ran their full runtime: their numbers are not "
                "steady-state numbers")
    return out + "."
