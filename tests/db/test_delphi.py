"""Delphi rounds on both backends: phase 1 keeps the blind ratings, a revision phase reveals
the panel anonymously, changes need reasons, the stop rule closes the consensus; the report's
figures checked against krippendorff, a direct Kendall's W and a count of changed answers."""

import json

import krippendorff
import numpy as np
import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.importing import import_path
from itsmreview.catalog.models import TaskVersion
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from itsmreview.exports.service import preview
from itsmreview.review.consensus.service import (
    advance_phase,
    delphi_report,
    reveal,
    revise,
    revision_trail,
    start_delphi,
)
from itsmreview.review.models import (
    Adjudication,
    Assignment,
    DelphiAnswer,
    DelphiRound,
    DelphiSpread,
    ReviewRound,
)
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from itsmreview.settings import get_settings
from sqlmodel import delete, select
from typer.testing import CliRunner

runner = CliRunner()
# task -> the four experts' score on every item: d1 far apart, d2 agreed, d3 close
SCORES = {"d1": [5, 5, 4, 1], "d2": [4, 4, 4, 4], "d3": [3, 4, 3, 4]}


def always(definition):
    return [d for d in definition.dimensions if d.applies_when == "always"]


def run(*args):
    return runner.invoke(app, list(args))


@pytest.fixture
def panel(configured, tmp_path):
    bundle = tmp_path / "tasks.json"
    natives = [
        {
            "id": task,
            "title": task,
            "persona": "L1 service desk agent",
            "track": "single-agent",
            "instruction": f"Handle {task}.",
        }
        for task in SCORES
    ]
    bundle.write_text(json.dumps({"tasks": natives}))
    with session_scope() as session:
        lead = create_user(session=session, username="dl", role="lead", password="pw-123456")[0]
        experts = [
            create_user(session=session, username=f"dx{i}", role="expert", password="pw-12345")[0]
            for i in range(4)
        ]
        import_path(bundle, session=session)
        versions = {
            v.id: t
            for v, t in zip(
                session.exec(select(TaskVersion).order_by(TaskVersion.id)).all(),
                sorted(SCORES),
                strict=True,
            )
        }
        rubric = ensure_rubric(load_rubric(), session=session)
        create_round(
            session=session,
            actor=lead,
            name="D",
            rubric=rubric,
            task_version_ids=sorted(versions),
            k=4,
        )
        start_delphi(session=session, actor=lead, round_name="D", iqr_max=1.0, max_phases=3)
    definition = load_rubric()
    for index, expert in enumerate(experts):
        with session_scope() as session:
            while (assignment := claim_next(session=session, actor=expert)) is not None:
                task = versions[assignment.task_version_id]
                score = SCORES[task][index]
                submit_rating(
                    session=session,
                    actor=expert,
                    assignment_id=assignment.id,
                    scores={
                        d.key: score for d in definition.dimensions if d.applies_when == "always"
                    },
                    verdict="accept" if score >= 3 else "reject",
                    comment="the user would call back" if (task, index) == ("d1", 3) else "",
                )
    return {"lead": lead, "experts": experts, "versions": {t: v for v, t in versions.items()}}


