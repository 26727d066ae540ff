"""Blind tests (issue 36), services: a lead draws fragments of real cases and of a
simulator's mapped transcripts alike (the same length, the same view, teams renamed in order of
appearance, no label) and shuffles them; experts say which are simulated, with a confidence;
the report gives d' with its interval and the binomial test against chance (realism.blind).
The fragments' digest, every answer and the result go to the ledger."""

import hashlib
import json
import string
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd
from itsmreview.accounts.models import Role
from itsmreview.accounts.service import require_role
from itsmreview.coverage.service import latest_log
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.ledger.service import append_entry
from itsmreview.realism import blind, queries
from itsmreview.realism.models import BlindAnswer, BlindFragment, BlindTest
from itsmreview.realism.service import (
    _chosen_spec,
    _log_events,
    _real_scope,
    _simulated_events,
)
from itsmreview.realism.vocabulary import vocabulary_for
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

ARTIFACT = "realism_blind_test"
JUDGEMENTS = ("real", "simulated")
MIN_STEPS = 2  # a fragment of one event shows nothing to judge
MAX_FRAGMENTS = 400


@dataclass(frozen=True)
class Fragment:
    """What an expert sees of a fragment: its place in the test and its steps."""

    id: int
    position: int
    steps: list[dict]


def _anonymous(events: pd.DataFrame) -> list[dict]:
    """Steps of a fragment: activity and team, teams renamed Team A, B, ... in order."""
    names: dict[str, str] = {}
    steps = []
    for activity, group in zip(
        events["activity"], events.get("group", [None] * len(events)), strict=True
    ):
        team = "-"
        if isinstance(group, str) and group:
            index = names.setdefault(group, len(names))
            team = f"Team {string.ascii_uppercase[index % 26]}{'' if index < 26 else index // 26}"
        steps.append({"activity": str(activity), "team": team})
    return steps


