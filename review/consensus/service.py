"""Delphi rounds (issue 37). Phase 1 is the round's blind rating, as any round's; its
submitted ratings are phase 1's answers (the unbiased estimate), frozen once it ends: the
round then takes no rating. Each later phase holds the answers experts gave in it, kept or
changed; an expert who does not revise a task keeps their answers of the phase before, so a
phase's answers are each expert's latest up to it. Ending a phase checks the stop rule set in
advance: every task's answers on every item within the IQR limit (and Kendall's W at least its
minimum, when set), or the last phase allowed. The check counts stored spreads (each task
item's IQR, kept current by the gate's work in phase 1 and by each revision), so a phase
change reads no answer unless a W rule needs them. Until it holds, each expert sees per task
and item the panel's anonymous answers (median, quartiles, every answer, comments under
pseudonyms, never who said what) beside their own, and keeps or changes each answer; a change
needs a reason. Every phase change and revision goes to the ledger. Items that do not converge
are left for the lead's adjudication."""

import threading
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.ledger.service import append_entry
from itsmreview.review.consensus import queries
from itsmreview.review.gate.agreement import alpha
from itsmreview.review.gate.approval import TaskRatings, decide
from itsmreview.review.gate.concordance import (
    column_percentiles,
    interquartile_range,
    interquartile_ranges,
    kendalls_w,
    share_changed,
)
from itsmreview.review.gate.queries import pending as pending_queries
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.queries import spreads as spread_queries
from itsmreview.review.gate.round_data import find_round, task_ratings
from itsmreview.review.gate.service import current_gate, decide_tasks
from itsmreview.review.gate.work import apply_queued_here
from itsmreview.review.models import DelphiRound, RoundStatus
from itsmreview.review.repair.adjudication import record_adjudications
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
    _build_spreads(session, review_round.id, delphi)  # of the ratings in before the start
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


def answers_at(blind: pd.DataFrame, revised: pd.DataFrame, phase: int) -> pd.DataFrame:
    """Each expert's latest answer on each task item up to `phase` (phase 1's answers, then
    each revision phase's in turn): task_version_id, expert_id, phase (= `phase`), item,
    score."""
    later = revised[revised["phase"] <= phase]
    if later.empty:
        return blind[BLIND].assign(phase=phase)
    both = pd.concat([blind[BLIND].assign(phase=1), later[[*BLIND, "phase"]]], ignore_index=True)
    latest = both.sort_values("phase", kind="stable").drop_duplicates(
        ["task_version_id", "expert_id", "item"], keep="last"
    )
    return latest.assign(phase=phase)


BLIND = ["task_version_id", "expert_id", "item", "score"]


def _spreads(answers: pd.DataFrame) -> dict[tuple[int, str], float]:
    """(task version id, item) -> the IQR of its answers."""
    out = {}
    for item, rows in answers.groupby("item", sort=True):
        matrix = rows.pivot(index="expert_id", columns="task_version_id", values="score")
        ranges = interquartile_ranges(matrix.to_numpy(dtype=float))
        out.update({(int(t), item): float(r) for t, r in zip(matrix.columns, ranges, strict=True)})
    return out


def answers_of_phase(session: Session, round_id: int, phase: int):
    """`answers_at` `phase` of the round, read from the database."""
    blind = queries.blind_scores(session=session, round_id=round_id)
    revised = queries.revisions(session=session, round_id=round_id, up_to=phase, scores_only=True)
    return answers_at(blind, revised, phase)


def _build_spreads(session: Session, round_id: int, delphi: DelphiRound) -> None:
    """Every task item's spread from the answers as they stand (a round's start, or a round
    from before migration 0029 at its next phase change or revision)."""
    answers = answers_of_phase(session, round_id, delphi.phase)
    spread_queries.clear_spreads(session=session, round_id=round_id)
    found = _spreads(answers)
    spread_queries.replace_spreads(
        session=session,
        round_id=round_id,
        tasks=sorted({t for t, _ in found}),
        spreads=found,
    )
    queries.mark_spreads_built(session=session, round_id=round_id)
    delphi.spreads_built = True


