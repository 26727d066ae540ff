"""Loading the demo: users, synthetic log, task set, rubric and a partly finished round.

Idempotent: every step looks for what it would create first, so a second run changes nothing.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from itsmreview.accounts import queries as account_queries
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import create_user
from itsmreview.catalog.queries import latest_version, task_by_external_id
from itsmreview.catalog.service import import_tasks
from itsmreview.coverage import queries as coverage_queries
from itsmreview.coverage.models import VariantLevel
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic import generate_log, write_csv, write_xes
from itsmreview.demo.taskset import BPI2014_SPECS, SPECS, build_task_set, load_specs
from itsmreview.realism import blind_tests
from itsmreview.realism import service as realism_service
from itsmreview.realism.mapping import load_spec
from itsmreview.review.consensus import service as consensus
from itsmreview.review.gate.service import recompute_statuses
from itsmreview.review.gate.work import apply_queued_here
from itsmreview.review.models import ReviewRound
from itsmreview.review.ratings import findings
from itsmreview.review.ratings import queries as review_queries
from itsmreview.review.ratings.completeness import activities_of, add_activities, submit_review
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.repair.adjudication import adjudicate
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rounds.assignment import close_round
from itsmreview.review.rounds.service import assign_round, create_round
from itsmreview.review.rubrics.service import RubricDefinition, ensure_rubric, load_rubric
from itsmreview.storage import get_storage
from sqlmodel import Session

DEMO_LOG_NAME = "demo-vinst"
DEMO_BPI2014_NAME = "rabobank-demo"  # BPI 2014's four tables, synthetic, with a team mapping
DEMO_TEAMS = (  # teams the demo's lead distils the 242 assignment groups into, by workload
    "Service desk",
    "Workplace support",
    "Network",
    "Application support",
    "SAP support",
    "Database administration",
    "Storage",
    "Identity and access",
)
DEMO_ROUND = "Demo round 1"
# a finished round over the BPI 2014 tasks with `pilot` in their spec, closed, its approved
# tasks exported (released) under DEMO_RELEASE; the other BPI 2014 tasks stay drafts
DEMO_PILOT_ROUND = "Pilot round (released)"
DEMO_RELEASE = "rabobank-pilot"
PILOT_EXPERTS = ("expert1", "expert2", "expert3")
PILOT_QUALITY = {"approve": 4.6, "revise": 3.3, "reject": 1.6}  # the task's quality as rated
DEMO_DELPHI_ROUND = "Demo consensus round"
# tasks the main round rated fully and sent back or split on, asked again in a finished Delphi
# round; two experts start far from the panel on each (one alone would leave the middle half
# of the answers together), so the revision has something to converge
DELPHI_DISSENT = {0: (4, 2), 1: (1, 3), 2: (3, 0), 3: (0, 1)}  # task -> experts who start apart
DELPHI_TASKS = tuple(DELPHI_DISSENT)
DEMO_MAPPING = "demo-itsm"  # the packaged spec mapping the demo transcripts (realism/specs)
DEMO_SIMULATOR = "hand-written demo"  # the backbone the demo transcripts name
DEMO_BLIND_TEST = "Demo blind test"
DEMO_PASSWORD = "itsm-demo"
DEMO_USERS = (
    ("lead", Role.lead, "Lena Lindqvist", ()),
    ("admin", Role.admin, "Adam Admin", ()),
    ("expert1", Role.expert, "Eva Ek", ("L1 service desk agent", "Incident manager")),
    ("expert2", Role.expert, "Tomasz Nowak", ("L2 resolver",)),
    ("expert3", Role.expert, "Priya Raman", ("Incident manager", "Change/problem coordinator")),
    ("expert4", Role.expert, "Joost Smit", ("L1 service desk agent",)),
    ("expert5", Role.expert, "Ana Souza", ("L2 resolver", "Change/problem coordinator")),
)
FULLY_RATED_TASKS = 10
# demo ratings: a task's quality, a small bias per expert and noise per rating, tuned so
# that agreement is believable (alpha around 0.7) and the gate has something to decide
DEMO_QUALITY_LOW, DEMO_QUALITY_HIGH = 2.2, 5.0
DEMO_RATER_BIAS = (-0.15, 0.05, 0.1, -0.05, 0.0)
DEMO_RATER_NOISE = 0.2
DEMO_DISSENT_TASK = 8  # a task the others rate highly
PARTLY_RATED_TASKS = 8

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DemoSummary:
    users: int
    log_name: str  # the synthetic BPI 2013-shaped log; `log_names` lists every demo log
    log_created: bool
    tasks_created: int
    round_created: bool
    ratings: int
    log_names: tuple[str, ...] = ()


def _ensure_users(session: Session) -> dict[str, User]:
    users = {}
    for username, role, display, expertise in DEMO_USERS:
        user = account_queries.user_by_username(session=session, username=username)
        if user is None:
            user, _ = create_user(
                session=session,
                username=username,
                role=role,
                password=DEMO_PASSWORD,
                display_name=display,
                expertise=expertise,
            )
        users[username] = user
    return users


def demo_log_files(data_dir: Path, seed: int, cases: int) -> tuple[Path, Path]:
    folder = data_dir / "demo"
    return (
        folder / f"{DEMO_LOG_NAME}-{seed}-{cases}.csv.gz",
        folder / f"{DEMO_LOG_NAME}-{seed}-{cases}.xes.gz",
    )


def _write_log_files(data_dir: Path, seed: int, cases: int) -> Path:
    csv_path, xes_path = demo_log_files(data_dir, seed, cases)
    if not (csv_path.exists() and xes_path.exists()):
        frame = generate_log(cases, seed=seed)
        write_csv(frame, csv_path)
        write_xes(frame, xes_path)
    return csv_path


def _record_synthetic(session: Session, log, generator: str) -> None:
    """The ledger says the demo's log is synthetic (a dataset card of an export reads it)."""
    from itsmreview.ledger.service import append_entry

    append_entry(
        session=session,
        artifact_type="event_log",
        artifact_id=f"{log.name}@{log.version}",
        field="origin",
        action="add-source",
        source_kind="external",
        reference=f"Synthetic log generated by {generator}; no real organisation's events",
    )


