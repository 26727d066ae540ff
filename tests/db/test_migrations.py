import json

from alembic import command
from alembic.util.exc import CommandError
from itsmreview.db import (
    HEAD_REVISION,
    alembic_config,
    create_db_engine,
    current_revision,
    upgrade_database,
)
from itsmreview.schema import metadata
from sqlalchemy import inspect


def test_upgrade_from_empty_creates_every_table_and_check_finds_no_drift(empty_database_url):
    engine = create_db_engine(empty_database_url)
    try:
        assert current_revision(engine) is None
        upgrade_database(engine)
        assert current_revision(engine) is not None
        tables = set(inspect(engine).get_table_names())
        assert set(metadata.tables) <= tables
        with engine.begin() as connection:
            config = alembic_config(empty_database_url)
            config.attributes["connection"] = connection
            command.check(config)  # raises on any difference between models and schema
    finally:
        engine.dispose()


def test_check_detects_drift(empty_database_url):
    engine = create_db_engine(empty_database_url)
    try:
        upgrade_database(engine)
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE exports")
        with engine.begin() as connection:
            config = alembic_config(empty_database_url)
            config.attributes["connection"] = connection
            try:
                command.check(config)
            except CommandError as exc:
                assert "exports" in str(exc)
            else:
                raise AssertionError("alembic check missed a dropped table")
    finally:
        engine.dispose()


def test_upgrade_twice_is_a_no_op(engine):
    before = current_revision(engine)
    upgrade_database(engine)
    assert current_revision(engine) == before


def test_decisions_move_to_the_version_that_was_reviewed(empty_database_url):
    """Before 0006 the status was the task's: an approved task re-imported as version 2 read
    as approved. After it, version 1 keeps the approval and the task reads as unreviewed."""
    from sqlalchemy import text

    engine = create_db_engine(empty_database_url)
    try:
        upgrade_database(engine, "0005")
        with engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO users (id, username, display_name, role, password_hash, expertise,"
                    " active, created_at, session_epoch) VALUES (1, 'lead', 'Lead', 'lead', 'x',"
                    " '[]', true, '2026-01-01', 0)"
                )
            )
            c.execute(
                text(
                    "INSERT INTO rubrics (id, name, version, title, definition, content_hash,"
                    " created_at) VALUES (1, 'r', 1, 'R', '{}', 'h', '2026-01-01')"
                )
            )
            for task_id, status in ((1, "approved"), (2, "rejected"), (3, "draft")):
                c.execute(
                    text(
                        "INSERT INTO tasks (id, external_id, title, persona, track, status,"
                        " created_at, updated_at) VALUES (:id, :ext, 'T', 'P', 'single-agent',"
                        " :status, '2026-01-01', '2026-01-01')"
                    ),
                    {"id": task_id, "ext": f"t{task_id}", "status": status},
                )
            versions = [(10, 1, 1), (11, 1, 2), (20, 2, 1), (30, 3, 1)]
            for version_id, task_id, number in versions:
                c.execute(
                    text(
                        "INSERT INTO task_versions (id, task_id, version, content_hash, title,"
                        " persona, track, source_format, instruction, environment,"
                        " ground_truth, verifier, tags, source, provenance, extra, created_at)"
                        " VALUES (:id, :task, :n, :hash, '', '', '', 'native', 'x', '', '', '',"
                        " '[]', '{}', '[]', '{}', '2026-01-01')"
                    ),
                    {"id": version_id, "task": task_id, "n": number, "hash": f"h{version_id}"},
                )
            c.execute(
                text(
                    "INSERT INTO review_rounds (id, name, rubric_id, k, status,"
                    " reservation_minutes, approval, created_at, created_by_id)"
                    " VALUES (1, 'R', 1, 3, 'open', 60, '{}', '2026-01-01', 1)"
                )
            )
            for round_task_id, version_id in ((1, 10), (2, 20)):
                c.execute(
                    text(
                        "INSERT INTO round_tasks (id, round_id, task_version_id, priority)"
                        " VALUES (:id, 1, :v, 0)"
                    ),
                    {"id": round_task_id, "v": version_id},
                )
        upgrade_database(engine, "0006")
        with engine.connect() as c:
            versions = dict(c.execute(text("SELECT id, status FROM task_versions")).all())
            tasks = dict(c.execute(text("SELECT external_id, status FROM tasks")).all())
        assert versions == {10: "approved", 11: "draft", 20: "rejected", 30: "draft"}
        assert tasks == {"t1": "draft", "t2": "rejected", "t3": "draft"}
    finally:
        engine.dispose()