def refresh_spreads(session: Session, delphi: DelphiRound, tasks: list[int]) -> None:
    """These tasks' spreads as their answers stand in the current phase (after revisions)."""
    if not delphi.spreads_built:
        _build_spreads(session, delphi.round_id, delphi)
        return
    answers = answers_of_phase(session, delphi.round_id, delphi.phase)
    answers = answers[answers["task_version_id"].isin(tasks)]
    spread_queries.replace_spreads(
        session=session, round_id=delphi.round_id, tasks=tasks, spreads=_spreads(answers)
    )


BOOTSTRAP = 1000  # resamples of an alpha's interval, as the ordinary round's agreement


def _alpha_figures(values: np.ndarray) -> dict:
    """Alpha (interval level) of raters x units with its 95% bootstrap interval (seeded)."""
    found = alpha(values, "interval", bootstrap=BOOTSTRAP, seed=0)
    named = (("alpha", found.value), ("ci_low", found.ci_low), ("ci_high", found.ci_high))
    rounded = {
        key: None if value is None or np.isnan(value) else round(value, 6) for key, value in named
    }
    return {**rounded, "alpha_reason": found.reason}


def _phase_figures(answers: pd.DataFrame, delphi: DelphiRound) -> dict:
    """Per item: alpha with its interval, the median and share-within-limit of the per-task
    IQRs, Kendall's W over the experts who answered every task; overall the same over every
    task item at once (alpha and W with each task item a unit); and the tasks x items not
    converged."""
    out, open_items, all_spreads = {}, [], []
    for item, rows in answers.groupby("item", sort=True):
        # experts x tasks; one answer a cell (the table's unique key, per phase)
        matrix = rows.pivot(index="expert_id", columns="task_version_id", values="score")
        values = matrix.to_numpy(dtype=float)
        spreads = pd.Series(interquartile_ranges(values), index=matrix.columns)
        all_spreads.append(spreads.to_numpy())
        wide = spreads[spreads > delphi.iqr_max]
        open_items += [(int(t), item) for t in wide.index]
        out[item] = {
            **_alpha_figures(values),
            "median_iqr": round(float(spreads.median()), 6),
            "within_iqr": round(float((spreads <= delphi.iqr_max).mean()), 6),
            "kendalls_w": _item_w(matrix),
            "tasks": int(spreads.size),
        }
    overall = {}
    if out:
        units = answers.assign(unit=answers["task_version_id"].astype(str) + "/" + answers["item"])
        matrix = units.pivot(index="expert_id", columns="unit", values="score")
        spreads = np.concatenate(all_spreads)
        overall = {
            **_alpha_figures(matrix.to_numpy(dtype=float)),
            "median_iqr": round(float(np.median(spreads)), 6),
            "within_iqr": round(float((spreads <= delphi.iqr_max).mean()), 6),
            "kendalls_w": _item_w(matrix),
            "task_items": int(spreads.size),
        }
    return {"items": out, "overall": overall, "not_converged": open_items}


def _item_w(matrix: pd.DataFrame) -> float | None:
    """Kendall's W of one item (experts x tasks) over the experts who answered every task."""
    complete = matrix.dropna(axis=0, how="any")
    if complete.shape[0] < 2 or complete.shape[1] < 2:
        return None
    value = kendalls_w(complete.to_numpy(dtype=float)).w
    return None if np.isnan(value) else round(float(value), 6)


def _w_holds(session: Session, round_id: int, delphi: DelphiRound) -> bool:
    """Whether every item's Kendall's W over the phase's answers reaches the rule's minimum
    (reads every answer of the phase)."""
    answers = answers_of_phase(session, round_id, delphi.phase)
    for _, rows in answers.groupby("item", sort=True):
        w = _item_w(rows.pivot(index="expert_id", columns="task_version_id", values="score"))
        if w is None or w < delphi.w_min:
            return False
    return True


def _stops(session: Session, round_id: int, delphi: DelphiRound, wide: int) -> tuple[bool, str]:
    if wide == 0 and (delphi.w_min is None or _w_holds(session, round_id, delphi)):
        return True, "every answer within the IQR limit" + (
            f" and Kendall's W at least {delphi.w_min}" if delphi.w_min is not None else ""
        )
    if delphi.phase >= delphi.max_phases:
        return True, f"the last phase allowed ({delphi.max_phases})"
    return False, ""