def demo_teams(groups: list[str]) -> dict[str, str]:
    """The demo's team mapping: the three busiest groups form the service desk, the next ones
    go to the other teams in turn, the rarest hundred stay unmapped (as a real first mapping
    would leave them).

    >>> found = demo_teams(["g1", "g2", "g3", "g4", "g5"])
    >>> found["g3"], found["g4"], found["g5"]
    ('Service desk', 'Workplace support', 'Network')
    """
    mapped = groups[: max(len(groups) - 100, min(len(groups), 5))]
    teams = {group: DEMO_TEAMS[0] for group in mapped[:3]}
    for index, group in enumerate(mapped[3:]):
        teams[group] = DEMO_TEAMS[1 + index % (len(DEMO_TEAMS) - 1)]
    return teams


def _load_bpi2014(
    session: Session, users: dict[str, User], data_dir: Path, seed: int, incidents: int
) -> None:
    from itsmreview.coverage.synthetic_bpi2014 import generate_bpi2014, write_bpi2014
    from itsmreview.coverage.teams import group_table, set_team_mapping

    folder = data_dir / f"demo-bpi2014-{seed}-{incidents}"
    if not (folder / "Detail_Incident_Activity.csv").exists():
        write_bpi2014(generate_bpi2014(incidents=incidents, seed=seed), folder)
    imported = import_log(
        folder,
        session=session,
        name=DEMO_BPI2014_NAME,
        preset="bpi2014",
        actor_id=users["admin"].id,
    )
    if imported.created:
        _record_synthetic(
            session,
            imported.log,
            f"itsmreview.coverage.synthetic_bpi2014.generate_bpi2014(seed={seed})",
        )
    if coverage_queries.newest_team_mapping(session=session, log_name=DEMO_BPI2014_NAME):
        return
    groups = group_table(session=session, log_name=DEMO_BPI2014_NAME)["group"].tolist()
    set_team_mapping(
        session=session,
        actor=users["lead"],
        log_name=DEMO_BPI2014_NAME,
        teams=demo_teams(groups),
        source_kind="expert",
        reference="demo: groups by workload",
    )


