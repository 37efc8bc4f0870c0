"""The diagnosis engine: pure numpy functions over step series that evaluate the registry's declarations.

`diagnose()` builds a run's cards (one context, one preparation of its series; every entry point
asks it: the datasource, the replay, the demo) and `run_status()` condenses them; `build_card()`
is one metric's card; `evaluate_rules()` evaluates `rules.yaml` in batch and `StreamingDiagnosis`
incrementally (the exporter's live rule states).
A series is `(steps, values)`; values may be NaN.
"""

from .bands import (
    AlertState,
    BandState,
    alert_states,
    band_state,
    basis_scale,
    consecutive_violations,
    early_mean,
)
from .card import ZH_WORDS, Card, CardOptions, Evidence, Related, build_card, run_stages
from .coupling import Coupling, couplings, pearson
from .entropy_shape import Drop, EntropyGradient, EntropyShape, classify_entropy, entropy_gradient
from .fingerprint import (
    RewardFingerprint,
    Sentinel,
    length_rising_reward_flat,
    refusal_rising_with_reward,
    reward_fingerprint,
    rm_rising_eval_not,
    shaped_up_raw_down,
)
from .kl_zone import KlZone, kl_zone
from .rules import Observation, RuleContext, RuleResult, evaluate_rule, evaluate_rules, window_stat
from .run_cards import carded_metrics, diagnose, run_status, verdict_cards
from .stats import (
    RunMean,
    Series,
    Summary,
    Trend,
    as_series,
    change_pct,
    cv,
    deviation_pct,
    ema,
    ema_lag_points,
    ema_lag_steps,
    slope_per_1k,
    summarize,
    trend,
)
from .streaming import StreamingDiagnosis

__all__ = [
    "ZH_WORDS",
    "AlertState",
    "BandState",
    "Card",
    "CardOptions",
    "Coupling",
    "Drop",
    "EntropyGradient",
    "EntropyShape",
    "Evidence",
    "KlZone",
    "Observation",
    "Related",
    "RewardFingerprint",
    "RuleContext",
    "RuleResult",
    "RunMean",
    "Sentinel",
    "Series",
    "StreamingDiagnosis",
    "Summary",
    "Trend",
    "alert_states",
    "as_series",
    "band_state",
    "basis_scale",
    "build_card",
    "carded_metrics",
    "change_pct",
    "classify_entropy",
    "consecutive_violations",
    "couplings",
    "cv",
    "deviation_pct",
    "diagnose",
    "early_mean",
    "ema",
    "ema_lag_points",
    "ema_lag_steps",
    "entropy_gradient",
    "evaluate_rule",
    "evaluate_rules",
    "kl_zone",
    "length_rising_reward_flat",
    "pearson",
    "refusal_rising_with_reward",
    "reward_fingerprint",
    "rm_rising_eval_not",
    "run_stages",
    "run_status",
    "shaped_up_raw_down",
    "slope_per_1k",
    "summarize",
    "trend",
    "verdict_cards",
    "window_stat",
]
