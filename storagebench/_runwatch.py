"""The run's own watch of a ramped run: its device's counters sampled while fio runs, and the ramp's end found.

fio resets its counts when ``ramp_time`` ends (fio 3.33 ``reset_all_stats``): its ``total_ios`` and ``io_bytes``
cover the measured window only, while the device also did the ramp's I/O. To tell fio's I/O apart from others'
(:func:`storagebench._hostinfo.run_io_record`), the device's counters must be read at the ramp's end, a moment
storagebench does not see. :class:`IoSampler` reads them from a helper thread while fio runs (densely where the
ramp's end and the run's end are expected), and :func:`ramp_io_record` places the ramp's end on those samples:
fio's measured window lasted its ``runtime`` (:func:`storagebench.fio.process.measured_window`) and ended
when its I/O stopped, which the samples show (fio's ``timestamp_ms`` comes 40 to 60 ms later, after its
drain: at 14,000 IOPS that alone would hide 700 I/Os). The device's I/O from the ramp's end to fio's exit
beyond fio's own is others'; the samples bracketing the ramp's end bound what the reading there may be off
by (``tolerance_ios``, ``tolerance_bytes`` in the record), and the run is called busy only beyond that. On a
host whose CPUs are taken, fio's job sees its ``runtime`` end later than its last I/O, by as long as it waited for a
CPU; the bracket's late side takes the sampler's own longest wait there (:func:`_cpu_wait`).
"""

from __future__ import annotations

import bisect
import math
import os
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from ._hostinfo import read_io_counters, run_io_record

#: Seconds between two samples where the ramp's end or the run's end is expected, and elsewhere. A sample costs
#: about 40 us of the helper thread's CPU (the read and the wake-up): 1 ms sampling over the 0.7 s where the ramp's
#: end is expected and from the earliest end of the run, 25 ms elsewhere, took 950 samples and 38 to 43 ms of CPU
#: for a 1 s ramp + 2 s run (1.2 % of one core while fio runs; wall time is fio's own).
DENSE_S, COARSE_S = 0.001, 0.025
#: Where the ramp's end is looked for, s after fio's spawn less ``ramp_time``: fio's start (its parse, the
#: jobs' set-up and its 100 ms start-up wait, ``backend.c`` ``run_threads``) took 0.26 to 0.45 s on a 2-core VM,
#: and never less than 0.1 s (so the run's end is looked for from ``runtime`` + 0.05 s after that too).
RAMP_END_AFTER_S = (0.05, 0.75)
#: Others' rate is read over this many s before fio's report: fio's jobs had ended by then (fio's drain, from its
#: jobs' end to its report, took 40 to 60 ms on a 2-core VM). The last sample interval with clearly more I/O than
#: that (3 standard deviations of a Poisson count, + 1) holds fio's last I/O: the run's end.
OTHERS_BEFORE_REPORT_S = 0.02
#: The run's end is bracketed back to the last interval with half the peak count of this many intervals before
#: fio's last I/O (several jobs end a few ms apart; fio's I/O comes in bursts on a loaded host).
PEAK_INTERVALS = 8


class IoSampler:
    """The device's counters read from a helper thread while a run's fio runs (:func:`read_io_counters`).

    Parameters
    ----------
    stat_path : path
        The device's ``stat`` file (:func:`storagebench._hostinfo.device_stat_path`).
    ramp_s : float
        The run's ``ramp_time``, s.
    runtime_s : float or None
        The run's ``runtime``, s (``None``: no dense sampling at the expected end).

    Attributes
    ----------
    t_s, ios, sectors : array of float
        Monotonic time (s) of each sample, and the device's I/Os and sectors then.
    wall_offset : float
        Wall clock less monotonic clock when sampling began, s (fio's times are on the wall clock).
    """

    def __init__(self, stat_path: str | os.PathLike[str], ramp_s: float, runtime_s: float | None):
        self.stat_path = os.fspath(stat_path)
        self.t_s, self.ios, self.sectors = array("d"), array("d"), array("d")
        self.wall_offset = time.time() - time.monotonic()
        self._ramp_s, self._runtime_s = ramp_s, runtime_s
        self._stop = threading.Event()
        self._fd: int | None = None
        self._thread = threading.Thread(target=self._run, name="storagebench-watch", daemon=True)

    def start(self) -> IoSampler:
        """Open the ``stat`` file and start sampling (a file that cannot be opened leaves no samples)."""
        try:
            self._fd = os.open(self.stat_path, os.O_RDONLY)
        except OSError:
            return self
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def _period(self, since: float) -> float:
        ramp = since - self._ramp_s
        if RAMP_END_AFTER_S[0] <= ramp <= RAMP_END_AFTER_S[1]:
            return DENSE_S
        if self._runtime_s is not None and ramp >= self._runtime_s + RAMP_END_AFTER_S[0]:
            return DENSE_S
        return COARSE_S

    def _sample(self) -> None:
        got = read_io_counters(self.stat_path, self._fd)
        if got is not None:
            self.t_s.append(got["t_s"])
            self.ios.append(got["ios"])
            self.sectors.append(got["sectors"])

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self._period(time.monotonic() - self._t0)):
                return

    def stop(self, last: dict[str, float] | None = None) -> None:
        """Stop sampling; ``last`` (a :func:`read_io_counters` reading at fio's exit) becomes the last sample."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if last is not None and (not self.t_s or last["t_s"] > self.t_s[-1]):
            self.t_s.append(last["t_s"])
            self.ios.append(last["ios"])
            self.sectors.append(last["sectors"])


def _interp(t: array, y: array, at: float) -> float:
    """``y`` at time ``at`` on the line between the samples around it (``t`` ascending, ``at`` inside)."""
    hi = min(max(bisect.bisect_right(t, at), 1), len(t) - 1)
    lo = hi - 1
    span = t[hi] - t[lo]
    return y[lo] if span <= 0 else y[lo] + (y[hi] - y[lo]) * (at - t[lo]) / span


def _run_end(s: IoSampler, reported: float) -> tuple[float, float] | None:
    """When fio's jobs ended, bracketed by samples: ``(early, late)`` monotonic s -- from the last interval with
    half the recent peak (:data:`PEAK_INTERVALS`) to the end of the last one with more I/O than others did
    (:data:`OTHERS_BEFORE_REPORT_S`), which holds fio's last I/O; ``None`` when there is none such."""
    t, ios = s.t_s, s.ios
    if reported - OTHERS_BEFORE_REPORT_S <= t[0] or reported >= t[-1]:
        return None
    others = (_interp(t, ios, reported) - _interp(t, ios, reported - OTHERS_BEFORE_REPORT_S)) / OTHERS_BEFORE_REPORT_S
    last = None
    for k in range(1, len(t)):
        if t[k - 1] >= reported - OTHERS_BEFORE_REPORT_S:
            break
        base = others * (t[k] - t[k - 1])
        if ios[k] - ios[k - 1] >= base + 3 * math.sqrt(base) + 1:
            last = k
    if last is None:
        return None
    # jobs end one after another: back to the last interval with half the recent peak, when all still ran
    peak = max(ios[k] - ios[k - 1] for k in range(max(1, last - PEAK_INTERVALS), last + 1))
    first = max(k for k in range(max(1, last - PEAK_INTERVALS), last + 1) if ios[k] - ios[k - 1] >= peak / 2)
    return t[first - 1], t[last]