def _demo_scores(
    definition: RubricDefinition,
    seed: int,
    task_index: int,
    expert_index: int,
    dissent: bool = False,
    quality: float | None = None,
) -> tuple[dict[str, float], str, list[str], int]:
    if quality is None:
        quality = random.Random(seed * 1000 + task_index).uniform(
            DEMO_QUALITY_LOW, DEMO_QUALITY_HIGH
        )
    rng = random.Random(seed * 100000 + task_index * 100 + expert_index)
    bias = DEMO_RATER_BIAS[expert_index % len(DEMO_RATER_BIAS)]
    scores = {}
    for dimension in definition.dimensions:
        offset = random.Random(f"{seed}-{task_index}-{dimension.key}").uniform(-0.4, 0.4)
        # one generator per rating and dimension: a dimension added to the rubric leaves the
        # others' values as they were
        noise = random.Random(f"{seed}-{task_index}-{expert_index}-{dimension.key}")
        low, high = dimension.scale
        value = round(quality + offset + bias + noise.gauss(0, DEMO_RATER_NOISE))
        scores[dimension.key] = float(min(high, max(low, value)))
    mean = sum(scores.values()) / len(scores)
    verdict = "accept" if mean >= 3.9 else "revise" if mean >= 2.8 else "reject"
    if dissent:  # one expert finds the ground truth wrong, so the demo has a case to adjudicate
        verdict = "reject"
    flags = []
    if scores["ground_truth_correctness"] <= 2 or dissent:
        flags.append("wrong_ground_truth")
    if scores["instruction_clarity"] <= 2:
        flags.append("ambiguous_instruction")
    return scores, verdict, flags, rng.randint(3, 5)


def _submit(session: Session, expert: User, assignment_id: int, rating: tuple, comment: str):
    """A demo rating, queued for the gate (the loader applies the round's queue at once)."""
    scores, verdict, flags, confidence = rating
    submit_rating(
        session=session,
        actor=expert,
        assignment_id=assignment_id,
        scores=scores,
        verdict=verdict,
        flags=flags,
        confidence=confidence,
        comment=comment,
        recompute=False,
    )


def _seed_round(session: Session, users: dict[str, User], seed: int) -> int:
    rubric = ensure_rubric(load_rubric(), session=session)
    definition = RubricDefinition.model_validate(rubric.definition)
    version_ids = []
    for spec in load_specs():
        task = task_by_external_id(session=session, external_id=spec["id"])
        version_ids.append(latest_version(session=session, task_id=task.id).id)
    lead = users["lead"]
    experts = [u for name, u in users.items() if u.role == Role.expert]
    review_round = create_round(
        session=session,
        actor=lead,
        name=DEMO_ROUND,
        rubric=rubric,
        task_version_ids=version_ids,
        k=3,
    )
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    by_id = {u.id: u for u in experts}
    expert_order = {u.id: i for i, u in enumerate(experts)}
    submitted = 0
    for task_index, version_id in enumerate(version_ids):
        assignments = sorted(
            rounds_queries.assignments_of_task(
                session=session,
                round_id=review_round.id,
                task_version_id=version_id,
                holding_only=False,
            ),
            key=lambda a: a.expert_id,
        )
        if task_index < FULLY_RATED_TASKS:
            to_rate = assignments
        elif task_index < FULLY_RATED_TASKS + PARTLY_RATED_TASKS:
            to_rate = assignments[: 1 + task_index % 2]
        else:
            to_rate = []
        for assignment in to_rate:
            expert = by_id[assignment.expert_id]
            scores, verdict, flags, confidence = _demo_scores(
                definition,
                seed,
                task_index,
                expert_order[expert.id],
                dissent=task_index == DEMO_DISSENT_TASK and assignment is to_rate[0],
            )
            comment = "" if verdict == "accept" else "Demo rating: see scores."
            _submit(session, expert, assignment.id, (scores, verdict, flags, confidence), comment)
            submitted += 1
    apply_queued_here(session=session, review_round=review_round, decide=False)
    recompute_statuses(session=session, round_name=review_round.id, actor_id=lead.id)
    return submitted