def advance_phase(*, session: Session, actor: User, round_name: str) -> dict:
    """End the current phase: check the stop rule, then close the Delphi round or open the
    next phase for revisions. Ending phase 1 applies the gate work its ratings still wait
    for, freezes them as phase 1's answers (the round takes no rating after) and gives the
    panel its pseudonyms. Leads only. Raises Conflict when the round is closed already or
    another lead moved it meanwhile, InvalidInput when phase 1 has no submitted rating yet."""
    user = require_role(actor, Role.lead)
    review_round, delphi = _delphi(session, round_name, lock=True)
    if delphi.stage == "closed":
        raise Conflict(f"the Delphi round {review_round.name!r} is closed")
    phase = delphi.phase
    if phase == 1:
        experts = queries.blind_experts(session=session, round_id=review_round.id)
        if not experts:
            raise InvalidInput(
                f"round {review_round.name!r} has no submitted rating yet: phase 1 is the "
                "experts' blind rating"
            )
        if pending_queries.pending_count(session=session, round_id=review_round.id):
            apply_queued_here(session=session, review_round=review_round)  # their spreads
        order = np.random.default_rng(review_round.id).permutation(len(experts))
        names = {experts[i]: f"Panelist {n}" for n, i in enumerate(order, start=1)}
        queries.add_pseudonyms(session=session, round_id=review_round.id, names=names)
    if not delphi.spreads_built:
        _build_spreads(session, review_round.id, delphi)
    wide = spread_queries.wide_count(
        session=session, round_id=review_round.id, iqr_max=delphi.iqr_max
    )
    stop, why = _stops(session, review_round.id, delphi, wide)
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
        "not_converged": wide,
    }
    if stop:
        result["settled"] = _settle(session, user, review_round, delphi)
    _record(session, user, review_round.name, "phase", result)
    return result


def _final_alphas(answers: pd.DataFrame, config, rubric) -> dict[str, float | None]:
    """Alpha of each gating item over the panel's final answers (None: undefined); an item
    without an answer (it applies to none of the tasks) is left out: it holds nothing back."""
    alphas = {}
    for item in config.gating_dimensions:
        rows = answers[answers["item"] == item]
        if rows.empty:
            continue
        matrix = rows.pivot(index="expert_id", columns="task_version_id", values="score")
        alphas[item] = alpha(matrix.to_numpy(dtype=float), rubric.dimension(item).level).value
    return alphas


def consensus_alphas(*, session: Session, round_id: int) -> dict[str, float | None] | None:
    """For a closed Delphi round, each gating item's alpha over the panel's final answers:
    the agreement its close decided on (an export's gate check reads it). None for any other
    round (its ratings' alpha is the one)."""
    delphi = queries.delphi_of(session=session, round_id=round_id)
    if delphi is None or delphi.stage != "closed":
        return None
    config, rubric = current_gate(session=session, round_name=round_id)
    return _final_alphas(answers_of_phase(session, round_id, delphi.phase), config, rubric)


VERDICT_OF_STATUS = {"approved": "accept", "needs_revision": "revise", "rejected": "reject"}