def _cpu_wait(s: IoSampler, since: float, until: float) -> float:
    """The sampler's longest wait for a CPU beyond its period between ``since`` and ``until`` (monotonic s): its
    intervals there were :data:`DENSE_S` apart when a CPU was free; more is the time the host kept it waiting,
    and as long a wait can hold fio's job between its last I/O and its end of ``runtime``."""
    t = s.t_s
    lo, hi = max(bisect.bisect_left(t, since), 1), bisect.bisect_right(t, until)
    return max((t[k] - t[k - 1] - DENSE_S for k in range(lo, hi)), default=0.0) if hi > lo else 0.0


def ramp_io_record(sampler: IoSampler, window: tuple[float, float] | None, fio_io: tuple[tuple[int, int], ...],
                   device: tuple[str, Path]) -> tuple[dict[str, Any] | None, str | None]:
    """Others' I/O on the device in a ramped run's measured window (:func:`run_io_record` from the ramp's end).

    The window ended when fio's I/O stopped: in the last sample interval, before fio's ``timestamp_ms``, with
    clearly more I/O than others did just before that report (:data:`OTHERS_BEFORE_REPORT_S`), or, with several
    jobs that end a few ms apart, back to where the device still did half its recent peak (:func:`_run_end`).
    It began ``runtime`` (rounded up to the ms by fio) before that. The device's counters at that start are interpolated
    between the samples around it; the samples before and after the bracket bound the reading, and their distance
    from it is the record's ``tolerance_ios`` and ``tolerance_bytes``.

    Parameters
    ----------
    sampler : IoSampler
        Stopped, with the reading at fio's exit as its last sample.
    window : (float, float) or None
        fio's ``(reported_s, runtime_s)`` (:attr:`storagebench._runfio.FioRun.window`).
    fio_io : tuple of (int, int)
        fio's ``(total_ios, io_bytes)`` per data direction.
    device : (str, Path)
        Device name and stat path.

    Returns
    -------
    (dict or None, str or None)
        The ``during_run`` record of :func:`run_io_record` (with ``ramp_end_s``: the ramp's end, s after
        sampling began, and ``window_s`` from there to fio's exit), or ``None`` and why the ramp's end could
        not be placed.
    """
    if window is None:
        return None, "fio's output gives no timestamp_ms or runtime: the ramp's end cannot be placed"
    t = sampler.t_s
    if len(t) < 3:
        return None, f"the device's counters could not be sampled during the run ({sampler.stat_path})"
    reported, runtime = window[0] - sampler.wall_offset + 0.001, window[1]
    end = _run_end(sampler, reported)
    if end is None:
        return None, "fio's I/O is not seen on the device's samples: the ramp's end cannot be placed"
    # fio's window ends when its job sees the runtime is over, which on a busy host comes later than its last I/O
    # by the job's wait for a CPU: the late side of the bracket takes the sampler's own longest wait there
    early, late = end[0] - runtime, end[1] - runtime + 0.001 + _cpu_wait(sampler, end[0], reported)
    if early <= t[0] or late >= t[-1]:
        return None, "the samples do not bracket the ramp's end (fio started before the watch, or ran no ramp)"
    start = (early + late) / 2
    before = {"t_s": start, "ios": _interp(t, sampler.ios, start), "sectors": _interp(t, sampler.sectors, start)}
    lo, hi = bisect.bisect_right(t, early) - 1, bisect.bisect_left(t, late)
    tol = (round(max(sampler.ios[hi] - before["ios"], before["ios"] - sampler.ios[lo])),
           round(max(sampler.sectors[hi] - before["sectors"], before["sectors"] - sampler.sectors[lo])) * 512)
    last = {"t_s": t[-1], "ios": sampler.ios[-1], "sectors": sampler.sectors[-1]}
    rec = run_io_record(before, last, fio_io, device, tol)
    rec["ramp_end_s"] = round(start - t[0], 4)
    return rec, None