def _open_demo_round(
    session: Session, lead: User, name: str, external_ids: list[str], experts: list[User]
) -> tuple[ReviewRound, list[int], RubricDefinition]:
    """A round over the newest versions of these tasks, every one rated by each expert (k is
    their number); with its version ids and the rubric's definition."""
    rubric = ensure_rubric(load_rubric(), session=session)
    version_ids = [
        latest_version(
            session=session,
            task_id=task_by_external_id(session=session, external_id=external_id).id,
        ).id
        for external_id in external_ids
    ]
    review_round = create_round(
        session=session,
        actor=lead,
        name=name,
        rubric=rubric,
        task_version_ids=version_ids,
        k=len(experts),
    )
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    return review_round, version_ids, RubricDefinition.model_validate(rubric.definition)


def _raters(session: Session, review_round: ReviewRound, version_id: int, experts: list[User]):
    """(assignment, expert, the expert's place in `experts`) for each assignment of the task."""
    for assignment in rounds_queries.assignments_of_task(
        session=session,
        round_id=review_round.id,
        task_version_id=version_id,
        holding_only=False,
    ):
        index = next(i for i, u in enumerate(experts) if u.id == assignment.expert_id)
        yield assignment, experts[index], index


def _import_log_tasks(session: Session, users: dict[str, User], log_name: str, specs: Path):
    """The demo tasks of `specs`, each tied to a variant of the newest version of `log_name`."""
    log = coverage_queries.latest_log(session=session, name=log_name)
    variants = coverage_queries.variants_frame(
        session=session, log_id=log.id, level=VariantLevel.raw
    )
    cases = (
        get_storage()
        .read_table(log.events_path, "cases.parquet", columns=["case_id", "started_at"])
        .to_pandas()
    )
    tasks = build_task_set(variants, cases, log_name, specs)
    return import_tasks(
        tasks, session=session, source_format="native", actor_id=users["admin"].id, author_id=None
    )


def _seed_pilot(session: Session, users: dict[str, User], seed: int, data_dir: Path) -> None:
    """The released round: three experts rated the pilot tasks of the BPI 2014 set, the gate
    decided them (approved, sent back, rejected as their specs say), the lead closed the round
    and exported its approved tasks under DEMO_RELEASE in the data folder's exports/."""
    from itsmreview.exports.service import export_set

    pilot = [spec for spec in load_specs(BPI2014_SPECS) if spec.get("pilot")]
    lead, experts = users["lead"], [users[name] for name in PILOT_EXPERTS]
    review_round, version_ids, definition = _open_demo_round(
        session, lead, DEMO_PILOT_ROUND, [spec["id"] for spec in pilot], experts
    )
    for task_index, (spec, version_id) in enumerate(zip(pilot, version_ids, strict=True)):
        for assignment, expert, index in _raters(session, review_round, version_id, experts):
            rating = _demo_scores(
                definition,
                seed,
                100 + task_index,
                index,
                quality=PILOT_QUALITY[spec["pilot"]],
            )
            comment = "" if rating[1] == "accept" else "Pilot rating: see scores."
            _submit(session, expert, assignment.id, rating, comment)
    apply_queued_here(session=session, review_round=review_round, decide=False)
    recompute_statuses(session=session, round_name=review_round.id, actor_id=lead.id)
    for spec, version_id in zip(pilot, version_ids, strict=True):
        if spec["pilot"] == "reject":  # a unanimous reject waits for the lead: she agrees
            adjudicate(
                session=session,
                actor=lead,
                task_version_id=version_id,
                decision="reject",
                reason="Closing a ticket the caller solved is not a task worth an agent run.",
                round_name=review_round.id,
            )
    close_round(session=session, actor=lead, round_name=review_round.name)
    export_set(
        data_dir / "exports" / DEMO_RELEASE,
        session=session,
        actor=lead,
        formats=("native", "hf"),
        name=DEMO_RELEASE,
        license="CC-BY-4.0",
        round_name=review_round.name,
        force=True,
    )


