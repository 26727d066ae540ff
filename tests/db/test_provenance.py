"""The ledger as evidence, on both databases: every tamper case an attacker with database
access might try is detected and names the object; a head kept elsewhere catches truncation
and a re-forged tail; sources of any artifact can be recorded; the summary and PROV export."""

import json

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.importing import import_path
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.ledger import chain
from itsmreview.ledger.evidence.service import (
    Reference,
    artifact_names,
    ledger_head,
    provenance_card,
    provenance_summary,
    record_source,
    verify_ledger,
)
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import entry_content
from itsmreview.review.gate.service import set_gate
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.repair.adjudication import adjudicate
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlalchemy import text
from sqlmodel import select
from typer.testing import CliRunner


@pytest.fixture
def history(configured, tmp_path):
    """Two tasks, one round, three experts' ratings, a gate change and an adjudication."""
    tasks = [
        {
            "id": f"t{i}",
            "title": f"T{i}",
            "persona": "L1",
            "track": "single-agent",
            "instruction": f"Handle incident {i}",
            "provenance": [{"field": "instruction", "source": "logs", "reference": "BPI 2013"}],
        }
        for i in (1, 2)
    ]
    bundle = tmp_path / "tasks.json"
    bundle.write_text(json.dumps(tasks))
    with session_scope() as session:
        lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
        experts = [
            create_user(session=session, username=f"e{i}", role="expert", password="pw-123456")[0]
            for i in range(1, 4)
        ]
        import_path(bundle, session=session)
        rubric = ensure_rubric(load_rubric(), session=session)
        from itsmreview.catalog.models import TaskVersion

        versions = sorted(v.id for v in session.exec(select(TaskVersion)).all())
        create_round(
            session=session, actor=lead, name="R", rubric=rubric, task_version_ids=versions, k=3
        )
        keys = [d.key for d in load_rubric().dimensions]
        for n, expert in enumerate(experts):
            while (a := claim_next(session=session, actor=expert)) is not None:
                score = 5 if a.task_version_id == versions[0] else 2 + (n == 2)
                submit_rating(
                    session=session,
                    actor=expert,
                    assignment_id=a.id,
                    scores=dict.fromkeys(keys, score),
                    verdict="accept",
                )
        set_gate(session=session, actor=lead, round_name="R", changes={"k_min": 3})
        adjudicate(
            session=session,
            actor=lead,
            task_version_id=versions[1],
            decision="revise",
            reason="Verifier misses the reopen case",
            round_name="R",
        )
    return {"versions": versions}


def audit(expect_head=None):
    with session_scope() as session:
        return verify_ledger(session=session, expect_head=expect_head)


def sql(statement, **params):
    with session_scope() as session:
        session.exec(text(statement).bindparams(**params))


def head_text():
    with session_scope() as session:
        return ledger_head(session=session)["text"]


def test_an_untouched_ledger_verifies_and_ends_on_its_head(history):
    report = audit(head_text())
    assert report.ok, report.problems
    assert report.objects_checked >= 6 + 2 + 1 + 1
    assert f"{report.head[0]}:{report.head[1]}" == head_text()


@pytest.mark.parametrize(
    "statement, named",
    [
        (
            "UPDATE rating_scores SET value = 1 WHERE rating_id = (SELECT MIN(id) FROM ratings)",
            "rating",
        ),
        (
            "UPDATE ratings SET verdict = 'reject' WHERE id = (SELECT MIN(id) FROM ratings)",
            "rating",
        ),
        (
            "UPDATE ratings SET comment = 'planted' WHERE id = (SELECT MAX(id) FROM ratings)",
            "rating",
        ),
        (
            "UPDATE task_versions SET instruction = 'Delete every ticket' WHERE version = 1 "
            "AND task_id = (SELECT id FROM tasks WHERE external_id = 't1')",
            "task version t1@v1",
        ),
        (
            "UPDATE task_versions SET status = 'approved' WHERE task_id = "
            "(SELECT id FROM tasks WHERE external_id = 't2')",
            "task version t2@v1",
        ),
        ("UPDATE adjudications SET reason = 'because'", "adjudication"),
        ("UPDATE review_rounds SET approval = '{\"k_min\": 1}'", "gate of round R"),
    ],
    ids=["scores", "verdict", "comment", "instruction", "status", "adjudication", "gate"],
)
def test_each_content_change_is_detected_and_named(history, statement, named):
    sql(statement)
    report = audit()
    assert report.chain_problem is None  # the chain itself is intact ...
    assert not report.ok  # ... but the content no longer matches it
    assert any(p.startswith(named) for p in report.problems), report.problems