def test_a_delphi_round_converges_after_one_revision(panel, tmp_path):
    lead, experts = panel["lead"], panel["experts"]
    with session_scope() as session, pytest.raises(Conflict, match="not in a revision phase"):
        revise(
            session=session,
            actor=experts[3],
            round_name="D",
            task_version_id=panel["versions"]["d1"],
            scores={},
        )
    with session_scope() as session:
        first = advance_phase(session=session, actor=lead, round_name="D")
    assert (first["ended_phase"], first["phase"], first["stage"]) == (1, 2, "revising")
    # d1's answers lie 1.75 apart (IQR) on every item; the other tasks converged
    items = len([d for d in load_rubric().dimensions if d.applies_when == "always"])
    assert first["not_converged"] == items
    with session_scope() as session:
        shown = reveal(session=session, actor=experts[3], round_name="D")
    d1 = next(t for t in shown["tasks"] if t["task"] == "d1")
    some = next(iter(d1["items"].values()))
    assert (some["yours"], some["median"], some["q1"], some["q3"]) == (1.0, 4.5, 3.25, 5.0)
    assert some["answers"] == {1.0: 1, 4.0: 1, 5.0: 2}
    assert d1["comments"] == [{"by": shown["you_are"], "comment": "the user would call back"}]
    text = json.dumps(shown)
    assert all(e.username not in text for e in experts)  # pseudonyms only
    version = panel["versions"]["d1"]
    raise_to = {item: 4.0 for item in d1["items"]}
    with session_scope() as session, pytest.raises(InvalidInput, match="say why you changed"):
        revise(
            session=session,
            actor=experts[3],
            round_name="D",
            task_version_id=version,
            scores=raise_to,
        )
    why = {item: "the panel's reading of the caller convinced me" for item in d1["items"]}
    with session_scope() as session:
        changed = revise(
            session=session,
            actor=experts[3],
            round_name="D",
            task_version_id=version,
            scores=raise_to,
            reasons=why,
        )
    assert changed == items
    with session_scope() as session, pytest.raises(Conflict, match="already"):
        revise(
            session=session,
            actor=experts[3],
            round_name="D",
            task_version_id=version,
            scores=raise_to,
            reasons=why,
        )
    with session_scope() as session:
        second = advance_phase(session=session, actor=lead, round_name="D")
    assert (second["stage"], second["not_converged"]) == ("closed", 0)
    assert second["stopped_because"] == "every answer within the IQR limit"
    with session_scope() as session, pytest.raises(Conflict, match="closed"):
        advance_phase(session=session, actor=lead, round_name="D")
    report = json.loads(run("agreement", "--round", "D", "--json").stdout)
    one, two = report["phases"]
    assert (one["phase"], two["phase"], report["stage"]) == (1, 2, "closed")
    # every phase's answers: 4 experts x 3 tasks x items; 1/12 of them changed in phase 2
    assert one["answers"] == two["answers"] == 12 * items
    assert two["changed_share"] == pytest.approx(1 / 12, abs=1e-6)
    item = next(iter(one["items"]))
    before = np.array([[SCORES[t][e] for t in sorted(SCORES)] for e in range(4)], dtype=float)
    after = before.copy()
    after[3, 0] = 4.0
    for figures, data in ((one, before), (two, after)):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
        assert figures["items"][item]["alpha"] == pytest.approx(expected, abs=1e-6)
        assert figures["items"][item]["kendalls_w"] == pytest.approx(_kendall_w(data), abs=1e-6)
    assert one["items"][item]["within_iqr"] == pytest.approx(2 / 3, abs=1e-6)
    # overall: every task item a unit (here each expert scored all items of a task alike)
    for figures, data in ((one, before), (two, after)):
        pooled = np.repeat(data, items, axis=1)
        expected = krippendorff.alpha(reliability_data=pooled, level_of_measurement="interval")
        overall = figures["overall"]
        assert overall["alpha"] == pytest.approx(expected, abs=1e-6)
        assert overall["kendalls_w"] == pytest.approx(_kendall_w(pooled), abs=1e-6)
        assert overall["task_items"] == 3 * items
        assert overall["ci_low"] <= overall["ci_high"]
        assert all(f["ci_low"] is not None for f in figures["items"].values())
    assert one["overall"]["within_iqr"] == pytest.approx(2 / 3, abs=1e-6)
    listed = json.loads(run("round", "list", "--json").stdout)
    assert [(r["mode"], r["phase"], r["stage"]) for r in listed] == [("delphi", 2, "closed")]
    with session_scope() as session:
        trail = revision_trail(session=session, actor=lead, round_name="D")
    moved = [r for r in trail if r["changed"]]
    assert len(moved) == items and all(r["reason"] for r in moved)
    assert {r["panelist"] for r in trail} == {f"Panelist {n}" for n in range(1, 5)}
    # phase 1 keeps the blind answers as they were
    assert sorted(
        r["score"] for r in trail if r["phase"] == 1 and r["task"] == "d1" and r["item"] == item
    ) == [1, 4, 5, 5]
    assert run("ledger", "export", str(tmp_path / "l.jsonl")).exit_code == 0
    entries = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [e["action"] for e in entries if e["artifact_type"] == "delphi"] == [
        "start",
        "phase",
        "revise",
        "phase",
    ]
    # the export's audit record carries each task's consensus trail, pseudonymous
    assert run("round", "gate", "D", "--alpha-min", "-1").exit_code == 0
    out = tmp_path / "set"
    exported = run("export", str(out), "--round", "D")
    assert exported.exit_code == 0, exported.output
    lines = (out / "evidence" / "audit.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert records and all(r["consensus"] for r in records)
    assert {a["phase"] for r in records for a in r["consensus"]} == {1, 2}
    assert not any(e.username in json.dumps(records) for e in experts)
    assert "## Consensus (Delphi)" in (out / "AUDIT.md").read_text()
    # and each task's summary beside it: the phases, and its answers changed in phase 2 (the
    # gate approves d2 alone, whose answers stayed; d1's changed ones are in the unit tests)
    native = [json.loads(x) for x in (out / "tasks/native.jsonl").read_text().splitlines()]
    summaries = {t["id"]: t["itsmreview"]["audit"] for t in native}
    assert {s["consensus_phases"] for s in summaries.values()} == {2}
    assert {t: s["consensus_changed"] for t, s in summaries.items()} == {
        t: sum(r["changed"] for r in moved if r["task"] == t) for t in summaries
    }
    assert run("export", "verify", str(out)).exit_code == 0


def _kendall_w(data: np.ndarray) -> float:
    """W with the tie correction, written out: ranks within each rater, average for ties."""
    m, n = data.shape
    ranks = np.zeros_like(data)
    ties = 0.0
    for r in range(m):
        order = sorted(range(n), key=lambda j: data[r, j])
        position = 0
        while position < n:
            end = position
            while end + 1 < n and data[r, order[end + 1]] == data[r, order[position]]:
                end += 1
            for j in order[position : end + 1]:
                ranks[r, j] = (position + end) / 2 + 1
            t = end - position + 1
            ties += t**3 - t
            position = end + 1
    sums = ranks.sum(axis=0)
    s = ((sums - m * (n + 1) / 2) ** 2).sum()
    return 12 * s / (m * m * (n**3 - n) - m * ties)


def test_the_last_phase_closes_what_did_not_converge(panel):
    lead = panel["lead"]
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
        advance_phase(session=session, actor=lead, round_name="D")  # nobody revised
        last = advance_phase(session=session, actor=lead, round_name="D")
    assert (last["ended_phase"], last["stage"]) == (3, "closed")
    assert last["stopped_because"] == "the last phase allowed (3)"
    assert last["not_converged"] > 0
    with session_scope() as session:
        report = delphi_report(session=session, actor=lead, round_name="D")
    assert [p["phase"] for p in report["phases"]] == [1, 2, 3]
    assert report["phases"][2]["changed_share"] == 0.0


def test_who_may_do_what_and_clear_errors(panel):
    lead, expert = panel["lead"], panel["experts"][0]
    with session_scope() as session, pytest.raises(PermissionDenied):
        advance_phase(session=session, actor=expert, round_name="D")
    with session_scope() as session, pytest.raises(Conflict, match="a Delphi round already"):
        start_delphi(session=session, actor=lead, round_name="D")
    refused = run("round", "delphi", "D", "--max-phases", "1")
    assert refused.exit_code == 1 and "between 2 and 10" in refused.output
    with session_scope() as session:
        assert reveal(session=session, actor=expert, round_name="D")["tasks"] == []
    missing = run("round", "phase", "nowhere")
    assert missing.exit_code == 1 and "no review round 'nowhere'" in missing.output
    with session_scope() as session, pytest.raises(NotFound, match="not a Delphi round"):
        create_round(
            session=session,
            actor=lead,
            name="plain",
            rubric=ensure_rubric(load_rubric(), session=session),
            task_version_ids=list(panel["versions"].values()),
            k=1,
        )
        advance_phase(session=session, actor=lead, round_name="plain")


def _stored_spreads(round_name: str = "D") -> dict[tuple[int, str], float]:
    with session_scope() as session:
        review_round = session.exec(select(ReviewRound).where(ReviewRound.name == round_name)).one()
        rows = session.exec(
            select(DelphiSpread).where(DelphiSpread.round_id == review_round.id)
        ).all()
        return {(r.task_version_id, r.item): r.iqr for r in rows}


def _numpy_spreads(panel, scores: dict[str, list[float]]) -> dict[tuple[int, str], float]:
    """Each task item's IQR written out with numpy from the answers the test gave."""
    items = [d.key for d in always(load_rubric())]
    return {
        (panel["versions"][task], item): float(
            np.percentile(values, 75) - np.percentile(values, 25)
        )
        for task, values in scores.items()
        for item in items
    }


def _d1_agrees(session, panel) -> None:
    """The fourth expert moves d1 to 4 on every item, with a reason."""
    items = {d.key: 4.0 for d in always(load_rubric())}
    revise(
        session=session,
        actor=panel["experts"][3],
        round_name="D",
        task_version_id=panel["versions"]["d1"],
        scores=items,
        reasons={key: "the panel convinced me" for key in items},
    )


def test_spreads_follow_the_blind_ratings_and_each_revision(panel):
    lead = panel["lead"]
    assert _stored_spreads() == _numpy_spreads(panel, SCORES)
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
        _d1_agrees(session, panel)
    assert _stored_spreads() == _numpy_spreads(panel, {**SCORES, "d1": [5, 5, 4, 4]})


def test_a_round_made_delphi_after_its_ratings_counts_them(configured, panel):
    """The spreads of ratings submitted before `round delphi` are built at its start."""
    lead = panel["lead"]
    with session_scope() as session:
        review_round = session.exec(select(ReviewRound).where(ReviewRound.name == "D")).one()
        session.delete(session.get(DelphiRound, review_round.id))
        session.exec(delete(DelphiSpread))
    with session_scope() as session:
        start_delphi(session=session, actor=lead, round_name="D", iqr_max=1.0)
    assert _stored_spreads() == _numpy_spreads(panel, SCORES)


def test_ratings_and_claims_close_when_the_blind_phase_ends(panel):
    lead, expert = panel["lead"], panel["experts"][0]
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
    with session_scope() as session:
        assignment = session.exec(
            select(Assignment).where(Assignment.expert_id == expert.id)
        ).first()
        with pytest.raises(Conflict, match="past its blind phase"):
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores={d.key: 1.0 for d in always(load_rubric())},
                verdict="reject",
            )
    with session_scope() as session, pytest.raises(Conflict, match="Consensus page"):
        claim_next(session=session, actor=expert, round_name="D")
    # phase 1's answers stay what the panel saw
    with session_scope() as session:
        trail = revision_trail(session=session, actor=lead, round_name="D")
    assert sorted(r["score"] for r in trail if r["task"] == "d3" and r["phase"] == 1) == sorted(
        SCORES["d3"] * len(always(load_rubric()))
    )