def _draw(real: pd.DataFrame, simulated: pd.DataFrame, fragments: int, seed: int) -> list[dict]:
    """Up to fragments / 2 simulated cases of at least MIN_STEPS events, each paired with a
    window of the same length from a random real case long enough; shuffled."""
    rng = np.random.default_rng(seed)
    sim_cases = [
        (case, group.reset_index(drop=True))
        for case, group in simulated.groupby("case_id", sort=True)
        if len(group) >= MIN_STEPS
    ]
    real = real.assign(case_id=real["case_id"].astype(str))
    real = real.sort_values(["case_id", "timestamp"], kind="stable").reset_index(drop=True)
    lengths = real.groupby("case_id", sort=True).size()
    offsets = lengths.cumsum() - lengths  # where each case starts in the sorted frame
    order = rng.permutation(len(sim_cases))[: fragments // 2]
    drawn = []
    for index in order:
        case, events = sim_cases[index]
        long_enough = lengths[lengths >= len(events)].index
        if len(long_enough) == 0:
            continue
        real_case = str(long_enough[rng.integers(len(long_enough))])
        start = int(rng.integers(0, lengths[real_case] - len(events) + 1))
        first = int(offsets[real_case]) + start
        window = real.iloc[first : first + len(events)]
        drawn.append({"source": "simulated", "reference": str(case), "steps": _anonymous(events)})
        drawn.append(
            {
                "source": "real",
                "reference": f"{real_case}[{start}:{start + len(events)}]",
                "steps": _anonymous(window),
            }
        )
    return [drawn[i] for i in rng.permutation(len(drawn))]


def _digest(fragments: list[dict]) -> str:
    body = json.dumps(fragments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def create_blind_test(
    *,
    session: Session,
    actor,
    name: str,
    simulator: str,
    spec: str | None = None,
    fragments: int = 40,
    seed: int = blind.SEED,
) -> BlindTest:
    """Draw a blind test of `fragments` fragments (half real, half simulated) for
    `simulator`'s mapped transcripts against its log. Leads only. Raises Conflict for a
    name in use, InvalidInput for a bad name or size or too few long enough cases."""
    require_role(actor, Role.lead)
    name = (name or "").strip()
    if not 1 <= len(name) <= 128:
        raise InvalidInput("a blind test's name has 1 to 128 characters")
    if not 4 <= fragments <= MAX_FRAGMENTS:
        raise InvalidInput(f"a blind test has 4 to {MAX_FRAGMENTS} fragments, not {fragments}")
    if queries.blind_test(session=session, name=name) is not None:
        raise Conflict(f"a blind test named {name!r} exists; choose another name")
    chosen = _chosen_spec(session, simulator, spec)
    log = latest_log(session=session, name=chosen["log"])
    if log is None:
        raise NotFound(f"the log {chosen['log']!r} of spec {chosen['spec']!r} is not imported")
    vocab = vocabulary_for(log.preset, list((log.mapping or {}).get("roles") or []))
    mapped = queries.mapped_of(session=session, simulator=simulator, spec=chosen["spec"])
    simulated, _ = _simulated_events(mapped)
    versions = sorted({row[2] for row in mapped})
    keys = queries.declared_sequence_keys(session=session, version_ids=versions)
    real, _ = _real_scope(log, _log_events(log, vocab), keys)
    drawn = _draw(real, simulated, fragments, seed)
    if len(drawn) < 4:
        raise InvalidInput(
            f"too few fragments: {len(drawn) // 2} simulated case(s) of at least {MIN_STEPS} "
            "events with a real case as long; map more transcripts"
        )
    test = BlindTest(
        name=name,
        simulator=simulator,
        spec=chosen["spec"],
        spec_sha256=mapped[0][0].spec_sha256,
        log=log.name,
        log_version=log.version,
        seed=seed,
        created_by_id=actor.id,
    )
    session.add(test)
    session.flush()
    session.add_all(
        BlindFragment(test_id=test.id, position=position, **fragment)
        for position, fragment in enumerate(drawn, start=1)
    )
    session.flush()
    append_entry(
        session=session,
        artifact_type=ARTIFACT,
        artifact_id=name,
        action="create",
        source_kind="expert",
        reference=f"{len(drawn)} fragments of {simulator} and {log.name} v{log.version}",
        actor_id=actor.id,
        payload={
            "simulator": simulator,
            "spec": chosen["spec"],
            "spec_sha256": test.spec_sha256,
            "log": log.name,
            "log_version": log.version,
            "seed": seed,
            "fragments": len(drawn),
            "fragments_sha256": _digest(drawn),
        },
    )
    return test


def _open_test(session: Session, name: str) -> BlindTest:
    test = queries.blind_test(session=session, name=name)
    if test is None:
        known = ", ".join(t.name for t in queries.blind_tests(session=session)) or "none"
        raise NotFound(f"no blind test named {name!r}; known: {known}")
    return test


def blind_test_names(*, session: Session, actor, only_open: bool = False) -> list[str]:
    """The blind tests' names (the open ones), oldest first. Experts and leads."""
    require_role(actor, Role.expert, Role.lead)
    tests = queries.blind_tests(session=session)
    return [t.name for t in tests if not only_open or t.state == "open"]


def next_fragment(*, session: Session, actor, name: str) -> tuple[Fragment | None, int, int]:
    """The expert's next unanswered fragment (None when done), with how many they answered
    and how many the test has. Experts only: a fragment never says where it came from."""
    require_role(actor, Role.expert)
    test = _open_test(session, name)
    done, total = queries.answer_counts(session=session, test_id=test.id, expert_id=actor.id)
    if test.state != "open":
        return None, done, total
    found = queries.next_fragment(session=session, test_id=test.id, expert_id=actor.id)
    shown = Fragment(found.id, found.position, found.steps) if found else None
    return shown, done, total


def answer(
    *, session: Session, actor, name: str, fragment_id: int, judged: str, confidence: int
) -> None:
    """Record an expert's answer on a fragment of an open test (once per fragment)."""
    require_role(actor, Role.expert)
    if judged not in JUDGEMENTS:
        raise InvalidInput(f"an answer is real or simulated, not {judged!r}")
    if not 1 <= int(confidence) <= 5:
        raise InvalidInput(f"confidence is 1 (a guess) to 5 (sure), not {confidence}")
    test = _open_test(session, name)
    if test.state != "open":
        raise Conflict(f"blind test {name!r} is closed")
    fragment = session.get(BlindFragment, fragment_id)
    if fragment is None or fragment.test_id != test.id:
        raise NotFound(f"blind test {name!r} has no fragment {fragment_id}")
    already = Conflict(f"you answered fragment {fragment.position} already")
    if queries.has_answer(session=session, fragment_id=fragment.id, expert_id=actor.id):
        raise already
    try:
        with session.begin_nested():  # two tabs answering at once: one wins, one is told
            session.add(
                BlindAnswer(
                    fragment_id=fragment.id,
                    expert_id=actor.id,
                    judged=judged,
                    confidence=int(confidence),
                )
            )
    except IntegrityError:
        raise already from None
    append_entry(
        session=session,
        artifact_type=ARTIFACT,
        artifact_id=name,
        action="answer",
        source_kind="expert",
        field=f"fragment {fragment.position}",
        actor_id=actor.id,
        payload={"position": fragment.position, "judged": judged, "confidence": int(confidence)},
    )


def blind_report(*, session: Session, actor, name: str) -> dict:
    """A test's result, overall, per expert and per role (the personas the experts practise):
    hits, false alarms, accuracy, d' with its bootstrap interval and the binomial test against
    chance; the mean confidence of right and wrong answers. Leads only."""
    require_role(actor, Role.lead)
    test = _open_test(session, name)
    rows = queries.answers_of(session=session, test_id=test.id)
    fragments = queries.fragments_of(session=session, test_id=test.id)
    by_expert: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"simulated": [], "real": []})
    by_role: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"simulated": [], "real": []})
    everyone = {"simulated": [], "real": []}
    confidence = {True: [], False: []}
    for source, judged, sure, _, username, expertise in rows:
        said_simulated = int(judged == "simulated")
        everyone[source].append(said_simulated)
        by_expert[username][source].append(said_simulated)
        for role in expertise or ["(no expertise recorded)"]:
            by_role[role][source].append(said_simulated)
        confidence[(judged == source)].append(sure)
    return {
        "name": test.name,
        "state": test.state,
        "simulator": test.simulator,
        "spec": test.spec,
        "log": test.log,
        "log_version": test.log_version,
        "fragments": len(fragments),
        "experts": len(by_expert),
        "overall": blind.summary(everyone["simulated"], everyone["real"], seed=test.seed),
        "per_expert": {
            username: blind.summary(answers["simulated"], answers["real"], seed=test.seed)
            for username, answers in sorted(by_expert.items())
        },
        # by the personas the experts practise (an expert of two counts in both)
        "per_role": {
            role: blind.summary(answers["simulated"], answers["real"], seed=test.seed)
            for role, answers in sorted(by_role.items())
        },
        "mean_confidence": {
            "right": round(float(np.mean(confidence[True])), 3) if confidence[True] else None,
            "wrong": round(float(np.mean(confidence[False])), 3) if confidence[False] else None,
        },
    }


