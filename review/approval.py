"""The approval gate: from a task's ratings (and the round's agreement) to its status. Pure.

A task is approved when it has at least `k_min` human ratings, the median overall verdict
is accept, the median of every gating dimension meets its threshold, no rater raised a
blocking flag, and the round's alpha on every gating dimension reaches `alpha_min`.
Otherwise it is pending (too few ratings, or agreement not yet reached), needs revision,
rejected, or waiting for adjudication (experts disagree on any dimension, their verdicts
conflict, or one raised a blocking flag). A lead's adjudication decides.
"""

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

    @classmethod
    def from_dict(
        cls, data: dict | None, *, required: tuple[str, ...], blocking: tuple[str, ...]
    ) -> "GateConfig":
        data = dict(data or {})
        data.setdefault("gating_dimensions", required)
        data.setdefault("blocking_flags", blocking)
        data["gating_dimensions"] = tuple(data["gating_dimensions"])
        data["blocking_flags"] = tuple(data["blocking_flags"])
        return cls(**data)


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
) -> Decision:
    """The status of one task under `config`; `round_alpha`: dimension -> alpha (None when
    undefined); `adjudication`: a lead's verdict, which decides when present.

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
    n = len(ratings.verdicts)
    if n < config.k_min:
        return Decision("pending", [f"{n} of {config.k_min} ratings"])
    blocking = sorted(
        {flag for flags in ratings.flags for flag in flags if flag in config.blocking_flags}
    )
    verdict_ranks = [VERDICT_ORDER[v] for v in ratings.verdicts if v in VERDICT_ORDER]
    spread = [
        d
        for d in sorted(ratings.scores)
        if len(ratings.scores[d]) >= 2 and _span(ratings.scores[d]) >= config.disagreement_range
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
    weak = []
    for d in config.gating_dimensions:
        value = round_alpha.get(d)
        if value is None:
            weak.append(f"alpha of {d} is undefined")
        elif value < config.alpha_min:
            weak.append(f"alpha of {d} is {value:.3f}, below {config.alpha_min:.3f}")
    if weak:
        return Decision("pending", weak)
    return Decision("approved", ["all criteria met"])


def _span(values: list[float]) -> float:
    """max - min (the gate runs once per task of a round: plain Python beats NumPy here)."""
    return max(values) - min(values)
