"""Delphi rounds (issue 37). Phase 1 is the round's blind rating, as any round's. Moving to the
next phase keeps every expert's answers of the phase (phase 1: their submitted scores, the
unbiased estimate, stored as they were), then checks the stop rule set in advance: every
task's answers on every item within the IQR limit (and Kendall's W at least its minimum, when
set), or the last phase allowed. Until it holds, each expert sees per task and item the panel's
anonymous answers (median, quartiles, every answer, comments under pseudonyms, never who said
what) beside their own, and keeps or changes each answer; a change needs a reason. Every phase
change and revision goes to the ledger. Items that do not converge are left for the lead's
adjudication."""

import threading
from collections import OrderedDict

import numpy as np
import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.ledger.service import append_entry
from itsmreview.review.consensus import queries
from itsmreview.review.gate.agreement import alpha
from itsmreview.review.gate.concordance import (
    column_percentiles,
    interquartile_ranges,
    kendalls_w,
    share_changed,
)
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.models import DelphiRound, RoundStatus
from sqlmodel import Session

STAGES = ("rating", "revising", "closed")
MAX_PHASES = 10
MAX_REASON = 2000


def _delphi(session: Session, round_name: str, *, lock: bool = False):
    review_round = find_round(session, round_name)
    found = queries.delphi_of(session=session, round_id=review_round.id, lock=lock)
    if found is None:
        raise NotFound(
            f"round {review_round.name!r} is not a Delphi round; make it one with "
            f"`itsmreview round delphi {review_round.name!r}`"
        )
    return review_round, found


def start_delphi(
    *,
    session: Session,
    actor: User,
    round_name: str,
    iqr_max: float = 1.0,
    w_min: float | None = None,
    max_phases: int = 3,
) -> DelphiRound:
    """Run an open round as a Delphi round with this stop rule. Leads only. Raises Conflict
    for a closed round or one that is a Delphi round already, InvalidInput for a bad rule."""
    user = require_role(actor, Role.lead)
    if not iqr_max >= 0:
        raise InvalidInput(f"--iqr-max is 0 or more, not {iqr_max}")
    if w_min is not None and not 0 <= w_min <= 1:
        raise InvalidInput(f"--w-min lies between 0 and 1, not {w_min}")
    if not 2 <= max_phases <= MAX_PHASES:
        raise InvalidInput(f"--max-phases lies between 2 and {MAX_PHASES}, not {max_phases}")
    review_round = find_round(session, round_name)
    if review_round.status != RoundStatus.open:
        raise Conflict(f"round {review_round.name!r} is closed")
    if queries.delphi_of(session=session, round_id=review_round.id) is not None:
        raise Conflict(f"round {review_round.name!r} is a Delphi round already")
    delphi = DelphiRound(
        round_id=review_round.id, iqr_max=iqr_max, w_min=w_min, max_phases=max_phases
    )
    session.add(delphi)
    session.flush()
    _record(session, user, review_round.name, "start", _rule(delphi))
    return delphi


def _rule(delphi: DelphiRound) -> dict:
    return {"iqr_max": delphi.iqr_max, "w_min": delphi.w_min, "max_phases": delphi.max_phases}


def _record(session: Session, user: User, name: str, action: str, payload: dict) -> None:
    append_entry(
        session=session,
        artifact_type="delphi",
        artifact_id=name,
        action=action,
        source_kind="expert",
        actor_id=user.id,
        payload=payload,
    )


def _phase_figures(answers: pd.DataFrame, delphi: DelphiRound) -> dict:
    """Per item: alpha, the median and share-within-limit of the per-task IQRs, Kendall's W
    over the experts who answered every task; and the tasks x items not converged."""
    out, open_items = {}, []
    for item, rows in answers.groupby("item", sort=True):
        # experts x tasks; one answer a cell (the table's unique key, per phase)
        matrix = rows.pivot(index="expert_id", columns="task_version_id", values="score")
        values = matrix.to_numpy(dtype=float)
        found = alpha(values, "interval")
        spreads = pd.Series(interquartile_ranges(values), index=matrix.columns)
        complete = matrix.dropna(axis=0, how="any")
        w = None
        if complete.shape[0] >= 2 and complete.shape[1] >= 2:
            value = kendalls_w(complete.to_numpy(dtype=float)).w
            w = None if np.isnan(value) else round(float(value), 6)
        wide = spreads[spreads > delphi.iqr_max]
        open_items += [(int(t), item) for t in wide.index]
        out[item] = {
            "alpha": None if found.value is None else round(found.value, 6),
            "alpha_reason": found.reason,
            "median_iqr": round(float(spreads.median()), 6),
            "within_iqr": round(float((spreads <= delphi.iqr_max).mean()), 6),
            "kendalls_w": w,
            "tasks": int(spreads.size),
        }
    return {"items": out, "not_converged": open_items}


