"""Linear models of a factorial study: OLS + ANOVA with interactions, and mixed models for repeated measures."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
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
        Fixed effects: ``term, estimate, std_err, ci_low, ci_high, p``.
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
        ``"residual"``. ``params`` holds Wald z tests and normal CIs of the fixed effects.

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
    Fixed effects are tested with Wald z (normal reference, no denominator df): liberal when there are
    few groups, where a Kenward-Roger or Satterthwaite df (lmerTest) would widen the CI; ``method``
    says so. Convergence warnings are kept in ``note`` and ``converged``: a model that did not converge
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
    fe = res.fe_params.index
    ci = res.conf_int(alpha=1 - confidence).loc[fe]
    params = pd.DataFrame({"term": fe, "estimate": res.fe_params.to_numpy(), "std_err": res.bse_fe.to_numpy(),
                           "ci_low": ci.iloc[:, 0].to_numpy(), "ci_high": ci.iloc[:, 1].to_numpy(),
                           "p": res.pvalues.loc[fe].to_numpy()})
    comps = ([(f"{groups} (random intercept)", float(np.asarray(res.cov_re)[0, 0]))] if res.cov_re.size else [])
    if vc:
        comps += [(name, float(v)) for name, v in zip(model.exog_vc.names, res.vcomp, strict=True)]
    comps.append(("residual", float(res.scale)))
    return MixedModel(formula=formula, groups=groups, vc=dict(vc) if vc else None, n=int(res.nobs), n_groups=ng,
                      converged=bool(res.converged), confidence=confidence, params=params,
                      variance=pd.DataFrame(comps, columns=["component", "variance"]),
                      method=(f"linear mixed model, {'REML' if reml else 'ML'} (statsmodels MixedLM), random "
                              f"intercept of {groups} (re_formula={re_formula!r})"
                              + (f" and variance components {sorted(vc)} within it" if vc else "")
                              + "; fixed effects by Wald z tests with normal CIs (no denominator df: liberal "
                              f"with {ng} groups)"),
                      note="; ".join(msgs), result=res)