def _delphi_revision(items: dict) -> tuple[dict[str, float], dict[str, str]]:
    """A demo expert's revision: an answer two or more points from the panel's median, or a
    point off on an item whose answers are still spread beyond the limit, moves to it."""
    scores, reasons = {}, {}
    for item, figures in items.items():
        yours, median = figures["yours"], figures["median"]
        far = abs(yours - median) > 1 or (figures["iqr"] > 1 and abs(yours - median) >= 1)
        scores[item] = median if far else yours
        if far:
            reasons[item] = (
                "The others' reading of the log variant convinced me: this wait is usual for "
                "the team."
            )
    return scores, reasons


def _seed_delphi(session: Session, users: dict[str, User], seed: int) -> None:
    """A finished Delphi round on four tasks: the five experts' blind ratings (two of them far
    from the panel on each task), a revision phase in which those experts move to the panel
    with a reason, then the stop rule holds and the round is closed: the consensus decides the
    tasks that converged and the gate does not hold (recorded as the lead's adjudications)."""
    specs = load_specs()
    lead, experts = users["lead"], [u for u in users.values() if u.role == Role.expert]
    review_round, version_ids, definition = _open_demo_round(
        session, lead, DEMO_DELPHI_ROUND, [specs[i]["id"] for i in DELPHI_TASKS], experts
    )
    consensus.start_delphi(
        session=session, actor=lead, round_name=review_round.name, iqr_max=1.0, max_phases=3
    )
    for task_index, version_id in zip(DELPHI_TASKS, version_ids, strict=True):
        for assignment, expert, index in _raters(session, review_round, version_id, experts):
            scores, verdict, flags, confidence = _demo_scores(definition, seed, task_index, index)
            apart = index in DELPHI_DISSENT[task_index]
            if apart:  # reads the task as unrealistic: two points below, at least 1
                scores = {k: max(1.0, v - 2) for k, v in scores.items()}
                verdict = "revise"
            comment = "The caller would not wait this long for a callback." if apart else ""
            _submit(session, expert, assignment.id, (scores, verdict, flags, confidence), comment)
    # the ratings reach the ledger and the round's counts; statuses wait for the consensus
    apply_queued_here(session=session, review_round=review_round, decide=False)
    name = review_round.name
    stage = consensus.advance_phase(session=session, actor=lead, round_name=name)["stage"]
    while stage != "closed":
        for expert in experts:
            for task in consensus.reveal(session=session, actor=expert, round_name=name)["tasks"]:
                scores, reasons = _delphi_revision(task["items"])
                consensus.revise(
                    session=session,
                    actor=expert,
                    round_name=name,
                    task_version_id=task["task_version_id"],
                    scores=scores,
                    reasons=reasons,
                )
        stage = consensus.advance_phase(session=session, actor=lead, round_name=name)["stage"]
    close_round(session=session, actor=lead, round_name=review_round.name)


PERSONAS = Path(__file__).parent / "personas.yaml"