def _settle(session: Session, user: User, review_round, delphi: DelphiRound) -> dict:
    """The consensus decides the round's tasks whose answers converged: the gate's rules
    (k, verdicts from the blind ratings, blocking flags, medians of the gating items, machine
    checks) read the panel's final answers and their alpha, and the closing lead records
    each decision with its reason, as an adjudication. A task with an item beyond the IQR
    limit, or already adjudicated, or that the gate still holds (pending), is left to the
    lead. Returns how many tasks were decided, how many did not converge and how many the
    gate holds (adjudication: conflicting verdicts or a blocking flag; pending)."""
    config, rubric = current_gate(session=session, round_name=review_round.id)
    answers = answers_of_phase(session, review_round.id, delphi.phase)
    wide = spread_queries.wide_tasks(
        session=session, round_id=review_round.id, iqr_max=delphi.iqr_max
    )
    alphas = _final_alphas(answers, config, rubric)
    blind = task_ratings(
        gate_queries.current_ratings_wide(session=session, round_id=review_round.id),
        pd.DataFrame({"rating_id": [], "dimension": [], "value": []}),
    )
    final: dict[int, dict[str, list[float]]] = {}
    for task, item, score in zip(
        answers["task_version_id"].tolist(),
        answers["item"].tolist(),
        answers["score"].tolist(),
        strict=True,
    ):
        final.setdefault(int(task), {}).setdefault(item, []).append(float(score))
    adjudicated = gate_queries.adjudications_of_round(session=session, round_id=review_round.id)
    failed = gate_queries.failed_checks(session=session, round_id=review_round.id)
    rule = replace(config, disagreement_range=float("inf"))  # convergence is the IQR rule
    decisions, wide_left, held = {}, 0, 0
    for task, scores in sorted(final.items()):
        if task in adjudicated:
            continue
        if task in wide:
            wide_left += 1
            continue
        rated = blind.get(task, TaskRatings({}, [], []))
        found = decide(
            TaskRatings(scores, rated.verdicts, rated.flags),
            rule,
            alphas,
            None,
            failed.get(task, ()),
        )
        if found.status not in VERDICT_OF_STATUS:
            held += 1
            continue
        decisions[task] = (
            VERDICT_OF_STATUS[found.status],
            f"Delphi consensus of round {review_round.name!r} after phase {delphi.phase}: "
            + "; ".join(found.reasons),
        )
    if decisions:
        record_adjudications(
            session=session, actor=user, review_round=review_round, decisions=decisions
        )
        # decided by their adjudications now: only these tasks change
        decide_tasks(
            session=session,
            review_round=review_round,
            config=config,
            alphas=alphas,
            counts={},
            tasks=gate_queries.versions(session=session, ids=sorted(decisions)),
            actors=dict.fromkeys(decisions, user.id),
        )
    return {"decided": len(decisions), "not_converged": wide_left, "held_by_the_gate": held}


_PANELS: OrderedDict[tuple, dict] = OrderedDict()
_PANELS_LOCK = threading.Lock()  # a server's sessions are threads of one process
PANELS_KEPT = 8


def _panel(session: Session, round_id: int, delphi: DelphiRound) -> dict:
    """The panel's answers of the phase before the current revision phase, summed up per task
    and item (median, quartiles, every answer as counts), and the tasks' names. Those answers
    no longer change once the phase is revising (a phase change ends them and moves the
    round on in one transaction; phase 1's ratings are frozen), so the summary is computed
    once per process and phase, keyed also on the database and the round's start: a page
    rerun then reads only the expert's own state."""
    phase = delphi.phase - 1
    key = (str(session.get_bind().url), round_id, delphi.started_at, phase)
    with _PANELS_LOCK:
        if key in _PANELS:
            _PANELS.move_to_end(key)
            return _PANELS[key]
    scores = answers_of_phase(session, round_id, phase)
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


def _task_answers(session: Session, round_id: int, task_version_id: int, phase: int) -> dict:
    """(expert id, item) -> (phase, score) of each expert's latest answer on one task up to
    `phase`: a few dozen rows, read in two statements and kept in plain Python."""
    one = {"round_id": round_id, "task_version_id": task_version_id}
    blind = queries.blind_scores(session=session, **one)
    revised = queries.revisions(session=session, up_to=phase, scores_only=True, **one)
    revised = revised.sort_values("phase")
    latest = {
        (e, i): (1, s)
        for e, i, s in zip(blind["expert_id"], blind["item"], blind["score"], strict=True)
    }
    for e, p, i, s in zip(
        revised["expert_id"], revised["phase"], revised["item"], revised["score"], strict=True
    ):
        latest[(e, i)] = (int(p), s)
    return latest


def _task_spreads(task_version_id: int, latest: dict) -> dict[tuple[int, str], float]:
    values: dict[str, list[float]] = {}
    for (_, item), (_, score) in latest.items():
        values.setdefault(item, []).append(float(score))
    return {(task_version_id, item): interquartile_range(v) for item, v in values.items()}


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
    latest = _task_answers(session, review_round.id, task_version_id, delphi.phase)
    mine = {i: (p, s) for (e, i), (p, s) in latest.items() if e == user.id}
    if any(p == delphi.phase for p, _ in mine.values()):
        raise Conflict(f"you answered this task in phase {delphi.phase} already")
    previous = {item: float(score) for item, (_, score) in sorted(mine.items())}
    if not previous:
        raise NotFound("you gave no answer on this task in the phase before")
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
    if delphi.spreads_built:  # the task's spreads with these answers in
        latest.update({(user.id, r["item"]): (delphi.phase, r["score"]) for r in rows})
        spread_queries.replace_spreads(
            session=session,
            round_id=review_round.id,
            tasks=[task_version_id],
            spreads=_task_spreads(task_version_id, latest),
        )
    else:
        _build_spreads(session, review_round.id, delphi)
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