def test_truncation_is_caught_by_the_missing_entries_and_the_expected_head(history):
    head = head_text()
    sql("DELETE FROM ledger_entries WHERE seq > (SELECT MAX(seq) - 3 FROM ledger_entries)")
    report = audit(head)
    assert report.chain_problem is None
    assert "is missing" in report.expected_head_problem
    assert any("no ledger entry" in p or "never recorded" in p for p in report.problems)


def test_a_reforged_tail_is_caught_only_by_the_expected_head(history):
    """An attacker rewrites an entry and re-hashes everything after it: the chain verifies,
    the content matches (they edited only what the entry says), the head kept elsewhere
    does not."""
    head = head_text()
    with session_scope() as session:
        entries = list(session.exec(select(LedgerEntry).order_by(LedgerEntry.seq)).all())
        target = next(e for e in entries if e.action == "declare-provenance")
        target.reference = "invented source"
        previous = chain.GENESIS_HASH
        for entry in entries:
            if entry.seq >= target.seq:
                entry.prev_hash = previous
                entry.entry_hash = chain.link(entry_content(entry), previous)
            previous = entry.entry_hash
    report = audit()
    assert report.ok  # nothing inside the database can tell
    with_head = audit(head)
    assert "not the expected" in with_head.expected_head_problem


def test_an_edited_entry_breaks_the_chain_at_that_entry(history):
    with session_scope() as session:
        seq = session.exec(
            select(LedgerEntry.seq).where(LedgerEntry.action == "submit").limit(1)
        ).one()
    sql("UPDATE ledger_entries SET reference = 'edited' WHERE seq = :seq", seq=seq)
    report = audit()
    assert report.broken_at == seq and "edited" in report.chain_problem


def test_a_rating_and_its_entry_commit_or_roll_back_together(history):
    with session_scope() as session:
        before = session.exec(select(LedgerEntry.seq).order_by(LedgerEntry.seq.desc())).first()
    with pytest.raises(RuntimeError), session_scope() as session:
        record_source(
            session=session,
            actor=_lead(session),
            about="world:acme",
            field_name="org",
            kind="external",
            reference=Reference("CMDB"),
        )
        raise RuntimeError("the caller fails after the append")
    with session_scope() as session:
        after = session.exec(select(LedgerEntry.seq).order_by(LedgerEntry.seq.desc())).first()
    assert after == before
    assert audit().ok


def _lead(session):
    from itsmreview.accounts.queries import user_by_username

    return user_by_username(session=session, username="lead")


def test_a_source_is_recorded_about_a_task_log_or_rubric_picked_from_a_list(history):
    with session_scope() as session:
        lead = _lead(session)
        tasks = artifact_names(session=session, actor=lead, kind="task")
        logs = artifact_names(session=session, actor=lead, kind="log")
        rubrics = artifact_names(session=session, actor=lead, kind="rubric")
        free = artifact_names(session=session, actor=lead, kind="world")
    assert tasks == {"t1": "t1 · T1", "t2": "t2 · T2"}
    with session_scope() as session:  # searched by id or title, case-insensitive
        assert artifact_names(session=session, actor=_lead(session), kind="task", search="T2") == {
            "t2": "t2 · T2"
        }
    assert logs == {} and free is None
    assert list(rubrics) == [load_rubric().name]


