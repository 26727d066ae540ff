"""The approval gate: from a task's ratings (and the round's agreement) to its status. Pure.

A task is approved when it has at least `k_min` human ratings, the median overall verdict
is accept, the median of every gating dimension meets its threshold, no rater raised a
blocking flag, and the round's alpha on every gating dimension reaches `alpha_min`.
Otherwise it is pending (too few ratings, or agreement not yet reached), needs revision,
rejected, or waiting for adjudication (experts disagree on any dimension, their verdicts
conflict, or one raised a blocking flag). A lead's adjudication decides. A failed machine
check (structure, reproducibility, verifiability) sends the task back for revision.

In the `audit-100` mode (a rubric with `scoring`) the medians give way to a score: each
weighted dimension earns its weight times the mean credit of its values (Pass 1, Warn 0.5,
Fail and Blocked 0), the task is admitted at `threshold` points or more, and a dimension
that most raters marked Blocked sends it back for revision whatever its score.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

VERDICT_ORDER = {"reject": 0, "revise": 1, "accept": 2}


@dataclass(frozen=True)
class GateConfig:
    k_min: int = 3
    dimension_min: float = 4.0  # median of each gating dimension must reach this
    gating_dimensions: tuple[str, ...] = ()  # empty: every required rubric dimension
    alpha_min: float = 0.667
    disagreement_range: float = 3.0  # a dimension whose ratings span this much needs a lead
    blocking_flags: tuple[str, ...] = ()
    mode: str = "median"  # median | audit-100
    threshold: float = 80.0  # audit-100: the score a task needs to be admitted
    # a release (export) needs each simulator of its tasks inside the log's noise floor, or a
    # lead's waiver (realism.service.release_check); per-task decisions do not change
    realism_required: bool = False
    # audit-100, from the rubric's scoring (not settable per round)
    weights: tuple[tuple[str, float], ...] = ()
    credit: tuple[tuple[float, float], ...] = ()
    blocked_value: float | None = None

    @classmethod
    def from_dict(
        cls,
        data: dict | None,
        *,
        required: tuple[str, ...],
        blocking: tuple[str, ...],
        scoring: dict | None = None,
    ) -> "GateConfig":
        data = dict(data or {})
        data.setdefault("gating_dimensions", required)
        data.setdefault("blocking_flags", blocking)
        data["gating_dimensions"] = tuple(data["gating_dimensions"])
        data["blocking_flags"] = tuple(data["blocking_flags"])
        if scoring:
            data.setdefault("mode", scoring.get("mode", "audit-100"))
            data.setdefault("threshold", float(scoring.get("threshold", 80.0)))
            data["weights"] = tuple((k, float(w)) for k, w in scoring["weights"].items())
            data["credit"] = tuple(
                sorted((float(k), float(c)) for k, c in scoring["credit"].items())
            )
            blocked = scoring.get("blocked")
            data["blocked_value"] = None if blocked is None else float(blocked)
        return cls(**data)


def audit_score(scores: dict[str, list[float]], config: GateConfig) -> float | None:
    """The task's 0-100 score: sum over weighted dimensions of weight x mean credit of its
    values (the mean of the raters' own scores when each rated every dimension); None while
    a weighted dimension has no value.

    >>> cfg = GateConfig(weights=(("a", 50.0), ("b", 50.0)), credit=((1, 0.0), (2, 0.5), (3, 1.0)))
    >>> audit_score({"a": [3, 3], "b": [3, 2]}, cfg)
    87.5
    """
    credit = dict(config.credit)
    total = 0.0
    for dimension, weight in config.weights:
        values = scores.get(dimension) or []
        if not values:
            return None
        total += weight * sum(credit.get(float(v), 0.0) for v in values) / len(values)
    return round(total, 6)


def blocked_dimensions(scores: dict[str, list[float]], config: GateConfig) -> list[str]:
    """Weighted dimensions that more than half of their raters marked Blocked."""
    if config.blocked_value is None:
        return []
    return [
        d
        for d, _ in config.weights
        if (values := scores.get(d))
        and 2 * sum(v == config.blocked_value for v in values) > len(values)
    ]


@dataclass(frozen=True)
class TaskRatings:
    """The current human ratings of one task version."""

    scores: dict[str, list[float]]  # dimension -> one value per rating
    verdicts: list[str]
    flags: list[list[str]]


@dataclass(frozen=True)
class Decision:
    status: str  # approved, pending, needs_revision, rejected, adjudication
    reasons: list[str] = field(default_factory=list)


def decide(
    ratings: TaskRatings,
    config: GateConfig,
    round_alpha: dict[str, float | None],
    adjudication: str | None = None,
    failed_checks: Sequence[str] = (),
) -> Decision:
    """The status of one task under `config`; `round_alpha`: dimension -> alpha (None when
    undefined); `adjudication`: a lead's verdict, which decides when present;
    `failed_checks`: the machine checks the task version failed.

    >>> cfg = GateConfig(k_min=2, gating_dimensions=("realism",), blocking_flags=("unsafe",))
    >>> r = TaskRatings({"realism": [4, 5]}, ["accept", "accept"], [[], []])
    >>> decide(r, cfg, {"realism": 0.8}).status
    'approved'
    >>> decide(r, cfg, {"realism": 0.5}).reasons
    ['alpha of realism is 0.500, below 0.667']
    >>> decide(TaskRatings({"realism": [4]}, ["accept"], [[]]), cfg, {"realism": 0.8}).status
    'pending'
    """
    if adjudication is not None:
        status = {"accept": "approved", "revise": "needs_revision", "reject": "rejected"}[
            adjudication
        ]
        return Decision(status, [f"adjudicated by a lead: {adjudication}"])
    if failed_checks:
        return Decision(
            "needs_revision", [f"machine check failed: {c}" for c in sorted(failed_checks)]
        )
    n = len(ratings.verdicts)
    if n < config.k_min:
        return Decision("pending", [f"{n} of {config.k_min} ratings"])
    blocking = sorted(
        {flag for flags in ratings.flags for flag in flags if flag in config.blocking_flags}
    )
    verdict_ranks = [VERDICT_ORDER[v] for v in ratings.verdicts if v in VERDICT_ORDER]
    scored = {d for d, _ in config.weights} if config.mode == "audit-100" else set()
    spread = [
        d
        for d in sorted(ratings.scores)
        if len(ratings.scores[d]) >= 2
        and _span(ratings.scores[d]) >= config.disagreement_range
        and d not in scored  # audit codes are nominal: their mean credit is the judgement
    ]
    conflicting = bool(verdict_ranks) and max(verdict_ranks) - min(verdict_ranks) == 2
    if spread or conflicting or blocking:
        reasons = [f"ratings of {d} span {_span(ratings.scores[d]):g} points" for d in spread]
        if conflicting:
            reasons.append("verdicts conflict (accept and reject)")
        return Decision("adjudication", reasons + [f"blocking flag: {f}" for f in blocking])
    median_verdict = float(median(verdict_ranks))
    if median_verdict < 1:
        return Decision("rejected", ["median verdict is reject"])
    if config.mode == "audit-100":
        return _audit_decision(ratings, config, round_alpha)
    medians = {d: median(v) for d in config.gating_dimensions if (v := ratings.scores.get(d))}
    low = [
        f"median {d} is {medians[d]:g}, below {config.dimension_min:g}"
        for d in config.gating_dimensions
        if d in medians and medians[d] < config.dimension_min
    ]
    if median_verdict < 2 or low:
        return Decision(
            "needs_revision", (["median verdict is revise"] if median_verdict < 2 else []) + low
        )
    # a gating dimension this task's ratings leave empty (it does not apply to the task)
    # has no say in its decision, its round alpha included
    weak = weak_alphas(config, round_alpha, dimensions=[d for d in medians])
    if weak:
        return Decision("pending", weak)
    return Decision("approved", ["all criteria met"])


def weak_alphas(
    config: GateConfig,
    round_alpha: dict[str, float | None],
    *,
    dimensions: list[str] | None = None,
) -> list[str]:
    """Reasons the round's agreement holds tasks back (on `dimensions`, default every gating
    one); none when alpha_min is -1 (the lowest alpha there is: the lead asks for no
    agreement, undefined alpha included)."""
    if config.alpha_min <= -1:
        return []
    weak = []
    for d in config.gating_dimensions if dimensions is None else dimensions:
        value = round_alpha.get(d)
        if value is None:
            weak.append(f"alpha of {d} is undefined")
        elif value < config.alpha_min:
            weak.append(f"alpha of {d} is {value:.3f}, below {config.alpha_min:.3f}")
    return weak


def weak_dimensions(config: GateConfig, round_alpha: dict[str, float | None]) -> frozenset:
    """The gating dimensions whose round alpha holds back the tasks rated on them: when
    this set changes, every task's decision may change."""
    if config.alpha_min <= -1:
        return frozenset()
    return frozenset(
        d
        for d in config.gating_dimensions
        if (value := round_alpha.get(d)) is None or value < config.alpha_min
    )


def _audit_decision(
    ratings: TaskRatings, config: GateConfig, round_alpha: dict[str, float | None]
) -> Decision:
    score = audit_score(ratings.scores, config)
    if score is None:
        return Decision("pending", ["not every audit criterion is scored yet"])
    blocked = blocked_dimensions(ratings.scores, config)
    if blocked:
        return Decision(
            "needs_revision",
            [f"score {score:g} of 100"] + [f"{d} is blocked for most raters" for d in blocked],
        )
    if score < config.threshold:
        return Decision(
            "needs_revision", [f"score {score:g} of 100, below the threshold {config.threshold:g}"]
        )
    weak = weak_alphas(config, round_alpha)
    if weak:
        return Decision("pending", [f"score {score:g} of 100"] + weak)
    return Decision("approved", [f"score {score:g} of 100, admitted at {config.threshold:g}"])


def _span(values: list[float]) -> float:
    """max - min (the gate runs once per task of a round: plain Python beats NumPy here)."""
    return max(values) - min(values)