def _ended_phase(delphi: DelphiRound) -> int:
    """The round's last ended phase (0 while phase 1 is rated)."""
    return delphi.phase if delphi.stage == "closed" else delphi.phase - 1


def delphi_report(*, session: Session, actor: User, round_name: str) -> dict:
    """Per phase: the figures of each item (alpha, IQR, Kendall's W), the share of answers
    changed from the phase before, and the tasks x items not converged; the stop rule and
    where the round stands (a phase under way with the answers so far). Leads only."""
    require_role(actor, Role.lead)
    review_round, delphi = _delphi(session, round_name)
    blind = queries.blind_scores(session=session, round_id=review_round.id)
    revised = queries.revisions(session=session, round_id=review_round.id, scores_only=True)
    phases, earlier = [], None
    for phase in range(1, delphi.phase + 1) if not blind.empty else ():
        rows = answers_at(blind, revised, phase)
        figures = _phase_figures(rows, delphi)
        entry = {"phase": phase, "answers": len(rows), **figures}
        entry["not_converged"] = [
            {"task_version_id": t, "item": i} for t, i in figures["not_converged"]
        ]
        if earlier is not None:
            change = share_changed(_long(earlier), _long(rows))
            entry["changed_share"] = None if np.isnan(change.share) else round(change.share, 6)
            entry["changed"] = change.changed
        phases.append(entry)
        earlier = rows
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


KEY = ["task_version_id", "expert_id"]


def revision_trail(*, session: Session, actor: User, round_name: str) -> list[dict]:
    """Every answer of every phase, with the expert's pseudonym (never the name), whether it
    changed and why: the consensus trail an export carries. In an ended phase an expert who
    did not revise a task keeps their answers: listed as kept. Leads only."""
    require_role(actor, Role.lead)
    review_round, delphi = _delphi(session, round_name)
    if delphi.phase == 1 and delphi.stage == "rating":
        return []  # phase 1 is under way: its answers are not the consensus' yet
    names = queries.pseudonyms_of(session=session, round_id=review_round.id)
    blind = queries.blind_scores(session=session, round_id=review_round.id)
    revised = queries.revisions(session=session, round_id=review_round.id)
    kept = {"changed": False, "reason": ""}
    parts = [blind.assign(phase=1, **kept)]
    latest = blind
    for phase in range(2, delphi.phase + 1):
        given = revised[revised["phase"] == phase]
        if phase <= _ended_phase(delphi):
            said = pd.MultiIndex.from_frame(given[KEY])
            carried = latest[~pd.MultiIndex.from_frame(latest[KEY]).isin(said)]
            parts.append(carried.assign(phase=phase, **kept))
        parts.append(given)
        latest = answers_at(latest, given, phase)
    trail = pd.concat(parts, ignore_index=True)
    titles = queries.task_names(
        session=session, ids=sorted({int(v) for v in trail["task_version_id"]})
    )
    trail["task"] = trail["task_version_id"].map(titles)
    trail = trail.sort_values(["phase", "task", "expert_id", "item"], kind="stable")
    return [
        {
            "task": task,
            "panelist": names.get(int(expert), "Panelist"),
            "phase": int(phase),
            "item": item,
            "score": float(score),
            "changed": bool(changed),
            "reason": reason,
        }
        for task, expert, phase, item, score, changed, reason in zip(
            trail["task"],
            trail["expert_id"],
            trail["phase"],
            trail["item"],
            trail["score"],
            trail["changed"],
            trail["reason"],
            strict=True,
        )
    ]


def rounds_to_revise(*, session: Session, actor: User) -> list[str]:
    """Names of the Delphi rounds in a revision phase in which the expert answered."""
    user = require_role(actor, Role.expert)
    out = []
    for round_id, delphi in queries.delphi_rounds(session=session).items():
        if delphi.stage != "revising":
            continue
        if queries.rated_blind(session=session, round_id=round_id, expert_id=user.id):
            out.append(find_round(session, round_id).name)
    return sorted(out)