@pytest.fixture
def queued(monkeypatch):
    """Submits only queue their gate work (as with `itsmreview worker`s)."""
    monkeypatch.setenv("ITSMREVIEW_GATE_APPLY", "queue")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_ending_phase_1_applies_the_gate_work_still_queued(queued, panel):
    assert _stored_spreads() == {}  # nothing applied yet
    with session_scope() as session:
        ended = advance_phase(session=session, actor=panel["lead"], round_name="D")
    assert ended["not_converged"] == len(always(load_rubric()))  # d1's items
    assert _stored_spreads() == _numpy_spreads(panel, SCORES)


def test_a_round_from_before_migration_0029_reads_its_stored_answers(panel):
    """Rounds started before 0029 hold a copy of phase 1 (taken at the phase change; a rating
    could change after it) and no spreads: the copy is phase 1, the spreads are built from
    it at the next phase change."""
    lead, experts = panel["lead"], panel["experts"]
    with session_scope() as session:
        round_id = session.exec(select(ReviewRound.id).where(ReviewRound.name == "D")).one()
        copy = {**SCORES, "d1": [5, 5, 4, 4]}  # the copy: d1 agreed when phase 1 ended
        for task, scores in copy.items():
            for expert, score in zip(experts, scores, strict=True):
                session.add_all(
                    DelphiAnswer(
                        round_id=round_id,
                        task_version_id=panel["versions"][task],
                        expert_id=expert.id,
                        phase=1,
                        item=d.key,
                        score=score,
                    )
                    for d in always(load_rubric())
                )
        delphi = session.get(DelphiRound, round_id)
        delphi.phase, delphi.stage, delphi.spreads_built = 2, "revising", False
        session.exec(delete(DelphiSpread))
    with session_scope() as session:
        shown = reveal(session=session, actor=experts[3], round_name="D")
    d1 = next(t for t in shown["tasks"] if t["task"] == "d1")
    assert {i["yours"] for i in d1["items"].values()} == {4.0}
    with session_scope() as session:
        ended = advance_phase(session=session, actor=lead, round_name="D")
    assert (ended["stage"], ended["not_converged"]) == ("closed", 0)
    assert _stored_spreads() == _numpy_spreads(panel, copy)


