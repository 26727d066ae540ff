"""`ledger verify` against an attacker with the database, on both databases (issue 28).

One demo-like database per backend (the demo: logs, a team mapping, tasks, a round of human
ratings; plus model ratings, a failed machine check, a decided and an open proposal, an
adjudication and a rating queued for the gate), copied for each test. Every covered table is
tampered with in each direction: an object deleted (its entry names a missing object), an
object edited (its content differs from its entry), an object forged (no entry commits to
it) and an entry forged (well hashed, naming an object that does not exist).
"""

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
from itsmreview import db as db_module
from itsmreview import settings as settings_module
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.ledger.evidence import audit as audit_module
from itsmreview.ledger.evidence.service import ledger_head, verify_ledger
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import append_entry
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlmodel import select
from typer.testing import CliRunner

STRICT = os.environ.get("ITSMREVIEW_REQUIRE_ALL_TESTS") == "1"
POSTGRES_URL = os.environ.get(
    "ITSMREVIEW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "anthropic"


def _admin():
    engine = create_engine(
        POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any connection failure means no server
        if STRICT:
            pytest.fail(f"required in this run but unavailable: PostgreSQL: {exc}")
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is not reachable")
    return engine


def _pg(admin, statement: str) -> None:
    with admin.connect() as connection:
        connection.execute(text(statement))


def _pg_url(name: str) -> str:
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


def _point_at(monkeypatch, url: str, data_dir: Path, **settings: str) -> None:
    monkeypatch.setenv("ITSMREVIEW_DATABASE_URL", url)
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(data_dir))
    for name, value in settings.items():
        monkeypatch.setenv(f"ITSMREVIEW_{name.upper()}", value)
    settings_module.get_settings.cache_clear()
    db_module._engine_for.cache_clear()


def _build(url: str, data_dir: Path) -> None:
    """The demo, then what it lacks: model ratings, a failed machine check, proposals (one
    dismissed, one open), a gate change, an adjudication, an export and a rating queued for
    the gate."""
    from anthropic_replay import ReplayAPI
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.demo.loader import DEMO_ROUND, load_demo
    from itsmreview.exports.service import export_set
    from itsmreview.review.assist import client as model_client
    from itsmreview.review.assist.rater import run_model_review, start_model_review
    from itsmreview.review.gate.service import set_gate
    from itsmreview.review.models import Assignment
    from itsmreview.review.ratings.checks import import_checks
    from itsmreview.review.ratings.service import submit_rating
    from itsmreview.review.repair.adjudication import adjudicate
    from itsmreview.review.repair.service import decide_proposal, propose_resolution
    from itsmreview.review.rubrics.service import load_rubric

    engine = db_module.create_db_engine(url)
    db_module.upgrade_database(engine)
    engine.dispose()
    with pytest.MonkeyPatch.context() as patch:
        _point_at(patch, url, data_dir, gate_apply="queue")
        patch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
        patch.delenv("ANTHROPIC_BASE_URL", raising=False)
        settings_module.get_settings.cache_clear()
        with session_scope() as session:
            load_demo(session=session, data_dir=data_dir / "demo", cases=300)
        response = json.loads((FIXTURES / "rating.response.json").read_text())
        patch.setattr(model_client, "http_client_factory", ReplayAPI(lambda _: response).client)
        with session_scope() as session:
            lead = user_by_username(session=session, username="lead")
            run = start_model_review(session=session, actor=lead, round_name=None, limit=2)
        run_model_review(run.id, concurrency=1)
        with session_scope() as session:
            lead = user_by_username(session=session, username="lead")
            assignments = session.exec(
                select(Assignment)
                .where(Assignment.status == "submitted")
                .order_by(Assignment.id)
                .limit(2)
            ).all()
            first = session.get(TaskVersion, assignments[0].task_version_id)
            task = session.get(Task, first.task_id)
            checks = data_dir / "checks.json"
            checks.write_text(
                json.dumps(
                    {
                        "checks": [
                            {
                                "task": task.external_id,
                                "version": first.version,
                                "check": "reproducibility",
                                "status": "fail",
                                "summary": "the end state differs on a second run",
                                "tool": "replay 1.0",
                            }
                        ]
                    }
                )
            )
            import_checks(checks, session=session, actor=lead)
            for n, assignment in enumerate(assignments):
                expert = session.get(type(lead), assignment.expert_id)
                proposal = propose_resolution(
                    session=session,
                    actor=expert,
                    assignment_id=assignment.id,
                    description=f"Closing as a duplicate is acceptable too ({n})",
                )
                if n == 0:
                    decide_proposal(
                        session=session,
                        actor=lead,
                        proposal_id=proposal.id,
                        accept=False,
                        reason="the caller asked for a fix",
                    )
            set_gate(session=session, actor=lead, round_name=DEMO_ROUND, changes={"k_min": 3})
            adjudicate(
                session=session,
                actor=lead,
                task_version_id=assignments[1].task_version_id,
                decision="revise",
                reason="The verifier misses the reopen case",
                round_name=None,
            )
        with session_scope() as session:
            lead = user_by_username(session=session, username="lead")
            export_set(
                data_dir / "export",
                session=session,
                actor=lead,
                allow_tentative=True,
                reason="the tamper tests' export",
                bootstrap=20,
            )
        with session_scope() as session:  # a revision, left queued (gate_apply=queue)
            assignment = session.get(Assignment, assignments[1].id)
            expert = session.get(type(lead), assignment.expert_id)
            keys = [d.key for d in load_rubric().dimensions]
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores=dict.fromkeys(keys, 2),
                verdict="revise",
            )
        db_module.get_engine(url).dispose()
        settings_module.get_settings.cache_clear()
        db_module._engine_for.cache_clear()


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def world(request, tmp_path_factory):
    """(backend, a database to copy: a SQLite file or a PostgreSQL template, data folder)."""
    folder = tmp_path_factory.mktemp(f"tamper-{request.param}")
    if request.param == "sqlite":
        path = folder / "world.db"
        _build(f"sqlite:///{path}", folder)
        yield "sqlite", path, folder
        return
    admin = _admin()
    name = f"itsmreview_w_{uuid.uuid4().hex[:12]}"
    _pg(admin, f'CREATE DATABASE "{name}"')
    try:
        _build(_pg_url(name), folder)
        yield "postgresql", name, folder
    finally:
        _pg(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def db(world, tmp_path, monkeypatch):
    """A private copy of the world, with the settings pointing at it."""
    backend, source, folder = world
    if backend == "sqlite":
        path = tmp_path / "copy.db"
        shutil.copyfile(source, path)
        url = f"sqlite:///{path}"
        _point_at(monkeypatch, url, folder, gate_apply="queue")
        yield url
    else:
        admin = _admin()
        name = f"itsmreview_t_{uuid.uuid4().hex[:12]}"
        _pg(admin, f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
        url = _pg_url(name)
        _point_at(monkeypatch, url, folder, gate_apply="queue")
        yield url
        db_module.get_engine(url).dispose()
        _pg(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    settings_module.get_settings.cache_clear()
    db_module._engine_for.cache_clear()


def audit(expect_head=None):
    """The report of one process, checked equal to that of two sharing the work (as the
    CLI and the Ledger page run it on a long ledger)."""
    with session_scope() as session:
        alone = verify_ledger(session=session, expect_head=expect_head)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_module, "PARALLEL_MIN_ENTRIES", 0)
        with session_scope() as session:
            assert audit_module._split(session) is not None
            shared = verify_ledger(session=session, expect_head=expect_head, parallel=True)
    assert shared.as_dict() == alone.as_dict()
    return alone


def sql(*statements: str) -> None:
    with session_scope() as session:
        for statement in statements:
            session.exec(text(statement))


def scalar(statement: str):
    with session_scope() as session:
        return session.exec(text(statement)).scalar()


def head_text() -> str:
    with session_scope() as session:
        return ledger_head(session=session)["text"]


def forge_entry(kind: str, ident: str, action: str, payload: dict) -> int:
    """A well-hashed entry appended at the end of the chain, as an attacker who knows how
    the chain is built would append it."""
    with session_scope() as session:
        entry = append_entry(
            session=session,
            artifact_type=kind,
            artifact_id=ident,
            action=action,
            source_kind="expert",
            payload=payload,
        )
        return entry.seq


def found(report, kind: str, problem: str, seq: int | None = ...) -> list:
    hits = [
        f
        for f in report.findings
        if f.kind == kind and f.problem == problem and (seq is ... or f.seq == seq)
    ]
    assert hits, report.problems
    return hits


# a submitted human rating that is applied (chained) and replaced by no queued revision
HUMAN = (
    "(SELECT MIN(id) FROM ratings WHERE rater_kind = 'human' AND status = 'submitted'"
    " AND id NOT IN (SELECT rating_id FROM gate_pending)"
    " AND id NOT IN (SELECT replaced_id FROM gate_pending WHERE replaced_id IS NOT NULL))"
)
MODEL = "(SELECT MIN(id) FROM ratings WHERE rater_kind = 'model')"
QUEUED = "(SELECT MIN(rating_id) FROM gate_pending)"


def test_the_clean_world_verifies_clean_and_covers_every_table(db):
    report = audit(head_text())
    assert report.ok, report.problems
    assert report.queued == 1
    with session_scope() as session:
        kinds = set(session.exec(select(LedgerEntry.artifact_type)).all())
    assert {
        "rating",
        "task",
        "machine_check",
        "team_mapping",
        "resolution_proposal",
        "adjudication",
        "event_log",
        "review_round",
        "export",
    } <= kinds
    assert scalar("SELECT COUNT(*) FROM ratings WHERE rater_kind = 'model'") == 2
    assert scalar("SELECT COUNT(*) FROM machine_checks WHERE status = 'fail'") == 1
    assert report.objects_checked > scalar("SELECT COUNT(*) FROM ratings")


DELETED = {
    "human rating": (
        [
            f"DELETE FROM rating_scores WHERE rating_id = {HUMAN}",
            f"DELETE FROM ratings WHERE id = {HUMAN}",
        ],
        "rating",
    ),
    "model rating": (
        [
            f"UPDATE model_requests SET rating_id = NULL WHERE rating_id = {MODEL}",
            f"DELETE FROM rating_scores WHERE rating_id = {MODEL}",
            f"DELETE FROM ratings WHERE id = {MODEL}",
        ],
        "rating",
    ),
    "failed machine check": (["DELETE FROM machine_checks WHERE status = 'fail'"], "machine_check"),
    "team mapping version": (["DELETE FROM team_mappings"], "team_mapping"),
    "adjudication": (["DELETE FROM adjudications"], "adjudication"),
    "decided proposal": (
        ["DELETE FROM resolution_proposals WHERE status <> 'proposed'"],
        "resolution_proposal",
    ),
    "export": (["DELETE FROM exports"], "export"),
}


@pytest.mark.parametrize("case", DELETED, ids=list(DELETED))
def test_a_deleted_object_is_named_by_the_entry_that_commits_to_it(db, case):
    statements, kind = DELETED[case]
    head = head_text()
    sql(*statements)
    for report in (audit(), audit(head)):
        assert report.chain_problem is None and report.expected_head_problem is None
        assert not report.ok
        hit = found(report, kind, "missing object")[0]
        assert hit.seq is not None and "does not exist" in hit.detail
        assert hit.text().startswith(kind.replace("_", " "))


EDITED = {
    "human rating verdict": (
        [f"UPDATE ratings SET verdict = 'reject' WHERE id = {HUMAN}"],
        "rating",
    ),
    "human rating score": (
        [f"UPDATE rating_scores SET value = 1 WHERE rating_id = {HUMAN}"],
        "rating",
    ),
    "model rating comment": (
        [f"UPDATE ratings SET comment = 'planted' WHERE id = {MODEL}"],
        "rating",
    ),
    "machine check passes": (
        ["UPDATE machine_checks SET status = 'pass' WHERE status = 'fail'"],
        "machine_check",
    ),
    "team mapping teams": (
        ['UPDATE team_mappings SET teams = \'{"G1": "Forged team"}\''],
        "team_mapping",
    ),
    "adjudication reason": (["UPDATE adjudications SET reason = 'because'"], "adjudication"),
    "proposal description": (
        ["UPDATE resolution_proposals SET description = 'Delete the ticket'"],
        "resolution_proposal",
    ),
    "event log counts": (["UPDATE event_logs SET n_events = n_events + 1"], "event_log"),
    "gate": (["UPDATE review_rounds SET approval = '{\"k_min\": 1}'"], "review_round"),
    "export manifest": (["UPDATE exports SET content_hash = '" + "f" * 64 + "'"], "export"),
    "task version content": (
        ["UPDATE task_versions SET instruction = 'Delete every ticket'"],
        "task",
    ),
}


@pytest.mark.parametrize("case", EDITED, ids=list(EDITED))
def test_an_edited_object_differs_from_its_entry(db, case):
    statements, kind = EDITED[case]
    sql(*statements)
    report = audit()
    assert report.chain_problem is None and not report.ok
    hits = found(report, kind, "content mismatch")
    assert any(f"differs from what ledger entry {h.seq} commits to" in h.detail for h in hits)


def test_a_team_mapping_rewritten_with_its_own_hash_still_differs_from_its_entry(db):
    from itsmreview.ledger.chain import content_digest

    teams = {"G1": "Forged team"}
    with session_scope() as session:
        attribute = session.exec(text("SELECT attribute FROM team_mappings")).scalar()
    digest = content_digest({"attribute": attribute, "teams": teams, "levels": {}})
    sql(
        f"UPDATE team_mappings SET teams = '{json.dumps(teams)}', levels = '{{}}',"
        f" content_sha256 = '{digest}'"
    )
    hit = found(audit(), "team_mapping", "content mismatch")[0]
    assert hit.ident.endswith("@v1")


FLIPPED = {
    "proposal decision": (
        ["UPDATE resolution_proposals SET status = 'accepted' WHERE status = 'dismissed'"],
        "resolution_proposal",
        "recorded dismissed",
    ),
    "task status": (
        ["UPDATE tasks SET status = 'approved' WHERE status <> 'approved'"],
        "task",
        "its newest version",
    ),
    "task version status": (
        [
            "UPDATE task_versions SET status = 'in_review' WHERE id ="
            " (SELECT MIN(id) FROM task_versions WHERE status NOT IN ('draft', 'in_review'))"
        ],
        "task",
        "recorded",
    ),
}


@pytest.mark.parametrize("case", FLIPPED, ids=list(FLIPPED))
def test_a_flipped_status_is_checked_against_the_recorded_decisions(db, case):
    statements, kind, says = FLIPPED[case]
    sql(*statements)
    report = audit()
    assert not report.ok
    hits = found(report, kind, "status mismatch")
    assert any(says in h.detail for h in hits), report.problems


FORGED_OBJECTS = {
    "machine check": (
        [
            'INSERT INTO machine_checks (task_version_id, "check", status, summary, details,'
            " tool, imported_at) SELECT task_version_id, 'structure', 'pass', '', '{}', 'x',"
            " imported_at FROM machine_checks"
        ],
        "machine_check",
    ),
    "team mapping version": (
        [
            "INSERT INTO team_mappings (log_name, attribute, version, teams, levels,"
            " source_kind, reference, content_sha256, created_at) SELECT log_name, attribute,"
            " version + 1, teams, levels, source_kind, reference, content_sha256, created_at"
            " FROM team_mappings"
        ],
        "team_mapping",
    ),
    "export": (
        [
            "INSERT INTO exports (name, format, task_filter, task_count, content_hash, path,"
            " manifest, created_at) SELECT 'forged', format, task_filter, task_count,"
            " content_hash, path, manifest, created_at FROM exports"
        ],
        "export",
    ),
    "adjudication": (
        [
            "INSERT INTO adjudications (round_id, task_version_id, lead_id, decision, reason,"
            " created_at) SELECT round_id, task_version_id, lead_id, 'accept', 'forged',"
            " created_at FROM adjudications"
        ],
        "adjudication",
    ),
    "proposal decision": (
        ["UPDATE resolution_proposals SET status = 'accepted' WHERE status = 'proposed'"],
        "resolution_proposal",
    ),
    "rating": (
        [
            "INSERT INTO ratings (assignment_id, round_id, task_version_id, expert_id,"
            " rubric_id, revision, is_current, status, verdict, flags, comment, rater_kind,"
            " created_at, submitted_at, score_vector) SELECT assignment_id, round_id,"
            " task_version_id, expert_id, rubric_id, revision + 10, false, status, 'reject',"
            f" flags, 'forged', rater_kind, created_at, submitted_at, NULL FROM ratings"
            f" WHERE id = {HUMAN}"
        ],
        "rating",
    ),
}


@pytest.mark.parametrize("case", FORGED_OBJECTS, ids=list(FORGED_OBJECTS))
def test_a_forged_object_has_no_entry(db, case):
    statements, kind = FORGED_OBJECTS[case]
    sql(*statements)
    report = audit()
    hit = found(report, kind, "object without entry")[0]
    assert hit.seq is None and "no ledger entry commits to it" in hit.detail


FORGED_ENTRIES = {
    "rating": ("rating", "999999", "submit"),
    "model rating": ("rating", "999998", "model-rate"),
    "machine check": ("machine_check", "999999", "check:pass"),
    "team mapping": ("team_mapping", "nolog:org:group@v7", "map-teams"),
    "adjudication": ("adjudication", "999999", "adjudicate"),
    "proposal decision": ("resolution_proposal", "999999", "accepted"),
    "task version": ("task", "no-such-task@v1", "import"),
    "task decision": ("task", "no-such-task@v1", "status:approved"),
    "event log": ("event_log", "no-such-log@1", "import"),
    "gate": ("review_round", "No such round", "gate"),
}


@pytest.mark.parametrize("case", FORGED_ENTRIES, ids=list(FORGED_ENTRIES))
def test_a_forged_entry_names_an_object_that_does_not_exist(db, case):
    kind, ident, action = FORGED_ENTRIES[case]
    seq = forge_entry(kind, ident, action, {"content_sha256": "0" * 64, "content_hash": "0" * 64})
    report = audit()
    assert report.chain_problem is None  # well hashed: the chain alone cannot tell
    hit = found(report, kind, "missing object", seq=seq)[0]
    assert hit.ident == ident


QUEUED_EDITS = {
    "scores": f"UPDATE rating_scores SET value = 5 WHERE rating_id = {QUEUED}",
    "verdict": f"UPDATE ratings SET verdict = 'accept' WHERE id = {QUEUED}",
    "packed vector": None,
}


@pytest.mark.parametrize("case", QUEUED_EDITS, ids=list(QUEUED_EDITS))
def test_a_queued_rating_changed_before_the_gate_is_held_and_named(db, case):
    from itsmreview.review.gate import work as gatework

    rating_id = scalar(f"SELECT {QUEUED}")
    if case == "packed vector":  # the scores rows and the vector disagree
        # the scores and the queued entry's digest forged to agree: only the packed vector
        # the gate reads still says what was submitted
        sql(QUEUED_EDITS["scores"])
        row = scalar(f"SELECT entry FROM gate_pending WHERE rating_id = {rating_id}")
        entry = json.loads(row) if isinstance(row, str) else row
        from itsmreview.ledger.chain import content_digest
        from itsmreview.review.commitments import rating_content
        from itsmreview.review.models import GatePending, Rating, RatingScore

        with session_scope() as session:
            rating = session.get(Rating, rating_id)
            scores = {
                s.dimension: s.value
                for s in session.exec(
                    select(RatingScore).where(RatingScore.rating_id == rating_id)
                ).all()
            }
            entry["payload"]["content_sha256"] = content_digest(rating_content(rating, scores))
            pending = session.exec(
                select(GatePending).where(GatePending.rating_id == rating_id)
            ).one()
            pending.entry = dict(entry)
            session.add(pending)
    else:
        sql(QUEUED_EDITS[case])
    report = audit()
    hit = found(report, "rating", "queued rating changed")[0]
    assert hit.ident == str(rating_id)
    gatework.apply_pending(engine=db_module.get_engine())
    held = scalar(f"SELECT held_reason FROM gate_pending WHERE rating_id = {rating_id}")
    assert held and f"rating {rating_id} changed after its submit" in held
    chained = scalar(
        "SELECT COUNT(*) FROM ledger_entries WHERE artifact_type = 'rating'"
        f" AND artifact_id = '{rating_id}'"
    )
    assert chained == 0  # never chained as genuine
    again = found(audit(), "rating", "queued rating changed")[0]
    assert "the gate holds it" in again.detail


def test_an_untouched_queued_rating_is_applied_and_chained(db):
    from itsmreview.review.gate import work as gatework

    rating_id = scalar(f"SELECT {QUEUED}")
    assert gatework.apply_pending(engine=db_module.get_engine()) == 1
    assert scalar("SELECT COUNT(*) FROM gate_pending") == 0
    report = audit()
    assert report.ok and report.queued == 0, report.problems
    assert (
        scalar(
            "SELECT COUNT(*) FROM ledger_entries WHERE artifact_type = 'rating'"
            f" AND artifact_id = '{rating_id}'"
        )
        == 1
    )


def test_the_cli_names_each_problem_and_exits_non_zero(db):
    head = head_text()
    sql(
        "DELETE FROM machine_checks WHERE status = 'fail'",
        'UPDATE team_mappings SET levels = \'{"G1": "L9"}\'',
    )
    runner = CliRunner()
    result = runner.invoke(app, ["ledger", "verify", "--expect-head", head])
    assert result.exit_code == 1, result.output
    assert "problem: machine check" in result.output and "does not exist" in result.output
    assert "problem: team mapping" in result.output
    as_json = runner.invoke(app, ["ledger", "verify", "--json"])
    assert as_json.exit_code == 1
    findings = json.loads(as_json.stdout[: as_json.stdout.rindex("}") + 1])["findings"]
    assert {(f["kind"], f["problem"]) for f in findings} == {
        ("machine_check", "missing object"),
        ("team_mapping", "content mismatch"),
    }
    assert all(isinstance(f["seq"], int) for f in findings)


def test_an_entry_that_commits_to_no_content_covers_nothing(db):
    """A forged rating 'covered' by a well-hashed entry without a content commitment is
    still a rating without entry."""
    sql(FORGED_OBJECTS["rating"][0][0])
    forged = scalar("SELECT MAX(id) FROM ratings")
    forge_entry("rating", str(forged), "submit", {"task_version_id": 1})
    hit = found(audit(), "rating", "object without entry")[0]
    assert hit.ident == str(forged)


@pytest.mark.parametrize("tamper", ["edit", "remove"])
def test_a_break_is_found_at_the_same_entry_wherever_the_second_process_begins(
    db, monkeypatch, tamper
):
    """The second process checks a middle range of the entries (hashes and objects), the
    first those before and after it: a break just before, at or after where the range
    begins, and an expected head inside it, are reported as one process reports them."""
    newest = scalar("SELECT MAX(seq) FROM ledger_entries")
    seq = newest // 2
    wrong_head = f"{seq + 5}:{'0' * 64}"
    if tamper == "edit":
        sql(f"UPDATE ledger_entries SET reference = 'edited' WHERE seq = {seq}")
    else:
        sql(f"DELETE FROM ledger_entries WHERE seq = {seq}")
    with session_scope() as session:
        alone = verify_ledger(session=session, expect_head=wrong_head)
    assert alone.broken_at == (seq if tamper == "edit" else seq + 1)
    assert "not the expected" in alone.expected_head_problem
    split = audit_module._split
    monkeypatch.setattr(audit_module, "PARALLEL_MIN_ENTRIES", 0)
    for begins in (seq - 2, seq - 1, seq, seq + 1):
        monkeypatch.setattr(
            audit_module, "_split", lambda s, b=begins: (split(s)[0], (b, split(s)[1][1]))
        )
        with session_scope() as session:
            shared = verify_ledger(session=session, expect_head=wrong_head, parallel=True)
        assert shared.as_dict() == alone.as_dict(), begins


def test_the_second_process_may_be_spawned_as_under_the_app(db, monkeypatch):
    """Where threads run (the app), the second process is spawned, not forked: it imports
    what it needs and opens the database by its URL (a password included)."""
    import multiprocessing

    sql("DELETE FROM adjudications WHERE id = (SELECT MIN(id) FROM adjudications)")
    with session_scope() as session:
        alone = verify_ledger(session=session)
    monkeypatch.setattr(audit_module, "PARALLEL_MIN_ENTRIES", 0)
    monkeypatch.setattr(
        audit_module, "second_process_context", lambda: multiprocessing.get_context("spawn")
    )
    with session_scope() as session:
        shared = verify_ledger(session=session, parallel=True)
    assert not shared.ok
    found(shared, "adjudication", "missing object")
    assert shared.as_dict() == alone.as_dict()


def test_a_database_in_memory_or_a_short_ledger_is_checked_in_one_process(db, monkeypatch):
    with session_scope() as session:
        assert audit_module._split(session) is None  # the demo's ledger is short
        monkeypatch.setattr(audit_module, "PARALLEL_MIN_ENTRIES", 0)
        assert audit_module._split(session) is not None
        monkeypatch.setattr(db_module.os, "cpu_count", lambda: 1)
        assert audit_module._split(session) is None
    from itsmreview.db import create_db_engine
    from sqlmodel import Session

    monkeypatch.setattr(db_module.os, "cpu_count", lambda: 2)
    with Session(create_db_engine("sqlite://")) as session:
        assert audit_module._split(session) is None
