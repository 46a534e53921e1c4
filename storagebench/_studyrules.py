"""What a loaded study answers beyond its fields: the design and ``clients`` checks, the hosts of a point,
run counts and limits, the spec hash, the quick name and the plan (the base of
:class:`storagebench._study.Study`, which re-exports the constants here).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from typing import Any, Optional

from ._plan import RunPlan, RunPoint, build_plan, canonical_json
from ._specvalues import (
    key_text,
    level_label,
)
from .errors import StudyError, shown
from .fio.options import KNOWN_OPTIONS, close_options

#: The factor that sets how many of the study's ``hosts`` run each point (``hosts[:clients]``).
CLIENTS_FACTOR = "clients"


#: Most runs a plan may have unless the caller raises it (``load_study(..., max_runs=N)``,
#: ``Study.expand(max_runs=N)``, ``storagebench run --max-runs N``): 100,000 runs of 1 s are
#: more than a day of fio; a typo such as ``iodepth: [1, 2, ..., 1000000]`` is caught here.
DEFAULT_MAX_RUNS = 100_000


#: Design keys left out of :attr:`Study.spec_hash` and ``study.yaml`` while at their defaults, so
#: that every spec written before they existed keeps its hash (and its results resume).
_DESIGN_DEFAULTS: dict[str, Any] = {"setups": 1, "setup_factors": [], "blocks": False, "concurrent": [],
                                    "host_steps": [], "labels": [], "throttle": {}, "precision": None}


#: Columns the plan itself adds to every run (``point.json``, the ``runs`` table): not factor names.
DESIGN_COLUMNS: tuple[str, ...] = ("setup", "block")
#: Keys never in :attr:`Study.spec_hash`: they do not change the runs of the study.
_NOT_HASHED = ("description", "timeout", "test_factors", "test_settings", "labels")

#: Factor names with a meaning to the runner that are not fio options: ``target`` picks the file or device,
#: ``clients`` the fio servers.
_RUNNER_FACTORS = ("target", CLIENTS_FACTOR)


def _count_text(n: int) -> str:
    """``n`` with thousands separators, or ``about 10^k`` beyond 10**30 (never a 4300-digit conversion)."""
    if n < 10**30:
        return f"{n:,}"
    return f"about 10^{int(n.bit_length() * math.log10(2))}"


class StudyRules:
    """The rules and derived values of a :class:`~storagebench._study.Study` that read its fields: a base of the
    model (it holds no fields and no validators of its own; ``Study._grid_ok`` calls the design checks)."""

    def _design_ok(self) -> None:
        """``setup_factors``, ``concurrent`` and ``test_factors`` name factors and levels of this study."""
        for factor in self.factors:
            if factor in DESIGN_COLUMNS:
                raise ValueError(f"factors.{factor}: {factor!r} is a column the plan adds to every run (the "
                                 f"set-up and block of the design, {list(DESIGN_COLUMNS)}); name the factor otherwise")
        for key in ("setup_factors", "concurrent"):
            for name in getattr(self, key):
                if name not in self.factors:
                    raise ValueError(f"{key}: {shown(name)} is not a factor of this study; must be one of "
                                     f"{list(self.factors)}")
        both = sorted(set(self.setup_factors) & set(self.concurrent))
        if both:
            raise ValueError(f"concurrent: {both} also in setup_factors; levels with testbeds of their own cannot "
                             "run at the same time on one build")
        for factor, keep in self.test_factors.items():
            where = f"test_factors.{key_text(factor)}"
            if factor not in self.factors:
                raise ValueError(f"{where}: not a factor of this study; must be one of {list(self.factors)}")
            labels = [level_label(lv) for lv in self.factors[factor]]
            if not isinstance(keep, list) or not keep:
                raise ValueError(f"{where}: must be a non-empty list of level names, got {shown(keep)}")
            for name in keep:
                if name not in labels or isinstance(name, bool) != any(isinstance(x, bool) for x in labels):
                    raise ValueError(f"{where}: {shown(name)} is not a level of factors.{factor}; must be one of "
                                     f"{shown(labels)}")
            dupes = sorted(shown(x, 40) for x, n in Counter(map(str, keep)).items() if n > 1)
            if dupes:
                raise ValueError(f"{where}: levels must be distinct, got {', '.join(dupes)} more than once")
        if self.test_factors or self.test_settings:
            try:
                self.test_variant()
            except StudyError as exc:
                raise ValueError(f"the quick variant (test_factors, test_settings): {exc}") from None

    def _declared_ok(self, *, stored: bool = False) -> None:
        """Every factor is a fio option, ``target``, ``clients``, or a study factor its spec declares.

        A study factor (a label recorded with each run, never passed to fio) is declared by its form
        (every level a mapping ``{name: ..., <fio options>}``), by ``labels``, or by naming it in
        ``setup_factors`` or ``concurrent``. Anything else is refused: a misspelt option
        (``iodpeth: [1, 32]``) would otherwise run every point at fio's default and store the
        misspelling as a label. ``stored`` (a spec a results tree holds, :func:`load_study` with
        ``stored=True``) accepts the undeclared labels of specs written before this rule: their runs
        are already measured.
        """
        for name in self.labels:
            if name not in self.factors:
                raise ValueError(f"labels: {shown(name)} is not a factor of this study; must be one of "
                                 f"{list(self.factors)}")
            if name in KNOWN_OPTIONS or name in _RUNNER_FACTORS:
                raise ValueError(f"labels: {shown(name)} is a fio option or a factor the runner interprets, "
                                 "not a label; remove it from labels")
        if stored:
            return
        declared = set(self.labels) | set(self.setup_factors) | set(self.concurrent)
        for factor, levels in self.factors.items():
            if factor in KNOWN_OPTIONS or factor in _RUNNER_FACTORS or factor in declared:
                continue
            if levels and all(isinstance(lv, dict) for lv in levels):
                continue
            close = close_options(factor)
            hint = f" Did you mean the fio option {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"factors.{factor}: not a fio option, and not declared as a study factor, so it would "
                f"be stored as a label and change nothing fio does.{hint} A factor must be a fio option "
                f"(iodepth, bs, rw, numjobs, ...), target, clients, a factor whose levels are mappings "
                f"{{name: ..., <fio options>}}, or a study factor declared in labels: [{factor}] "
                f"(or in setup_factors or concurrent)")

    def _clients_ok(self) -> None:
        """The ``clients`` factor: positive int levels, only with ``hosts``, at most len(hosts)."""
        levels = self.factors.get(CLIENTS_FACTOR)
        if levels is None:
            return
        where = f"factors.{CLIENTS_FACTOR}"
        if self.hosts is None:
            raise ValueError(
                f"{where}: runs level n on the first n of the study's hosts, so it needs 'hosts' "
                f"(fio servers host[,port] or a fio host file); got clients={shown(levels)} and no hosts"
            )
        if not isinstance(levels, list) or not levels:
            raise ValueError(f"{where}: must be a non-empty list of levels, got {shown(levels)}")
        bad = [n for n in levels if isinstance(n, bool) or not isinstance(n, int) or n < 1]
        if bad:
            raise ValueError(f"{where}: levels must be positive integers (client counts), got {shown(bad)}")
        if isinstance(self.hosts, list) and max(levels) > len(self.hosts):
            raise ValueError(
                f"{where}: level {max(levels)} needs {max(levels)} hosts, but hosts lists "
                f"{len(self.hosts)} ({self.hosts}); levels must be <= {len(self.hosts)}"
            )

    def hosts_for(self, point: RunPoint, hosts: Optional[list[str]] = None) -> Optional[list[str]]:
        """The fio servers that run ``point``: ``hosts[:clients]``, or all hosts without a ``clients`` factor.

        Parameters
        ----------
        point : RunPoint
        hosts : list of str, optional
            The study's hosts already read (a fio host file's lines); default ``self.hosts``
            when it is a list.

        Returns
        -------
        list of str or None
            ``None`` for a local (not client/server) study.

        Raises
        ------
        StudyError
            The point asks for more clients than there are hosts (possible when ``hosts`` is a
            host file, which is read only at run time).
        """
        if hosts is None:
            hosts = self.hosts if isinstance(self.hosts, list) else None
        if not hosts:
            return hosts
        n = point.factors.get(CLIENTS_FACTOR)
        if n is None:
            return list(hosts)
        if n > len(hosts):
            raise StudyError(
                f"study {self.name}: factors.{CLIENTS_FACTOR}: level {n} needs {n} hosts, but hosts has "
                f"{len(hosts)} ({hosts}); levels must be <= {len(hosts)}"
            )
        return list(hosts[:n])

    @property
    def timeout_s(self) -> float:
        """Per-run wall-clock limit, s: ``timeout`` or runtime + ramp_time + max(120, 50 %).

        A run with fio's steady-state options (``steadystate_duration``) ends at the latest after runtime, earlier
        once steady: the same limit holds (the spec keeps the window and its ramp within runtime,
        :func:`storagebench._specvalues.steadystate_problem`)."""
        if self.timeout is not None:
            return float(self.timeout)
        nominal = self.runtime + self.ramp_time
        return nominal + max(120.0, 0.5 * nominal)

    @property
    def n_runs(self) -> int:
        """Runs in the plan: the product of the factors' level counts times ``repetitions`` times ``setups``.

        Computed without expanding anything, so a 10**20-run grid is counted, not built.
        """
        n = self.plan_repetitions * self.plan_setups
        for levels in self.factors.values():
            n *= len(levels)
        return n

    @property
    def adaptive_setups(self) -> bool:
        """``precision`` with ``setups > 1``: the set-up is the unit the rule counts (``min_repetitions`` to
        ``max_repetitions`` set-ups per arm; the runs per set-up stay ``repetitions``)."""
        return bool(getattr(self, "precision", None)) and self.setups > 1

    @property
    def plan_repetitions(self) -> int:
        """Repetitions per point and set-up in the plan: ``precision.max_repetitions`` with ``precision`` (and one
        set-up), else ``repetitions``."""
        precision = getattr(self, "precision", None)
        return precision["max_repetitions"] if precision and self.setups == 1 else self.repetitions

    @property
    def plan_setups(self) -> int:
        """Set-ups per arm in the plan: ``precision.max_repetitions`` with ``precision`` and ``setups > 1`` (the rule
        counts set-ups), else ``setups``."""
        return self.precision["max_repetitions"] if self.adaptive_setups else self.setups

    def check_max_runs(self, max_runs: int | None = None) -> int:
        """Refuse a plan of more than ``max_runs`` runs, before any run is made.

        Parameters
        ----------
        max_runs : int, optional
            The limit; default the one the study was loaded with (:data:`DEFAULT_MAX_RUNS` unless
            ``load_study(..., max_runs=N)``).

        Returns
        -------
        int
            :attr:`n_runs`.

        Raises
        ------
        StudyError
            More runs than the limit, with the count, e.g. ``"study x: the plan has
            100,000,000,000,000,000,000 runs (20 factors: 10 x 10 x ... levels, x 1 repetition);
            the limit is 100,000 (max_runs) ..."``.
        """
        limit = self._max_runs if max_runs is None else max_runs
        n = self.n_runs
        if n > limit:
            counts = [len(v) for v in self.factors.values()]
            shown_counts = " x ".join(str(c) for c in counts[:8]) + (" x ..." if len(counts) > 8 else "")
            reps = f"{self.plan_repetitions:,} repetition{'s' if self.plan_repetitions != 1 else ''}"
            if self.setups > 1:
                reps += f" x {self.plan_setups:,} set-ups"
            grid = f"{len(counts)} factor{'s' if len(counts) != 1 else ''}: {shown_counts} levels, x {reps}"
            raise StudyError(
                f"study {self.name}: the plan has {_count_text(n)} runs ({grid}); the limit is {limit:,} "
                f"(max_runs): fewer levels or repetitions, or raise it with load_study(..., max_runs=N), "
                f"Study.expand(max_runs=N) or `storagebench run --max-runs N`"
            )
        return n

    @property
    def run_duration_s(self) -> float:
        """Nominal duration of one run, s (runtime + ramp_time): the ETA's unit; the longest a run with fio's
        steady-state options takes (fio stops it earlier once steady)."""
        return float(self.runtime + self.ramp_time)

    def _without_default_design(self, data: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in data.items()
                if not (k in _DESIGN_DEFAULTS and v == _DESIGN_DEFAULTS[k])
                and not (k in ("test_factors", "test_settings") and not v)}

    def spec_dict(self) -> dict[str, Any]:
        """The spec as plain data (what ``study.yaml`` holds; design keys at their defaults left out)."""
        return self._without_default_design(self.model_dump(mode="json", exclude_none=True))

    @property
    def spec_hash(self) -> str:
        """16-hex SHA-256 of the spec, ignoring ``description``, ``timeout``, ``test_factors`` and ``test_settings``.

        Two specs with the same hash produce the same runs; a reworded description, a longer
        timeout or another quick grid does not make a different study. The design keys
        (``setups``, ``setup_factors``, ``blocks``, ``concurrent``) and ``host_steps`` count only
        when they differ from their defaults, so specs written before they existed keep their
        hash. ``host_steps`` count because they change what a run measures (a cold page cache,
        another I/O scheduler): results with and without them are not one study.
        """
        data = self._without_default_design(self.model_dump(mode="json", exclude=set(_NOT_HASHED)))
        return hashlib.sha256(canonical_json(data)).hexdigest()[:16]

    @property
    def quick_name(self) -> str:
        """Name of the quick variant: ``<name>-quick``."""
        return f"{self.name}-quick"

    # -- expansion ------------------------------------------------------------------------
    def expand(self, *, max_runs: int | None = None) -> RunPlan:
        """The full factorial grid × repetitions × set-ups, in a seeded random run order.

        ``run_id`` is the first 12 hex digits of the SHA-256 of the canonical JSON of
        (study name, every fio option the run gets except ``filename``, the factor levels,
        the repetition, and the set-up when ``setups > 1``): the same on every machine and in
        every process, so a rerun finds the runs already done.

        The order is built from seeded hashes, so it depends on nothing but the seed and the runs:

        * the plan is cut into set-up units (:class:`SetUpUnit`: one per set-up and level
          combination of ``setup_factors``), each run on one build of its testbed, one unit
          after the other, in the order of SHA-256 of (seed, unit); with ``blocks`` and
          ``setups > 1``, block ``b`` holds the ``b``-th set-up of every arm, shuffled within;
        * within a unit, the concurrency groups (one point each without ``concurrent``) follow in
          the order of SHA-256 of (seed, first run id of the group); with ``blocks``, repetition
          ``r`` comes before ``r + 1``;
        * the members of a group are adjacent, in the order of the factors' levels.

        Without ``setups``, ``blocks`` and ``concurrent`` this is the order of earlier versions:
        runs sorted by SHA-256 of (seed, run_id).

        Parameters
        ----------
        max_runs : int, optional
            Refuse a plan of more runs than this, before expanding anything; default the limit the
            study was loaded with (:data:`DEFAULT_MAX_RUNS` unless ``load_study(..., max_runs=N)``).

        Returns
        -------
        RunPlan
            Points in run order.

        Raises
        ------
        StudyError
            More runs than ``max_runs`` (:meth:`check_max_runs`).
        """
        self.check_max_runs(max_runs)
        return build_plan(self)