def test_sources_of_any_artifact_are_recorded_with_structured_references(history):
    with session_scope() as session:
        lead = _lead(session)
        entry = record_source(
            session=session,
            actor=lead,
            about="world:acme-org",
            field_name="org_structure",
            kind="external",
            reference=Reference(
                "ServiceNow CMDB data model", "https://example.org/cmdb", "10.1234/cmdb.5", "Xanadu"
            ),
            note="teams and assignment groups",
        )
        assert entry.payload["reference"]["doi"] == "10.1234/cmdb.5"
        record_source(
            session=session,
            actor=lead,
            about="task:t1@v1",
            field_name="verifier",
            kind="external",
            reference=Reference("tau2-bench env_assertions"),
        )
        for about, error in (
            ("planet:x", InvalidInput),
            ("task:nope", NotFound),
            ("log:nope", NotFound),
            ("task:t1@v9", NotFound),
        ):
            with pytest.raises(error):
                record_source(
                    session=session,
                    actor=lead,
                    about=about,
                    field_name="f",
                    kind="logs",
                    reference=Reference("r"),
                )
        with pytest.raises(InvalidInput, match="source kind 'guess'"):
            record_source(
                session=session,
                actor=lead,
                about="world:w",
                field_name="f",
                kind="guess",
                reference=Reference("r"),
            )
        with pytest.raises(InvalidInput, match="is not an http"):
            record_source(
                session=session,
                actor=lead,
                about="world:w",
                field_name="f",
                kind="logs",
                reference=Reference("r", url="javascript:alert(1)"),
            )
        card = provenance_card(session=session, actor=lead, external_id="t1")
        summary = provenance_summary(session=session)
    assert list(card["field"]) == ["instruction", "verifier"]
    assert list(card["source"]) == ["logs", "external"]
    fields = {row["field"]: row for row in summary["fields"]}
    assert fields["instruction"]["logs"] == 2
    assert fields["verifier"]["external"] == 1 and fields["verifier"]["undeclared"] == 1
    assert fields["environment"]["undeclared"] == 2
    assert summary["activity"]["ratings"] == 6 and summary["activity"]["adjudications"] == 1
    assert audit().ok


def test_ledger_commands(history, tmp_path):
    runner = CliRunner()
    head = runner.invoke(app, ["ledger", "head"]).output.strip()
    ok = runner.invoke(app, ["ledger", "verify", "--expect-head", head])
    assert ok.exit_code == 0 and head in ok.output
    bad = runner.invoke(app, ["ledger", "verify", "--expect-head", "7:abc"])
    assert bad.exit_code == 1 and "SEQ:HASH" in bad.output
    added = runner.invoke(
        app,
        [
            "ledger",
            "add",
            "--about",
            "simulator:user-sim",
            "--field",
            "persona_prompts",
            "--kind",
            "expert",
            "--reference",
            "Workshop with L2 resolvers",
        ],
    )
    assert added.exit_code == 0, added.output
    summary = json.loads(runner.invoke(app, ["ledger", "summary", "--json"]).output)
    assert set(summary) >= {"fields", "totals", "activity", "per_log"}
    out = tmp_path / "ledger.prov.json"
    exported = runner.invoke(app, ["ledger", "export", str(out), "--format", "prov-json"])
    assert exported.exit_code == 0, exported.output
    prov = pytest.importorskip("prov.model")
    document = prov.ProvDocument.deserialize(content=out.read_text(), format="json")
    again = prov.ProvDocument.deserialize(content=document.serialize(format="json"), format="json")
    assert again == document and len(list(document.get_records())) > 30
    lines = tmp_path / "t1.jsonl"
    assert runner.invoke(app, ["ledger", "export", str(lines), "--task", "t1"]).exit_code == 0
    assert {json.loads(x)["artifact_id"].split("@")[0] for x in lines.read_text().splitlines()} == {
        "t1"
    }
    sql("UPDATE ratings SET verdict = 'reject' WHERE id = (SELECT MIN(id) FROM ratings)")
    tampered = runner.invoke(app, ["ledger", "verify"])
    assert tampered.exit_code == 1 and "problem: rating" in tampered.output