def test_ratings_and_adjudications_recorded_before_commitments_get_commit_entries(
    empty_database_url, monkeypatch
):
    """A 0006 database whose rating and adjudication entries carry no content hash: the
    upgrade appends one `commit` entry for each, after which the ledger verifies and an edit
    of either is named."""
    from datetime import UTC, datetime

    from itsmreview import settings as settings_module
    from itsmreview.catalog.native import NativeTask
    from itsmreview.db import _engine_for, session_scope
    from itsmreview.ledger import chain
    from itsmreview.ledger.evidence.service import verify_ledger
    from sqlalchemy import text

    engine = create_db_engine(empty_database_url)
    native = {"id": "t1", "title": "T", "persona": "P", "track": "single-agent", "instruction": "x"}
    digest = NativeTask.model_validate(native).content_hash()
    rows = {
        "users": "INSERT INTO users (id, username, display_name, role, password_hash, expertise,"
        " active, created_at, session_epoch) VALUES (1, 'e1', 'E', 'expert', 'x', '[]', true,"
        " '2026-01-01', 0)",
        "rubrics": "INSERT INTO rubrics (id, name, version, title, definition, content_hash,"
        " created_at) VALUES (1, 'r', 1, 'R', '{}', 'h', '2026-01-01')",
        "tasks": "INSERT INTO tasks (id, external_id, title, persona, track, status, created_at,"
        " updated_at) VALUES (1, 't1', 'T', 'P', 'single-agent', 'in_review', '2026-01-01',"
        " '2026-01-01')",
        "task_versions": "INSERT INTO task_versions (id, task_id, version, content_hash, title,"
        " persona, track, source_format, instruction, environment, ground_truth, verifier, tags,"
        f" source, provenance, extra, created_at, status) VALUES (1, 1, 1, '{digest}', 'T', 'P',"
        " 'single-agent', 'native', 'x', '', '', '', '[]', '{}', '[]', '{}', '2026-01-01',"
        " 'in_review')",
        "review_rounds": "INSERT INTO review_rounds (id, name, rubric_id, k, status,"
        " reservation_minutes, approval, created_at, created_by_id) VALUES (1, 'R', 1, 3,"
        " 'open', 60, '{}', '2026-01-01', 1)",
        "assignments": "INSERT INTO assignments (id, round_id, task_version_id, expert_id,"
        " status, created_at) VALUES (1, 1, 1, 1, 'submitted', '2026-01-01')",
        "ratings": "INSERT INTO ratings (id, assignment_id, round_id, task_version_id, expert_id,"
        " rubric_id, revision, is_current, status, verdict, flags, comment, rater_kind,"
        " created_at) VALUES (1, 1, 1, 1, 1, 1, 1, true, 'submitted', 'accept', '[]', 'ok',"
        " 'human', '2026-01-01')",
        "rating_scores": "INSERT INTO rating_scores (rating_id, dimension, value)"
        " VALUES (1, 'realism', 4.0)",
        "adjudications": "INSERT INTO adjudications (id, round_id, task_version_id, lead_id,"
        " decision, reason, created_at) VALUES (1, 1, 1, 1, 'accept', 'fine', '2026-01-01')",
    }
    try:
        upgrade_database(engine, "0006")
        with engine.begin() as c:
            for statement in rows.values():
                c.execute(text(statement))
            previous = chain.GENESIS_HASH
            old = [
                ("task", "t1@v1", "import", {"content_hash": digest}),
                ("rating", "1", "submit", {"task_version_id": 1, "round": "R"}),
            ]
            for seq, (kind, ident, action, payload) in enumerate(old, start=1):
                created = datetime(2026, 1, 1, tzinfo=UTC)
                content = {
                    "seq": seq,
                    "created_at": created.isoformat(timespec="microseconds"),
                    "artifact_type": kind,
                    "artifact_id": ident,
                    "field": None,
                    "source_kind": "system",
                    "reference": "",
                    "action": action,
                    "actor_id": None,
                    "payload": payload,
                }
                entry_hash = chain.link(content, previous)
                c.execute(
                    text(
                        "INSERT INTO ledger_entries (seq, created_at, artifact_type,"
                        " artifact_id, field, source_kind, reference, action, actor_id, payload,"
                        " prev_hash, entry_hash) VALUES (:seq, :created, :kind, :ident, NULL,"
                        " 'system', '', :action, NULL, :payload, :prev, :hash)"
                    ),
                    {
                        "seq": seq,
                        "created": "2026-01-01 00:00:00.000000"
                        if engine.dialect.name == "sqlite"
                        else created,
                        "kind": kind,
                        "ident": ident,
                        "action": action,
                        "payload": json.dumps(payload),
                        "prev": previous,
                        "hash": entry_hash,
                    },
                )
                previous = entry_hash
        upgrade_database(engine)
        monkeypatch.setenv("ITSMREVIEW_DATABASE_URL", empty_database_url)
        settings_module.get_settings.cache_clear()
        _engine_for.cache_clear()
        with session_scope() as session:
            report = verify_ledger(session=session)
        assert report.ok, (report.chain_problem, report.problems)
        assert report.entries == 4  # two old entries, two commits
        with engine.begin() as c:
            c.execute(text("UPDATE ratings SET comment = 'changed'"))
            c.execute(text("UPDATE adjudications SET decision = 'reject'"))
        with session_scope() as session:
            problems = verify_ledger(session=session).problems
        assert [p.split(":")[0] for p in problems] == [
            "rating 1 (task version 1)",
            "adjudication 1 (task version 1)",
        ]
    finally:
        settings_module.get_settings.cache_clear()
        _engine_for.cache_clear()
        engine.dispose()