def _declared_steps(session: Session, external_id: str) -> set[str]:
    task = task_by_external_id(session=session, external_id=external_id)
    version = latest_version(session=session, task_id=task.id)
    return {step for sequence in version.source.get("variants", []) for step in sequence}


def _seed_completeness(session: Session, users: dict[str, User], log_name: str) -> None:
    """Each persona's work activities, and judgements from the experts who know it."""
    import yaml

    lists = yaml.safe_load(PERSONAS.read_text(encoding="utf-8"))
    for persona, activities in lists.items():
        add_activities(
            session=session,
            actor=users["lead"],
            persona=persona,
            activities=activities,
            log_name=log_name,
        )
    judges = {
        "L1 service desk agent": ["expert1", "expert4"],
        "L2 resolver": ["expert2"],
        "Incident manager": ["expert1", "expert3"],
    }
    for persona, names in judges.items():
        in_tasks = {
            step
            for spec in load_specs()
            if spec["persona"] == persona
            for step in _declared_steps(session, spec["id"])
        }
        listed = activities_of(session, persona)
        written = [a for a in listed if a.source != "logs"]
        seen = [a.id for a in listed if a.source == "logs" and a.activity in in_tasks]
        for index, name in enumerate(names):
            captured = seen + [a.id for i, a in enumerate(written) if (i + index) % 4 != 3]
            submit_review(
                session=session,
                actor=users[name],
                persona=persona,
                captured_ids=captured,
                missing=["Approve a standard change for a user"] if index else [],
                comment="Demo judgement.",
            )


DEMO_FINDINGS = (  # task, expert, category, severity, text, anchors, lead's decision
    (
        "demo-l1-07-team-handoff",
        "expert2",
        "unrealistic_actor",
        "minor",
        "The second team answers two minutes after the handover; in the log a queued ticket "
        "waits hours before anyone picks it up.",
        ["turn:demo-l1-07-team-handoff-run-1:5", "step:2"],
        None,  # the panel confirms it (DEMO_PANEL_VOTES)
    ),
    (
        "demo-l1-06-reopened",
        "expert3",
        "specification_gaps",
        "major",
        "The verifier does not say whether the reopened incident keeps its priority; two "
        "agents that differ only there would be graded alike.",
        ["field:verifier"],
        (True, ""),
    ),
    (
        "demo-l1-06-reopened",
        "expert1",
        "wrong_routing",
        "minor",
        "A reopened incident should go back to the resolver group, not to the service desk.",
        ["field:instruction"],
        (False, "The demo log routes reopened incidents through the desk first (variant step 4)."),
    ),
    (
        "demo-l1-03-vpn-wait-user",
        "expert4",
        "missing_fallbacks",
        "major",
        "Nothing says what the agent does when the caller never sends the VPN log.",
        ["field:instruction", "turn:demo-l1-03-vpn-wait-user-run-1:4"],
        None,
    ),
)


# finding (by its place in DEMO_FINDINGS) -> the other experts' votes: the first is confirmed
# by the panel, the last has one vote and waits for more on the others' rating pages
DEMO_PANEL_VOTES = {
    0: (("expert1", True), ("expert3", True), ("expert5", True)),
    3: (("expert2", True),),
}


def _seed_findings(session: Session, users: dict[str, User]) -> None:
    """Findings of the demo's experts on three tasks, with anchors; the panel confirms one by
    its votes, the lead confirms one and rejects one, one stays open with a vote. Tasks the
    demo does not hold are left out."""
    for index, (task, expert, category, severity, text, anchors, decision) in enumerate(
        DEMO_FINDINGS
    ):
        if task_by_external_id(session=session, external_id=task) is None:
            continue
        found = findings.add_finding(
            session=session,
            actor=users[expert],
            category=category,
            severity=severity,
            description=text,
            anchors=[findings.parse_anchor(a) for a in anchors],
            external_id=task,
        )
        for voter, stands in DEMO_PANEL_VOTES.get(index, ()):
            findings.vote_on_finding(
                session=session, actor=users[voter], finding_id=found.id, stands=stands
            )
        if decision is not None:
            findings.decide_finding(
                session=session,
                actor=users["lead"],
                finding_id=found.id,
                confirm=decision[0],
                reason=decision[1],
            )