def test_realism_split_by_provenance(history):
    from itsmreview.ledger.evidence.service import realism_by_provenance

    with session_scope() as session:
        lead = _lead(session)
        for field_name in ("environment", "verifier"):
            record_source(
                session=session,
                actor=lead,
                about="task:t1",
                field_name=field_name,
                kind="logs",
                reference=Reference("BPI 2013 variant 3"),
            )
        split = realism_by_provenance(session=session, actor=lead, round_name="R")
    first = load_rubric().dimensions[0].label
    by_origin = split[(split["comparison"] == "provenance") & (split["dimension"] == first)]
    means = dict(zip(by_origin["group"], by_origin["mean"], strict=True))
    assert means["mostly from the logs"] == 5.0  # t1: three experts gave 5
    assert means["elsewhere"] == pytest.approx((2 + 2 + 3) / 3)  # t2: 2, 2 and 3
    assert set(split[split["comparison"] == "coverage"]["group"]) == {"no source variant"}


def test_filter_choices_walk_the_artifact_types_like_distinct(history):
    from itsmreview.ledger.evidence.queries import artifact_types

    with session_scope() as session:
        walked = artifact_types(session=session)
        distinct = sorted(set(session.exec(select(LedgerEntry.artifact_type)).all()))
    assert walked == distinct and len(walked) >= 3


def test_packed_scores_that_differ_from_the_score_rows_are_named(history):
    from itsmreview.review.models import Rating
    from itsmreview.review.scorevector import pack
    from sqlmodel import select

    with session_scope() as session:
        rating = session.exec(select(Rating).order_by(Rating.id)).first()
        width = len(rating.score_vector) // 8
        rating.score_vector = pack([str(i) for i in range(width)], {})  # every score NaN
        session.add(rating)
    report = audit()
    assert report.chain_problem is None and not report.ok
    assert report.problems == [
        f"rating {rating.id} (task version {rating.task_version_id}): its packed scores differ "
        "from its score rows"
    ]


def test_entries_from_before_content_commitments_name_their_object_only(history):
    """Adjudication and rating entries written before the ledger committed to content carry
    no digest (migration 0007 appended a `commit` entry after each): they must name an object
    that exists, and are not compared with it."""
    from itsmreview.ledger.service import append_entry

    with session_scope() as session:
        adjudication = session.exec(text("SELECT MIN(id) FROM adjudications")).scalar()
        rating = session.exec(text("SELECT MIN(id) FROM ratings")).scalar()
        for kind, ident, action in (
            ("adjudication", adjudication, "adjudicate"),
            ("rating", rating, "submit"),
            ("adjudication", 987654, "adjudicate"),
        ):
            append_entry(
                session=session,
                artifact_type=kind,
                artifact_id=ident,
                action=action,
                source_kind="expert",
                payload={"task_version_id": 1},
            )
    report = audit()
    assert [(f.kind, f.ident, f.problem) for f in report.findings] == [
        ("adjudication", "987654", "missing object")
    ]


@pytest.mark.parametrize(
    "row",
    [
        (
            1,
            "2026-11-01 00:00:00.000001",
            "rating",
            "12",
            None,
            "expert",
            "",
            "submit",
            3,
            '{"round": "R", "content_sha256": "ab", "n": 2}',
        ),
        (
            2,
            "2026-11-01 00:00:00.000002",
            "task",
            "café-ü@v1",
            "instruction",
            "logs",
            'synth: "quoted"\nline',
            "declare-provenance",
            None,
            "{}",
        ),
        (
            3,
            "2026-11-01 00:00:00.000003",
            "task",
            "t\\x",
            None,
            "system",
            "",
            "import",
            None,
            '{"nested": {"b": [1.5, null, true], "a": "\\u00e9"}, "emoji": "\\ud83d\\ude00"}',
        ),
    ],
)
def test_verify_hashes_an_entry_as_its_canonical_content(row):
    """verify writes an entry's content field by field; the text must be the canonical JSON
    of its content exactly (any other text would flag every entry, or none)."""
    from itsmreview.ledger.service import StoredEntry, content_text

    entry = StoredEntry((*row, "0" * 64, "1" * 64))
    assert content_text(entry) == chain.canonical_json(entry_content(entry, entry.created))
    assert json.loads(content_text(entry))["seq"] == row[0]
