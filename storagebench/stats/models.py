"""Linear models of a factorial study: OLS + ANOVA with interactions, and mixed models for repeated measures."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats as st
from statsmodels.stats.anova import anova_lm

from ..errors import StatsError
from ..findings import CONFIDENCE
from ._common import check_confidence


def _params_frame(res, confidence: float) -> pd.DataFrame:
    ci = res.conf_int(alpha=1 - confidence)
    out = pd.DataFrame({"term": res.params.index, "estimate": res.params.to_numpy(), "std_err": res.bse.to_numpy(),
                        "ci_low": ci.iloc[:, 0].to_numpy(), "ci_high": ci.iloc[:, 1].to_numpy(),
                        "p": res.pvalues.to_numpy()})
    return out.reset_index(drop=True)


def _check_formula(df: pd.DataFrame, formula: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise StatsError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    if not isinstance(formula, str) or "~" not in formula:
        raise StatsError(f"formula must be a patsy formula such as 'np.log(iops) ~ C(rw) * C(bs_bytes)', got {formula!r}")


@dataclass(frozen=True, eq=False)
class Model:
    """An OLS fit with its type-II ANOVA table (:func:`fit_model`).

    Attributes
    ----------
    formula : str
    n : int
        Rows used (rows with NaN in a used column are dropped by patsy and counted in ``n_dropped``).
    n_dropped : int
    r2, r2_adj : float
    confidence : float
    params : pandas.DataFrame
        ``term, estimate, std_err, ci_low, ci_high, p``.
    anova : pandas.DataFrame
        ``term, sum_sq, df, F, p, eta_sq_partial``; the residual row has NaN F and p.
    method : str
    result : statsmodels RegressionResults
        The fitted statsmodels object, for diagnostics.
    """

    formula: str
    n: int
    n_dropped: int
    r2: float
    r2_adj: float
    confidence: float
    params: pd.DataFrame
    anova: pd.DataFrame
    method: str
    result: object


def fit_model(df: pd.DataFrame, formula: str, *, confidence: float = CONFIDENCE, anova_type: int = 2) -> Model:
    """Fit an OLS model with the statsmodels formula API and its ANOVA table.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run (e.g. a ``runs`` table of one direction).
    formula : str
        Patsy formula, e.g. ``"np.log(iops) ~ C(stripe_width) * C(rw)"`` (``*`` adds the interaction).
        Model throughput on the log scale so that effects are ratios.
    confidence : float
        Level of the coefficient CIs.
    anova_type : {1, 2, 3}
        Sum-of-squares type of ``statsmodels.stats.anova.anova_lm`` (default 2: each main effect adjusted
        for the others, interactions after their main effects; Langsrud 2003).

    Returns
    -------
    Model

    Raises
    ------
    StatsError
        Bad formula or unknown column (patsy's message is kept), fewer rows than parameters + 1 (no residual
        degrees of freedom), bad ``confidence`` or ``anova_type``.

    Notes
    -----
    Ordinary least squares (``statsmodels.formula.api.ols``); ANOVA by ``anova_lm(typ=anova_type)``;
    partial eta squared = SS_effect / (SS_effect + SS_residual) (Cohen 1973).
    """
    _check_formula(df, formula)
    confidence = check_confidence(confidence)
    if anova_type not in (1, 2, 3):
        raise StatsError(f"anova_type must be one of [1, 2, 3], got {anova_type!r}")
    try:
        res = smf.ols(formula, data=df).fit()
    except Exception as exc:  # patsy raises PatsyError, NameError, ValueError ... for a bad formula
        raise StatsError(f"cannot fit formula {formula!r}: {exc}") from exc
    n = int(res.nobs)
    if res.df_resid < 1:
        raise StatsError(f"formula {formula!r} has {len(res.params)} parameters for {n} rows: no residual degrees "
                         "of freedom; add repetitions or drop the interaction")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = anova_lm(res, typ=anova_type)
    a = a.rename(columns={"PR(>F)": "p"}).reset_index().rename(columns={"index": "term"})
    ss_res = float(a.loc[a["term"] == "Residual", "sum_sq"].iloc[0])
    a["eta_sq_partial"] = np.where(a["term"] == "Residual", np.nan, a["sum_sq"] / (a["sum_sq"] + ss_res))
    return Model(formula=formula, n=n, n_dropped=int(len(df) - n), r2=float(res.rsquared),
                 r2_adj=float(res.rsquared_adj), confidence=confidence, params=_params_frame(res, confidence),
                 anova=a[["term", "sum_sq", "df", "F", "p", "eta_sq_partial"]],
                 method=f"OLS (statsmodels formula API) with type-{anova_type} ANOVA (anova_lm)", result=res)


#: How :func:`fit_mixed` finds the denominator df, for its method text.
_CONTAIN_WORDS = ("between-within containment rule of Pinheiro & Bates 2000, sec. 2.4.2, as SAS DDFM=CONTAIN in "
                  "nested designs: a term constant within the units of a grouping level gets units at that level "
                  "- units one level up - terms estimated there; equal to Satterthwaite and Kenward-Roger in "
                  "balanced nested designs, an approximation otherwise; statsmodels has neither")


def _level_units(model) -> list[np.ndarray]:
    """Per grouping level, outermost first, a unit code per row of ``model``: the ``groups``, then each variance
    component (a VM within its host), ordered by its number of units (nested components assumed)."""
    n = len(model.endog)
    outer = np.empty(n, dtype=np.int64)
    for gi, g in enumerate(model.group_labels):
        outer[model.row_indices[g]] = gi
    levels = [outer]
    for mats in model.exog_vc.mats if model.exog_vc is not None else []:
        unit = np.full(n, -1, dtype=np.int64)
        for gi, g in enumerate(model.group_labels):
            m = np.asarray(mats[gi])
            if m.size:  # a row's unit: its group and the component's column that is 1 in it
                unit[model.row_indices[g]] = gi * (m.shape[1] + 1) + np.argmax(m != 0, axis=1) + 1
        levels.append(pd.factorize(unit)[0])
    return sorted(levels, key=lambda u: len(np.unique(u)))


def containment_df(model) -> np.ndarray:
    """Denominator df of each fixed effect of a statsmodels ``MixedLM`` by the between-within containment rule.

    Parameters
    ----------
    model : statsmodels MixedLM
        The (fitted or unfitted) model; its fixed design ``exog``, groups and variance components are used.

    Returns
    -------
    numpy.ndarray of int
        One df per column of ``exog``: a column is placed at the outermost grouping level within whose units it
        is constant (a column that varies within the innermost units, at the level of the rows; a column with a
        random slope, at the level of ``groups``); the df of level ``i`` is ``m_i - m_(i-1) - p_i``, with
        ``m_i`` the units at level ``i`` (``m_0 = 0``, rows last) and ``p_i`` the columns placed there
        (the intercept included).

    Notes
    -----
    Pinheiro & Bates (2000), *Mixed-Effects Models in S and S-PLUS*, sec. 2.4.2 (nlme's rule, here with the
    intercept at the outermost level, as lmerTest's Satterthwaite df for it), which is SAS PROC MIXED's
    DDFM=CONTAIN / BW in nested designs. In balanced nested designs it equals the Satterthwaite and
    Kenward-Roger df (6 hosts, a host-level factor of 2 levels: 4 df).
    """
    x = np.asarray(model.exog, dtype=float)
    units = _level_units(model)
    counts = [len(np.unique(u)) for u in units] + [x.shape[0]]
    slopes = set(getattr(model.data, "exog_re_names", []) or []) & set(model.exog_names) - {"Intercept"}
    place = []
    for j, name in enumerate(model.exog_names):
        col = x[:, j]
        lev = len(units)  # varies within the innermost units: the rows' level
        for i, u in enumerate(units):
            if np.all(pd.Series(col).groupby(u).nunique().to_numpy() <= 1):
                lev = i
                break
        place.append(0 if name in slopes else lev)
    place = np.asarray(place)
    per = np.bincount(place, minlength=len(counts))
    return np.array([counts[i] - (counts[i - 1] if i else 0) - per[i] for i in place], dtype=int)


def _contained_params(model, res, confidence: float) -> tuple[pd.DataFrame, np.ndarray]:
    """Fixed effects with t CIs and p on :func:`containment_df` (NaN where a term has no df left)."""
    fe = res.fe_params.index
    dfs = containment_df(model)
    est, se = res.fe_params.to_numpy(), np.asarray(res.bse_fe, dtype=float)
    ok = dfs >= 1
    t = np.where(ok, st.t.ppf(0.5 + confidence / 2, np.where(ok, dfs, 1)), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(ok, 2 * st.t.sf(np.abs(est / se), np.where(ok, dfs, 1)), np.nan)
    params = pd.DataFrame({"term": fe, "estimate": est, "std_err": se, "df": dfs, "ci_low": est - t * se,
                           "ci_high": est + t * se, "p": p})
    return params, dfs


@dataclass(frozen=True, eq=False)
class MixedModel:
    """A linear mixed model fit (:func:`fit_mixed`).

    Attributes
    ----------
    formula, groups : str
    vc : dict or None
        Variance-component formulas nested in ``groups``.
    n, n_groups : int
    converged : bool
    confidence : float
    params : pandas.DataFrame
        Fixed effects: ``term, estimate, std_err, df, ci_low, ci_high, p`` (t on the containment ``df`` of
        :func:`containment_df`; NaN CI and p where a term has no df left).
    variance : pandas.DataFrame
        ``component, variance``: the group (random intercept) variance, each ``vc`` component, and the
        residual variance.
    method : str
    note : str
        Convergence or boundary warnings from statsmodels, verbatim.
    result : statsmodels MixedLMResults
    """

    formula: str
    groups: str
    vc: dict | None
    n: int
    n_groups: int
    converged: bool
    confidence: float
    params: pd.DataFrame
    variance: pd.DataFrame
    method: str
    note: str
    result: object


def fit_mixed(df: pd.DataFrame, formula: str, *, groups: str, vc: dict[str, str] | None = None,
              re_formula: str | None = None, confidence: float = CONFIDENCE, reml: bool = True) -> MixedModel:
    """Fit a linear mixed model (``statsmodels`` ``MixedLM``) for repeated measures.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per run, e.g. runs within VMs within hosts.
    formula : str
        Fixed effects, e.g. ``"np.log(iops) ~ C(stripe_width)"``.
    groups : str
        Column of the outermost grouping (random intercept per group), e.g. ``"host"``.
    vc : dict of str to str, optional
        Variance components nested in ``groups``, e.g. ``{"vm": "0 + C(vm)"}`` for VMs within hosts. The
        random intercept of ``groups`` is fitted as well (statsmodels drops it when ``vc_formula`` is given
        without ``re_formula``; here ``re_formula`` defaults to ``"1"``).
    re_formula : str, optional
        Random-effects formula of ``groups`` (statsmodels ``re_formula``); default ``"1"``, a random
        intercept. ``"0"`` drops it explicitly (then ``vc`` must carry the grouping).
    confidence : float
        Level of the fixed-effect CIs.
    reml : bool
        Restricted maximum likelihood (default) or ML.

    Returns
    -------
    MixedModel
        ``variance`` has one row per component: ``"<groups> (random intercept)"``, each ``vc`` name, and
        ``"residual"``. ``params`` holds t tests and t CIs of the fixed effects on containment df (column
        ``df``, :func:`containment_df`).

    Raises
    ------
    StatsError
        Bad formula, missing ``groups`` column, fewer than 2 groups, fit failure (message kept).

    Notes
    -----
    Lindstrom & Bates (1988) / Laird & Ware (1982) linear mixed model, fitted by
    ``statsmodels.formula.api.mixedlm``; the REML surface of small designs is flat, so the gradient
    optimum is polished with Nelder-Mead and the fit with the higher (restricted) likelihood is kept.
    Checked against lme4 on the Pastes data (Davies & Goldsmith 1972; Bates, *lme4: Mixed-effects
    modeling with R*, ch. 2): variances cask:batch 8.434, batch 1.657, residual 0.678, intercept 60.053.
    Fixed effects are tested with t on small-sample denominator df by the between-within containment rule
    (:func:`containment_df`; Pinheiro & Bates 2000, sec. 2.4.2; SAS DDFM=CONTAIN), because Python has no
    well-kept Satterthwaite or Kenward-Roger (statsmodels MixedLM gives Wald z, which with 6 hosts covers
    0.87 at a nominal 0.95). In balanced nested designs these df equal lmerTest's Satterthwaite and
    pbkrtest's Kenward-Roger df (gold: ``tests/fixtures/stats/r_mixed_df.R``); in unbalanced ones they are an
    approximation, and the SE is still the REML one (no Kenward-Roger inflation). Convergence warnings are
    kept in ``note`` and ``converged``: a model that did not converge
    is returned, never silently.
    """
    _check_formula(df, formula)
    confidence = check_confidence(confidence)
    if groups not in df.columns:
        raise StatsError(f"groups column {groups!r} is not in df; columns are {list(df.columns)}")
    ng = int(df[groups].nunique())
    if ng < 2:
        raise StatsError(f"groups column {groups!r} has {ng} group(s); a mixed model needs at least 2")
    if re_formula is None:
        re_formula = "1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = smf.mixedlm(formula, data=df, groups=df[groups], vc_formula=vc, re_formula=re_formula)
            res = model.fit(reml=reml)
        except Exception as exc:  # patsy / numpy linalg errors
            raise StatsError(f"cannot fit mixed model {formula!r} groups={groups!r} vc={vc}: {exc}") from exc
        try:  # polish the gradient optimum on a flat (RE)ML surface; keep whichever likelihood is higher
            polished = model.fit(reml=reml, method="nm", start_params=res.params_object, maxiter=5000)
            if polished.converged and polished.llf > res.llf:
                res = polished
        except (np.linalg.LinAlgError, ValueError):  # the polish is optional; the first fit stands
            pass
    msgs = sorted({str(w.message).split("\n")[0] for w in caught})
    params, dfs = _contained_params(model, res, confidence)
    comps = ([(f"{groups} (random intercept)", float(np.asarray(res.cov_re)[0, 0]))] if res.cov_re.size else [])
    if vc:
        comps += [(name, float(v)) for name, v in zip(model.exog_vc.names, res.vcomp, strict=True)]
    comps.append(("residual", float(res.scale)))
    if (dfs < 1).any():
        msgs.append("no denominator df left for " + ", ".join(params.loc[dfs < 1, "term"]) + ": no CI or p")
    return MixedModel(formula=formula, groups=groups, vc=dict(vc) if vc else None, n=int(res.nobs), n_groups=ng,
                      converged=bool(res.converged), confidence=confidence, params=params,
                      variance=pd.DataFrame(comps, columns=["component", "variance"]),
                      method=(f"linear mixed model, {'REML' if reml else 'ML'} (statsmodels MixedLM), random "
                              f"intercept of {groups} (re_formula={re_formula!r})"
                              + (f" and variance components {sorted(vc)} within it" if vc else "")
                              + f"; fixed effects by t tests and t CIs on containment df ({_CONTAIN_WORDS}); df "
                              + ", ".join(f"{t}: {d}" for t, d in zip(params['term'], params['df'], strict=True))),
                      note="; ".join(msgs), result=res)