def close_blind_test(*, session: Session, actor, name: str) -> dict:
    """Close a test (no more answers) and record its result in the ledger. Leads only."""
    require_role(actor, Role.lead)
    test = _open_test(session, name)
    if test.state != "open" or not queries.close_test(
        session=session, test_id=test.id, at=utcnow()
    ):
        raise Conflict(f"blind test {name!r} is closed already")
    session.refresh(test)
    result = blind_report(session=session, actor=actor, name=name)
    append_entry(
        session=session,
        artifact_type=ARTIFACT,
        artifact_id=name,
        action="close",
        source_kind="expert",
        actor_id=actor.id,
        payload={"overall": result["overall"], "experts": result["experts"]},
    )
    return result | {"state": "closed"}


def fragment_count(*, session: Session, test: BlindTest) -> int:
    return len(queries.fragments_of(session=session, test_id=test.id))


def blind_reports(*, session: Session, actor, simulator: str) -> list[dict]:
    """The report of every blind test of `simulator`, oldest first. Leads only."""
    require_role(actor, Role.lead)
    tests = [t for t in queries.blind_tests(session=session) if t.simulator == simulator]
    return [blind_report(session=session, actor=actor, name=t.name) for t in tests]


def fragment_sources(*, session: Session, test: BlindTest) -> list[tuple[int, str]]:
    """(fragment id, source) in the test's order: the answer key, for the demo's answers."""
    return [(f.id, f.source) for f in queries.fragments_of(session=session, test_id=test.id)]