def test_head_revision_constant_names_the_newest_migration():
    """`ensure_current` skips Alembic when the database is at HEAD_REVISION: it must be the
    newest script's revision."""
    from alembic.script import ScriptDirectory
    from itsmreview.db import HEAD_REVISION

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == (
        HEAD_REVISION
    )


def _round_of_one_task(*, experts: int, source: dict | None = None, definition=None) -> list:
    """SQL for `experts` experts (ids 1..n, e1..en), a rubric, one task with one version
    (source as given) and an open round R over it, as an old schema holds them."""
    users = ", ".join(
        f"({i}, 'e{i}', 'E', 'expert', 'x', '[]', true, '2026-01-01', 0)"
        for i in range(1, experts + 1)
    )
    return [
        "INSERT INTO users (id, username, display_name, role, password_hash, expertise, active,"
        f" created_at, session_epoch) VALUES {users}",
        "INSERT INTO rubrics (id, name, version, title, definition, content_hash, created_at)"
        f" VALUES (1, 'r', 1, 'R', '{json.dumps(definition or {})}', 'h', '2026-01-01')",
        "INSERT INTO tasks (id, external_id, title, persona, track, status, created_at,"
        " updated_at) VALUES (1, 't1', 'T', 'P', 'single-agent', 'in_review', '2026-01-01',"
        " '2026-01-01')",
        "INSERT INTO task_versions (id, task_id, version, content_hash, title, persona, track,"
        " source_format, instruction, environment, ground_truth, verifier, tags, source,"
        " provenance, extra, created_at, status) VALUES (1, 1, 1, 'h', 'T', 'P', 'single-agent',"
        f" 'native', 'x', '', '', '', '[]', '{json.dumps(source or {})}', '[]', '{{}}',"
        " '2026-01-01', 'in_review')",
        "INSERT INTO review_rounds (id, name, rubric_id, k, status, reservation_minutes,"
        " approval, created_at, created_by_id) VALUES (1, 'R', 1, 3, 'open', 60, '{}',"
        " '2026-01-01', 1)",
    ]