def _stops(figures: dict, delphi: DelphiRound, phase: int) -> tuple[bool, str]:
    if not figures["not_converged"] and (
        delphi.w_min is None
        or all(
            f["kendalls_w"] is not None and f["kendalls_w"] >= delphi.w_min
            for f in figures["items"].values()
        )
    ):
        return True, "every answer within the IQR limit" + (
            f" and Kendall's W at least {delphi.w_min}" if delphi.w_min is not None else ""
        )
    if phase >= delphi.max_phases:
        return True, f"the last phase allowed ({delphi.max_phases})"
    return False, ""


def advance_phase(*, session: Session, actor: User, round_name: str) -> dict:
    """End the current phase: keep its answers, check the stop rule, then close the Delphi
    round or open the next phase for revisions. Leads only. Raises Conflict when the round
    is closed already or another lead moved it meanwhile, InvalidInput when phase 1 has no
    submitted rating yet."""
    user = require_role(actor, Role.lead)
    review_round, delphi = _delphi(session, round_name, lock=True)
    if delphi.stage == "closed":
        raise Conflict(f"the Delphi round {review_round.name!r} is closed")
    phase = delphi.phase
    if phase == 1:
        experts = queries.keep_blind_scores(session=session, round_id=review_round.id)
        if not experts:
            raise InvalidInput(
                f"round {review_round.name!r} has no submitted rating yet: phase 1 is the "
                "experts' blind rating"
            )
        order = np.random.default_rng(review_round.id).permutation(len(experts))
        names = {experts[i]: f"Panelist {n}" for n, i in enumerate(order, start=1)}
        queries.add_pseudonyms(session=session, round_id=review_round.id, names=names)
    else:
        queries.carry_forward(session=session, round_id=review_round.id, phase=phase)
    answers = queries.answer_scores(session=session, round_id=review_round.id, phase=phase)
    figures = _phase_figures(answers, delphi)
    stop, why = _stops(figures, delphi, phase)
    to_phase, to_stage = (phase, "closed") if stop else (phase + 1, "revising")
    if not queries.move_phase(
        session=session,
        round_id=review_round.id,
        phase=phase,
        stage=delphi.stage,
        to_phase=to_phase,
        to_stage=to_stage,
    ):
        raise Conflict(f"another lead moved the Delphi round {review_round.name!r} meanwhile")
    result = {
        "round": review_round.name,
        "ended_phase": phase,
        "phase": to_phase,
        "stage": to_stage,
        "stopped_because": why or None,
        "not_converged": len(figures["not_converged"]),
    }
    _record(session, user, review_round.name, "phase", result)
    return result


_PANELS: OrderedDict[tuple, dict] = OrderedDict()
_PANELS_LOCK = threading.Lock()  # a server's sessions are threads of one process
PANELS_KEPT = 8