def test_a_kendall_rule_reads_the_answers(panel):
    """With a W minimum the stop rule also needs every item's W over the phase's answers."""
    lead = panel["lead"]
    with session_scope() as session:
        delphi = session.exec(select(DelphiRound)).one()
        delphi.w_min, delphi.max_phases = 0.99, 3
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
        report = delphi_report(session=session, actor=lead, round_name="D")
    # no revision: the IQR rule holds on two tasks, but d1 stays wide and W is below 0.99
    w = report["phases"][0]["items"]
    assert all(f["kendalls_w"] < 0.99 for f in w.values())
    with session_scope() as session:
        _d1_agrees(session, panel)
        second = advance_phase(session=session, actor=lead, round_name="D")
    # every IQR within 1 now, but W < 0.99: the round goes on to phase 3
    assert (second["not_converged"], second["stage"], second["phase"]) == (0, "revising", 3)


def test_closing_the_consensus_decides_the_tasks_that_converged(panel):
    """At the close, the gate's rules read the panel's final answers: d2 (every answer 4)
    is approved, d3 (median 3.5, below the gate's 4) goes back for revision, each as the
    closing lead's adjudication with the consensus as its reason; d1 converged on its items
    but its blind verdicts conflict (three accept, one reject), so it stays with the lead."""
    lead = panel["lead"]
    assert run("round", "gate", "D", "--alpha-min", "-1").exit_code == 0
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
        _d1_agrees(session, panel)
        closed = advance_phase(session=session, actor=lead, round_name="D")
    assert closed["stage"] == "closed"
    assert closed["settled"] == {"decided": 2, "not_converged": 0, "held_by_the_gate": 1}
    with session_scope() as session:
        status = {
            task: session.get(TaskVersion, version).status
            for task, version in panel["versions"].items()
        }
        reasons = {
            a.task_version_id: (a.decision, a.reason, a.lead_id)
            for a in session.exec(select(Adjudication)).all()
        }
    assert status == {"d1": "adjudication", "d2": "approved", "d3": "needs_revision"}
    d3 = reasons[panel["versions"]["d3"]]
    assert d3[0] == "revise" and d3[2] == lead.id
    assert "Delphi consensus of round 'D' after phase 2" in d3[1] and "below 4" in d3[1]
    assert panel["versions"]["d1"] not in reasons
    assert run("ledger", "verify").exit_code == 0


