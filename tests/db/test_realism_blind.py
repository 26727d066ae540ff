"""Blind tests on both backends: fragments drawn alike and shuffled, experts' answers once
each, never the source in what an expert sees; d' and the binomial test from the answers."""

import hashlib
import json

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import Conflict, InvalidInput
from itsmreview.realism import blind, blind_tests
from itsmreview.realism.blind_tests import (
    answer,
    blind_report,
    close_blind_test,
    create_blind_test,
    next_fragment,
)
from itsmreview.realism.models import BlindFragment
from scipy.stats import binomtest, norm
from sqlmodel import select
from typer.testing import CliRunner

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


@pytest.fixture
def test_open(mapped):
    """A blind test over the simulator that never waits, and two experts."""
    result = run(
        "realism", "blind", "create", "B1", "--simulator", "never-waits", "--fragments", "8"
    )
    assert result.exit_code == 0, result.output
    with session_scope() as session:
        experts = [
            create_user(
                session=session,
                username=f"b{i}",
                role="expert",
                password="pw-12345678",
                expertise=roles,
            )[0]
            for i, roles in ((1, ["L2 resolver"]), (2, []))
        ]
        lead = create_user(session=session, username="lb", role="lead", password="pw-12345678")[0]
    return {"experts": experts, "lead": lead}


def _fragments() -> list[BlindFragment]:
    with session_scope() as session:
        found = session.exec(select(BlindFragment).order_by(BlindFragment.position)).all()
        return [BlindFragment.model_validate(f.model_dump()) for f in found]


def test_fragments_are_drawn_alike_and_committed_to_in_the_ledger(test_open, tmp_path):
    fragments = _fragments()
    assert len(fragments) == 8
    simulated = [f for f in fragments if f.source == "simulated"]
    real = [f for f in fragments if f.source == "real"]
    assert len(simulated) == len(real) == 4
    # the same length distribution on both sides, and teams renamed in order of appearance
    assert sorted(len(f.steps) for f in simulated) == sorted(len(f.steps) for f in real)
    for fragment in fragments:
        teams = [step["team"] for step in fragment.steps if step["team"] != "-"]
        assert teams[0] == "Team A"
        assert set(teams) <= {"Team A", "Team B", "Team C"}
    assert all(f.reference.startswith("never-") for f in simulated)
    assert run("ledger", "export", str(tmp_path / "l.jsonl")).exit_code == 0
    entries = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    [created] = [e for e in entries if e["artifact_type"] == "realism_blind_test"]
    drawn = [{"source": f.source, "reference": f.reference, "steps": f.steps} for f in fragments]
    body = json.dumps(drawn, sort_keys=True, separators=(",", ":"))
    assert created["payload"]["fragments_sha256"] == hashlib.sha256(body.encode()).hexdigest()


def test_experts_answer_each_fragment_once_and_never_see_its_source(test_open):
    expert = test_open["experts"][0]
    sources = {f.id: f.source for f in _fragments()}
    seen = []
    while True:
        with session_scope() as session:
            fragment, done, total = next_fragment(session=session, actor=expert, name="B1")
        if fragment is None:
            break
        assert not hasattr(fragment, "source") and not hasattr(fragment, "reference")
        assert (done, total) == (len(seen), 8)
        seen.append(fragment.position)
        with session_scope() as session:
            answer(
                session=session,
                actor=expert,
                name="B1",
                fragment_id=fragment.id,
                judged=sources[fragment.id],  # this expert is always right
                confidence=5,
            )
    assert seen == list(range(1, 9))
    first = min(sources)
    with session_scope() as session, pytest.raises(Conflict, match="answered fragment 1 already"):
        answer(
            session=session, actor=expert, name="B1", fragment_id=first, judged="real", confidence=3
        )
    with session_scope() as session, pytest.raises(InvalidInput, match="real or simulated"):
        answer(
            session=session,
            actor=test_open["experts"][1],
            name="B1",
            fragment_id=first,
            judged="maybe",
            confidence=3,
        )