def _panel(session: Session, round_id: int, delphi: DelphiRound) -> dict:
    """The panel's answers of the phase before the current revision phase, summed up per task
    and item (median, quartiles, every answer as counts), and the tasks' names. Those answers
    no longer change once the phase is revising (a phase change writes them and moves the
    round on in one transaction), so the summary is computed once per process and phase,
    keyed also on the database and the round's start: a page rerun then reads only the
    expert's own state."""
    phase = delphi.phase - 1
    key = (str(session.get_bind().url), round_id, delphi.started_at, phase)
    with _PANELS_LOCK:
        if key in _PANELS:
            _PANELS.move_to_end(key)
            return _PANELS[key]
    scores = queries.answer_scores(session=session, round_id=round_id, phase=phase)
    counts = scores.groupby(["task_version_id", "item", "score"], sort=True).size()
    answers: dict[tuple, dict] = {}
    for (version_id, item, score), n in counts.items():
        answers.setdefault((int(version_id), item), {})[float(score)] = int(n)
    figures = {}
    for item, rows in scores.groupby("item", sort=True):
        matrix = rows.pivot(index="expert_id", columns="task_version_id", values="score")
        # numpy's percentiles of each task's answers, as `interquartile_range`
        quartiles = column_percentiles(matrix.to_numpy(dtype=float), [25, 50, 75])
        for version_id, (q1, median, q3) in zip(matrix.columns, quartiles.T, strict=True):
            figures[(int(version_id), item)] = {
                "median": float(median),
                "q1": float(q1),
                "q3": float(q3),
                "iqr": float(q3 - q1),
                "answers": answers[(int(version_id), item)],
            }
    by_expert: dict[int, dict[int, list]] = {}  # expert -> task -> [(item, score)], sorted
    ordered = scores.sort_values(["expert_id", "task_version_id", "item"])
    for expert_id, version_id, item, score in zip(
        ordered["expert_id"].tolist(),
        ordered["task_version_id"].tolist(),
        ordered["item"].tolist(),
        ordered["score"].tolist(),
        strict=True,
    ):
        by_expert.setdefault(expert_id, {}).setdefault(version_id, []).append((item, score))
    ids = sorted({int(v) for v in scores["task_version_id"].unique()})
    found = {
        "by_expert": by_expert,
        "figures": figures,
        "tasks": queries.task_names(session=session, ids=ids),
    }
    with _PANELS_LOCK:
        _PANELS[key] = found
        while len(_PANELS) > PANELS_KEPT:
            _PANELS.popitem(last=False)
    return found


def reveal(*, session: Session, actor: User, round_name: str) -> dict:
    """What an expert sees in a revision phase: per task they answered, per item, their own
    latest answer and the panel's (median, quartiles, every answer as counts, the comments
    under pseudonyms). Experts only; nothing says which answer is whose."""
    user = require_role(actor, Role.expert)
    review_round, delphi = _delphi(session, round_name)
    if delphi.stage != "revising":
        return {
            "round": review_round.name,
            "phase": delphi.phase,
            "stage": delphi.stage,
            "tasks": [],
        }
    panel = _panel(session, review_round.id, delphi)
    mine = panel["by_expert"].get(user.id, {})
    revised = queries.answered_tasks(
        session=session, round_id=review_round.id, phase=delphi.phase, expert_id=user.id
    )
    names = queries.pseudonyms_of(session=session, round_id=review_round.id)
    said: dict[int, set] = {}
    comments = queries.blind_comments(session=session, round_id=review_round.id)
    for version_id, expert_id, comment in comments.itertuples(index=False):
        said.setdefault(int(version_id), set()).add(
            (names.get(int(expert_id), "Panelist"), comment)
        )
    tasks = []
    figures, titles = panel["figures"], panel["tasks"]
    for version_id, own in mine.items():
        items = {item: {"yours": score, **figures[(version_id, item)]} for item, score in own}
        for found in items.values():
            found["answers"] = dict(found["answers"])  # the caller's own copy
        tasks.append(
            {
                "task_version_id": version_id,
                "task": titles[version_id],
                "items": items,
                "comments": [
                    {"by": by, "comment": c} for by, c in sorted(said.get(version_id, ()))
                ],
                "revised": version_id in revised,
            }
        )
    return {
        "round": review_round.name,
        "phase": delphi.phase,
        "stage": delphi.stage,
        "you_are": names.get(user.id),
        "tasks": tasks,
    }