def test_a_task_that_did_not_converge_is_left_to_the_lead(panel):
    lead = panel["lead"]
    assert run("round", "gate", "D", "--alpha-min", "-1").exit_code == 0
    with session_scope() as session:
        for _ in range(3):  # nobody revises: d1 stays 1.75 apart
            last = advance_phase(session=session, actor=lead, round_name="D")
    assert last["settled"] == {"decided": 2, "not_converged": 1, "held_by_the_gate": 0}
    with session_scope() as session:
        decided = {a.task_version_id for a in session.exec(select(Adjudication)).all()}
    assert decided == {panel["versions"]["d2"], panel["versions"]["d3"]}


def test_an_export_gates_a_closed_consensus_on_its_final_answers(panel, tmp_path):
    """Blind alpha -0.17 (krippendorff), final 0.39: with the gate at 0.1 the close decides
    on the final answers, and the export's agreement check reads those, not phase 1."""
    lead = panel["lead"]
    assert run("round", "gate", "D", "--alpha-min", "0.1").exit_code == 0
    with session_scope() as session:
        advance_phase(session=session, actor=lead, round_name="D")
        _d1_agrees(session, panel)
        advance_phase(session=session, actor=lead, round_name="D")
        shown = preview(session=session, actor=lead, round_name="D")
    gate = shown["gate"]["D"]
    assert (gate["reached"], gate["basis"]) == (True, "Delphi final answers"), gate
    item = next(iter(gate["alpha"]))
    final = np.array([[SCORES[t][e] for t in sorted(SCORES)] for e in range(4)], dtype=float)
    final[3, 0] = 4.0
    expected = krippendorff.alpha(reliability_data=final, level_of_measurement="interval")
    assert gate["alpha"][item] == pytest.approx(expected, abs=1e-9)
    exported = run("export", str(tmp_path / "set"), "--round", "D")
    assert exported.exit_code == 0, exported.output