def _seed_blind_test(session: Session, users: dict[str, User], seed: int) -> None:
    """An open blind test of the demo simulator; two experts have answered (mostly right,
    with the demo's seed), the others have it on their Blind test page."""
    test = blind_tests.create_blind_test(
        session=session,
        actor=users["lead"],
        name=DEMO_BLIND_TEST,
        simulator=DEMO_SIMULATOR,
        fragments=20,
        seed=seed,
    )
    sources = blind_tests.fragment_sources(session=session, test=test)
    rng = random.Random(seed)
    for name in ("expert1", "expert2"):
        for fragment_id, source in sources:
            wrong = rng.random() < 0.3
            judged = {"real": "simulated", "simulated": "real"}[source] if wrong else source
            blind_tests.answer(
                session=session,
                actor=users[name],
                name=test.name,
                fragment_id=fragment_id,
                judged=judged,
                confidence=rng.randint(2, 5),
            )


def load_demo(
    *,
    session: Session,
    data_dir: Path,
    seed: int = 2013,
    cases: int = 2000,
    progress: Progress | None = None,
) -> DemoSummary:
    """Create or complete the demo content in the caller's transaction."""
    say = progress or (lambda _message: None)
    say("demo users")
    users = _ensure_users(session)
    say(f"synthetic log ({cases} cases, seed {seed})")
    csv_path = _write_log_files(data_dir, seed, cases)
    imported = import_log(
        csv_path,
        session=session,
        name=DEMO_LOG_NAME,
        preset="bpi2013",
        actor_id=users["admin"].id,
    )
    log = imported.log
    if imported.created:
        _record_synthetic(session, log, f"itsmreview.coverage.synthetic.generate_log(seed={seed})")
    say("synthetic BPI 2014 tables")
    _load_bpi2014(session, users, data_dir, seed, incidents=max(200, cases // 2))
    say("demo task set")
    report = _import_log_tasks(session, users, DEMO_LOG_NAME, SPECS)
    say("review round")
    round_created = rounds_queries.round_by_name(session=session, name=DEMO_ROUND) is None
    if round_created:
        _seed_round(session, users, seed)
    if rounds_queries.round_by_name(session=session, name=DEMO_DELPHI_ROUND) is None:
        say("a finished consensus (Delphi) round")
        _seed_delphi(session, users, seed)
    say("BPI 2014 tasks: a released pilot round and drafts")
    pilot = _import_log_tasks(session, users, DEMO_BPI2014_NAME, BPI2014_SPECS)
    if rounds_queries.round_by_name(session=session, name=DEMO_PILOT_ROUND) is None:
        _seed_pilot(session, users, seed, data_dir)
    if not review_queries.any_persona_activity(session=session):
        _seed_completeness(session, users, log.name)
    say("simulator realism: the demo transcripts mapped to the demo log's events")
    if not realism_service.simulators(session=session):
        realism_service.map_transcripts(
            session=session, actor=users["lead"], spec=load_spec(DEMO_MAPPING)
        )
    if not blind_tests.blind_test_names(session=session, actor=users["lead"]):
        _seed_blind_test(session, users, seed)
    if not findings.list_findings(session=session, actor=users["lead"]):
        _seed_findings(session, users)
    ratings = review_queries.rating_count(session=session)
    return DemoSummary(
        users=len(users),
        log_name=log.name,
        log_created=imported.created,
        tasks_created=len(report.created) + len(pilot.created),
        round_created=round_created,
        ratings=ratings,
        log_names=(log.name, DEMO_BPI2014_NAME),
    )