def test_0009_fills_places_held_and_declared_variants_from_existing_rows(empty_database_url):
    """A 0008 database with a rated, a released and a reserved assignment and a task whose
    source declares two variants (one twice): the upgrade counts the places held and lists
    each declared variant once, keyed as the code keys it."""
    from itsmreview.sequences import sequence_key
    from sqlalchemy import text

    engine = create_db_engine(empty_database_url)
    source = {"log": "bpi", "variants": [["A", "B"], ["A", "C"], ["A", "B"]]}
    statements = [
        *_round_of_one_task(experts=3, source=source),
        "INSERT INTO round_tasks (id, round_id, task_version_id, priority) VALUES (1, 1, 1, 0)",
        "INSERT INTO assignments (id, round_id, task_version_id, expert_id, status, created_at)"
        " VALUES (1, 1, 1, 1, 'submitted', '2026-01-01'), (2, 1, 1, 2, 'released',"
        " '2026-01-01'), (3, 1, 1, 3, 'reserved', '2026-01-01')",
    ]
    try:
        upgrade_database(engine, "0008")
        with engine.begin() as c:
            for statement in statements:
                c.execute(text(statement))
        upgrade_database(engine)
        with engine.connect() as c:
            held = c.execute(text("SELECT places_held FROM round_tasks")).scalar_one()
            keys = c.execute(
                text("SELECT sequence_key FROM task_version_variants ORDER BY sequence_key")
            ).scalars()
            assert held == 2
            assert list(keys) == sorted([sequence_key(["A", "B"]), sequence_key(["A", "C"])])
    finally:
        engine.dispose()


def test_0015_packs_the_scores_of_existing_ratings(empty_database_url):
    """A 0014 database with a submitted rating scored on one of its rubric's two dimensions
    and a draft: the upgrade packs the submitted one in the rubric's order, NaN where
    unscored, and leaves the draft alone."""
    from itsmreview.review.scorevector import pack, unpack
    from sqlalchemy import text

    engine = create_db_engine(empty_database_url)
    definition = {"dimensions": [{"key": "realism"}, {"key": "clarity"}]}
    statements = [
        *_round_of_one_task(experts=1, definition=definition),
        "INSERT INTO assignments (id, round_id, task_version_id, expert_id, status, created_at)"
        " VALUES (1, 1, 1, 1, 'submitted', '2026-01-01')",
        "INSERT INTO ratings (id, assignment_id, round_id, task_version_id, expert_id, rubric_id,"
        " revision, is_current, status, flags, comment, rater_kind, created_at) VALUES"
        " (1, 1, 1, 1, 1, 1, 1, true, 'submitted', '[]', '', 'human', '2026-01-01'),"
        " (2, 1, 1, 1, 1, 1, 0, false, 'draft', '[]', '', 'human', '2026-01-01')",
        "INSERT INTO rating_scores (id, rating_id, dimension, value) VALUES (1, 1, 'clarity', 4),"
        " (2, 2, 'realism', 2)",
    ]
    try:
        upgrade_database(engine, "0014")
        with engine.begin() as c:
            for statement in statements:
                c.execute(text(statement))
        upgrade_database(engine)
        with engine.connect() as c:
            rows = dict(c.execute(text("SELECT id, score_vector FROM ratings")).all())
        assert bytes(rows[1]) == pack(["realism", "clarity"], {"clarity": 4.0})
        assert unpack([rows[1]], 2)[0, 1] == 4.0 and rows[2] is None
    finally:
        engine.dispose()


def test_processes_that_migrate_a_new_database_at_once_take_turns(empty_database_url):
    """Two replicas started together on a new database: both succeed, one after the other
    (an advisory lock on PostgreSQL, the write lock taken first on SQLite)."""
    import subprocess
    import sys

    script = (
        "from itsmreview.db import create_db_engine, ensure_current; import sys; "
        "ensure_current(create_db_engine(sys.argv[1]))"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script, empty_database_url]) for _ in range(3)
    ]
    assert [p.wait(timeout=300) for p in processes] == [0, 0, 0]
    engine = create_db_engine(empty_database_url)
    try:
        assert current_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()