def test_the_report_gives_d_prime_and_the_binomial_test(test_open):
    right, always_real = test_open["experts"]
    for fragment in _fragments():
        with session_scope() as session:
            answer(
                session=session,
                actor=right,
                name="B1",
                fragment_id=fragment.id,
                judged=fragment.source,
                confidence=4,
            )
            answer(
                session=session,
                actor=always_real,
                name="B1",
                fragment_id=fragment.id,
                judged="real",
                confidence=2,
            )
    report = json.loads(run("realism", "blind", "report", "B1", "--json").stdout)
    perfect = report["per_expert"]["b1"]
    assert (perfect["hits"], perfect["false_alarms"], perfect["accuracy"]) == (4, 0, 1.0)
    expected = norm.ppf(4.5 / 5) - norm.ppf(0.5 / 5)  # Hautus's correction, 4 of 4 and 0 of 4
    assert perfect["d_prime"] == pytest.approx(expected, abs=1e-6)
    assert perfect["p_value"] == pytest.approx(binomtest(8, 8).pvalue, abs=1e-6)
    blindfold = report["per_expert"]["b2"]
    assert blindfold["d_prime"] == pytest.approx(0.0, abs=1e-9)
    assert blindfold["accuracy"] == 0.5 and blindfold["p_value"] == 1.0
    overall = report["overall"]
    assert (overall["answers"], overall["hits"], overall["false_alarms"]) == (16, 4, 0)
    assert overall["d_prime"] == pytest.approx(blind.d_prime(4, 8, 0, 8), abs=1e-6)
    low, high = overall["d_prime_interval"]
    assert low <= overall["d_prime"] <= high
    assert report["mean_confidence"] == {"right": 3.333, "wrong": 2.0}
    # per role: the L2 resolver (b1, always right) apart from the expert without expertise
    assert report["per_role"]["L2 resolver"] == perfect
    assert report["per_role"]["(no expertise recorded)"] == blindfold
    text = run("realism", "blind", "report", "B1")
    assert text.exit_code == 0 and "all experts" in text.output and "b1" in text.output


def test_closing_records_the_result_and_stops_answers(test_open):
    lead, expert = test_open["lead"], test_open["experts"][0]
    with session_scope() as session:
        closed = close_blind_test(session=session, actor=lead, name="B1")
    assert closed["state"] == "closed"
    with session_scope() as session:
        fragment, done, total = next_fragment(session=session, actor=expert, name="B1")
    assert (fragment, done, total) == (None, 0, 8)
    first = _fragments()[0]
    with session_scope() as session, pytest.raises(Conflict, match="closed"):
        answer(
            session=session,
            actor=expert,
            name="B1",
            fragment_id=first.id,
            judged="real",
            confidence=1,
        )
    with session_scope() as session, pytest.raises(Conflict, match="closed already"):
        close_blind_test(session=session, actor=lead, name="B1")


def test_bad_requests_are_refused_with_the_reason(test_open, monkeypatch):
    lead = test_open["lead"]
    with session_scope() as session, pytest.raises(Conflict, match="named 'B1' exists"):
        create_blind_test(session=session, actor=lead, name="B1", simulator="never-waits")
    with session_scope() as session, pytest.raises(InvalidInput, match="4 to 400 fragments"):
        create_blind_test(
            session=session, actor=lead, name="B2", simulator="never-waits", fragments=2
        )
    # the simulator that never waits has no case of three events or more
    monkeypatch.setattr(blind_tests, "MIN_STEPS", 3)
    with session_scope() as session, pytest.raises(InvalidInput, match="too few fragments"):
        create_blind_test(session=session, actor=lead, name="B3", simulator="never-waits")
    missing = run("realism", "blind", "report", "nope")
    assert missing.exit_code == 1 and "no blind test named 'nope'; known: B1" in missing.output
    with session_scope() as session:
        assert blind_report(session=session, actor=lead, name="B1")["overall"]["answers"] == 0