def revise(
    *,
    session: Session,
    actor: User,
    round_name: str,
    task_version_id: int,
    scores: dict[str, float],
    reasons: dict[str, str] | None = None,
) -> int:
    """An expert's answers of this phase for one task: every item they answered before, kept
    or changed; each change needs a reason. Once per task and phase. Returns how many
    answers changed. Experts only."""
    user = require_role(actor, Role.expert)
    review_round, delphi = _delphi(session, round_name)
    if delphi.stage != "revising":
        raise Conflict(f"the Delphi round {review_round.name!r} is not in a revision phase")
    previous = queries.own_answers(
        session=session,
        round_id=review_round.id,
        task_version_id=task_version_id,
        expert_id=user.id,
        phase=delphi.phase - 1,
    )
    if not previous:
        raise NotFound("you gave no answer on this task in the phase before")
    if queries.revised(
        session=session,
        round_id=review_round.id,
        task_version_id=task_version_id,
        expert_id=user.id,
        phase=delphi.phase,
    ):
        raise Conflict(f"you answered this task in phase {delphi.phase} already")
    reasons = reasons or {}
    missing = sorted(set(previous) - set(scores))
    if missing:
        raise InvalidInput(f"give an answer (kept or changed) on every item: {', '.join(missing)}")
    rows, changed = [], 0
    for item, old in previous.items():
        new = float(scores[item])
        moved = new != old
        reason = (reasons.get(item) or "").strip()
        if moved and not reason:
            raise InvalidInput(f"say why you changed {item} from {old:g} to {new:g}")
        changed += moved
        rows.append(
            {
                "round_id": review_round.id,
                "task_version_id": task_version_id,
                "expert_id": user.id,
                "phase": delphi.phase,
                "item": item,
                "score": new,
                "changed": moved,
                "reason": reason[:MAX_REASON] if moved else "",
            }
        )
    queries.add_answers(session=session, rows=rows)
    _record(
        session,
        user,
        review_round.name,
        "revise",
        {
            "task_version_id": task_version_id,
            "phase": delphi.phase,
            "changed": {
                r["item"]: [previous[r["item"]], r["score"], r["reason"]]
                for r in rows
                if r["changed"]
            },
        },
    )
    return changed


def delphi_report(*, session: Session, actor: User, round_name: str) -> dict:
    """Per phase: the figures of each item (alpha, IQR, Kendall's W), the share of answers
    changed from the phase before, and the tasks x items not converged; the stop rule and
    where the round stands. Leads only."""
    require_role(actor, Role.lead)
    review_round, delphi = _delphi(session, round_name)
    answers = queries.answer_scores(session=session, round_id=review_round.id)
    phases = []
    for phase, rows in answers.groupby("phase", sort=True):
        figures = _phase_figures(rows, delphi)
        entry = {"phase": int(phase), "answers": len(rows), **figures}
        entry["not_converged"] = [
            {"task_version_id": t, "item": i} for t, i in figures["not_converged"]
        ]
        if phase > 1:
            earlier = answers[answers["phase"] == phase - 1]
            change = share_changed(_long(earlier), _long(rows))
            entry["changed_share"] = None if np.isnan(change.share) else round(change.share, 6)
            entry["changed"] = change.changed
        phases.append(entry)
    return {
        "round": review_round.name,
        "mode": "delphi",
        "phase": delphi.phase,
        "stage": delphi.stage,
        "rule": _rule(delphi),
        "phases": phases,
    }


def _long(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item": rows["task_version_id"].astype(str) + "/" + rows["item"],
            "rater": rows["expert_id"],
            "score": rows["score"].astype(float),
        }
    )


def revision_trail(*, session: Session, actor: User, round_name: str) -> list[dict]:
    """Every answer of every phase, with the expert's pseudonym (never the name), whether it
    changed and why: the consensus trail an export carries. Leads only."""
    require_role(actor, Role.lead)
    review_round, _ = _delphi(session, round_name)
    names = queries.pseudonyms_of(session=session, round_id=review_round.id)
    answers = queries.answers_frame(session=session, round_id=review_round.id)
    return [
        {
            "task": r.task,
            "panelist": names.get(int(r.expert_id), "Panelist"),
            "phase": int(r.phase),
            "item": r.item,
            "score": float(r.score),
            "changed": bool(r.changed),
            "reason": r.reason,
        }
        for r in answers.itertuples()
    ]


def rounds_to_revise(*, session: Session, actor: User) -> list[str]:
    """Names of the Delphi rounds in a revision phase in which the expert answered."""
    user = require_role(actor, Role.expert)
    out = []
    for round_id, delphi in queries.delphi_rounds(session=session).items():
        if delphi.stage != "revising":
            continue
        if queries.answered(
            session=session, round_id=round_id, phase=delphi.phase - 1, expert_id=user.id
        ):
            out.append(find_round(session, round_id).name)
    return sorted(out)
