"""A tab drawn before its account changed writes nothing (both backends).

A page keeps the user of its last full run (a fragment reruns alone, a tab stays open), so
every write checks its acting user again when it commits (`accounts.acting`): deactivated,
role changed or password reset (the session epoch moved) since the page was drawn, and the
write raises SessionEnded and stores nothing. A model rater never logs in, is never
activated and never gets a password."""

import pytest
from itsmreview.accounts.acting import SessionEnded, act_as
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import (
    SessionCheck,
    add_user,
    authenticate,
    create_user,
    require_role,
    reset_password,
    revalidate,
    set_active,
    set_role,
)
from itsmreview.catalog.models import TaskVersion
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.db import write_transaction
from itsmreview.errors import InvalidInput, PermissionDenied
from itsmreview.ledger.models import LedgerEntry
from itsmreview.review.models import Assignment, Rating, ResolutionProposal
from itsmreview.review.ratings.service import save_draft, submit_rating
from itsmreview.review.repair.adjudication import adjudicate
from itsmreview.review.repair.service import propose_resolution
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import assign_round, create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlalchemy import func
from sqlmodel import Session, select

PASSWORD = "the-right-password"
CHANGES = ["deactivate", "set-role", "reset-password"]


def _task(n: int) -> dict:
    return {
        "id": f"t{n}",
        "title": f"Task {n}",
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": f"Do {n}.",
    }


@pytest.fixture
def world(session):
    """An admin, a lead, three experts, round R of two tasks with k=2 that eva and tom hold,
    and round R2 of the same tasks where places are left to claim; committed."""
    made = {
        name: create_user(session=session, username=name, role=role, password=PASSWORD)[0]
        for name, role in [
            ("admin", "admin"),
            ("lead", "lead"),
            ("eva", "expert"),
            ("tom", "expert"),
            ("ann", "expert"),
        ]
    }
    import_tasks(parse_bundle([_task(0), _task(1)], "x"), session=session)
    versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()]
    rubric = ensure_rubric(load_rubric("itsm-realism"), session=session)
    review_round = create_round(
        session=session, actor=made["lead"], name="R", rubric=rubric, task_version_ids=versions, k=2
    )
    assign_round(
        session=session,
        actor=made["lead"],
        review_round=review_round,
        experts=[made["eva"], made["tom"]],
    )
    create_round(
        session=session, actor=made["lead"], name="R2", rubric=rubric, task_version_ids=versions
    )
    session.commit()
    return made, versions


def tab(user: User) -> User:
    """The user as an open tab holds them (`ui.auth.current_user`): a detached copy."""
    return User(
        id=user.id,
        username=user.username,
        display_name=user.display_name,
        role=Role(user.role),
        expertise=list(user.expertise),
        active=user.active,
        password_hash="",
        session_epoch=user.session_epoch,
    )


def change(engine, username: str, how: str) -> None:
    """An admin changes the account in another transaction (another browser)."""

    def work(session):
        admin = session.exec(select(User).where(User.username == "admin")).one()
        if how == "deactivate":
            set_active(session=session, actor=admin, username=username, active=False)
        elif how == "set-role":
            user = session.exec(select(User).where(User.username == username)).one()
            role = "expert" if user.role != Role.expert else "lead"
            set_role(session=session, actor=admin, username=username, role=role)
        else:
            reset_password(session=session, actor=admin, username=username)

    write_transaction(work, engine=engine)


def counts(engine) -> dict:
    """Rows a stale write could leave behind."""
    with Session(engine) as session:
        return {
            model.__name__: session.exec(select(func.count()).select_from(model)).one()
            for model in (Rating, ResolutionProposal, Assignment, LedgerEntry, User)
        }


def assignment_of(engine, username: str, version_id: int) -> int:
    with Session(engine) as session:
        return session.exec(
            select(Assignment.id)
            .join(User, User.id == Assignment.expert_id)
            .where(User.username == username, Assignment.task_version_id == version_id)
        ).one()


def _rubric_scores(engine) -> dict:
    """Every required dimension of the round's rubric at its top point."""
    from itsmreview.review.rubrics.service import load_rubric

    return {d.key: d.scale[1] for d in load_rubric("itsm-realism").dimensions if d.required}


EXPERT_WRITES = {
    "submit": lambda s, actor, a, scores: submit_rating(
        session=s, actor=actor, assignment_id=a, scores=scores, verdict="accept"
    ),
    "save draft": lambda s, actor, a, scores: save_draft(
        session=s, actor=actor, assignment_id=a, scores=scores, comment="half done"
    ),
    "propose": lambda s, actor, a, scores: propose_resolution(
        session=s, actor=actor, assignment_id=a, description="Closing as duplicate is fine."
    ),
    "claim": lambda s, actor, a, scores: claim_next(session=s, actor=actor, round_name="R2"),
}


@pytest.mark.parametrize("how", CHANGES)
@pytest.mark.parametrize("write", list(EXPERT_WRITES))
def test_a_stale_expert_tab_writes_nothing(engine, world, how, write):
    made, versions = world
    name = "eva"
    open_tab = tab(made[name])  # drawn before the change
    assignment = assignment_of(engine, "eva", versions[0])
    scores = _rubric_scores(engine)
    change(engine, name, how)
    before = counts(engine)
    with pytest.raises(SessionEnded, match="session has ended.*nothing was saved"):
        write_transaction(
            lambda s: EXPERT_WRITES[write](s, open_tab, assignment, scores), engine=engine
        )
    assert counts(engine) == before
    # the same write from a fresh tab of an unchanged expert goes through
    if write in ("submit", "save draft", "propose"):
        other = assignment_of(engine, "tom", versions[0])
        write_transaction(
            lambda s: EXPERT_WRITES[write](s, tab(made["tom"]), other, scores), engine=engine
        )
        assert counts(engine) != before


@pytest.mark.parametrize("how", CHANGES)
def test_a_stale_lead_tab_cannot_adjudicate(engine, world, how):
    made, versions = world
    open_tab = tab(made["lead"])
    change(engine, "lead", how)
    before = counts(engine)
    with pytest.raises(SessionEnded):
        write_transaction(
            lambda s: adjudicate(
                session=s,
                actor=open_tab,
                task_version_id=versions[0],
                decision="accept",
                reason="Checked the ground truth.",
                round_name="R",
            ),
            engine=engine,
        )
    assert counts(engine) == before


@pytest.mark.parametrize("how", ["deactivate", "set-role"])
def test_a_stale_admin_tab_cannot_manage_users(engine, world, how):
    made, _ = world
    second, _ = write_transaction(
        lambda s: create_user(session=s, username="root2", role="admin", password=PASSWORD),
        engine=engine,
    )
    open_tab = tab(made["admin"])

    def demote(session):
        actor = session.exec(select(User).where(User.username == "root2")).one()
        if how == "deactivate":
            set_active(session=session, actor=actor, username="admin", active=False)
        else:
            set_role(session=session, actor=actor, username="admin", role="expert")

    write_transaction(demote, engine=engine)
    before = counts(engine)
    for action in (
        lambda s: set_active(session=s, actor=open_tab, username="ann", active=False),
        lambda s: reset_password(session=s, actor=open_tab, username="ann"),
        lambda s: add_user(session=s, actor=open_tab, username="newbie", role="expert"),
    ):
        with pytest.raises(SessionEnded):
            write_transaction(action, engine=engine)
    assert counts(engine) == before


def test_a_page_write_is_checked_even_when_the_service_checks_no_role(engine, world):
    """`act_as` (what `ui.action.perform` does) guards a write whatever the service does."""
    made, _ = world
    open_tab = tab(made["lead"])
    change(engine, "lead", "deactivate")
    before = counts(engine)

    def unchecked(session):
        act_as(session, open_tab)
        create_user(session=session, username="sneaky", role="expert", password=PASSWORD)

    with pytest.raises(SessionEnded):
        write_transaction(unchecked, engine=engine)
    assert counts(engine) == before


def test_a_change_between_the_check_and_the_commit_is_seen(engine, world):
    """The account changes while the write's transaction is open (its role check passed):
    the commit reads the row again and writes nothing."""
    from itsmreview.review.rounds.service import own_assignment

    made, versions = world
    open_tab = tab(made["eva"])
    assignment = assignment_of(engine, "eva", versions[0])
    before = counts(engine)
    with Session(engine, expire_on_commit=False) as writing:
        assert own_assignment(session=writing, actor=open_tab, assignment_id=assignment)
        if engine.dialect.name == "postgresql":
            save_draft(session=writing, actor=open_tab, assignment_id=assignment, scores={})
            change(engine, "eva", "set-role")  # commits while the draft waits
        else:  # SQLite's one writer: a change waits for an open write, so it comes first
            change(engine, "eva", "set-role")
            save_draft(session=writing, actor=open_tab, assignment_id=assignment, scores={})
        with pytest.raises(SessionEnded, match="changed"):
            writing.commit()
        writing.rollback()
    after = counts(engine)
    assert after["Rating"] == before["Rating"]


def test_an_admin_changing_their_own_account_still_commits(engine, world):
    made, _ = world
    write_transaction(
        lambda s: create_user(session=s, username="root2", role="admin", password=PASSWORD),
        engine=engine,
    )
    open_tab = tab(made["admin"])
    write_transaction(
        lambda s: reset_password(session=s, actor=open_tab, username="admin", password=PASSWORD),
        engine=engine,
    )
    # their own sessions ended with it: the tab's next write is refused
    with pytest.raises(SessionEnded):
        write_transaction(
            lambda s: set_active(session=s, actor=open_tab, username="ann", active=False),
            engine=engine,
        )


def test_the_cli_operator_is_not_checked(engine, world):
    operator = User(id=None, username="cli", display_name="cli", role=Role.admin, password_hash="")
    write_transaction(
        lambda s: set_active(session=s, actor=operator, username="ann", active=False),
        engine=engine,
    )
    with Session(engine) as session:
        assert not session.exec(select(User).where(User.username == "ann")).one().active


# --- the model role ------------------------------------------------------------------------


@pytest.fixture
def model_rater(session, world):
    from itsmreview.review.assist.rater import model_rater

    rater = model_rater(session=session, model="claude-test", prompt_sha256="ab" * 32)
    session.commit()
    return rater


def test_a_model_rater_is_never_activated_and_gets_no_password(session, world, model_rater):
    admin = world[0]["admin"]
    for attempt in (
        lambda: set_active(
            session=session, actor=admin, username=model_rater.username, active=True
        ),
        lambda: reset_password(session=session, actor=admin, username=model_rater.username),
        lambda: reset_password(
            session=session, actor=admin, username=model_rater.username, password=PASSWORD
        ),
    ):
        with pytest.raises(InvalidInput, match="model rater.*never logs in"):
            attempt()
    session.rollback()
    session.refresh(model_rater)
    assert not model_rater.active and model_rater.password_hash == "!"


def test_a_model_rater_never_authenticates_even_when_its_row_is_tampered(
    session, world, model_rater
):
    from itsmreview.accounts.service import hash_password

    model_rater.active = True  # as a hand edit of the database, or the old CLI, left it
    model_rater.password_hash = hash_password(PASSWORD)
    session.add(model_rater)
    session.commit()
    with pytest.raises(PermissionDenied, match="model rater"):
        authenticate(session=session, username=model_rater.username, password=PASSWORD)
    with pytest.raises(PermissionDenied):
        revalidate(session=session, check=SessionCheck(model_rater.id, model_rater.session_epoch))
    with pytest.raises(PermissionDenied, match="model rater"):
        require_role(model_rater, Role.expert)


def test_the_cli_refuses_to_activate_a_model_rater(configured, model_rater_cli):
    from itsmreview.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    for args in (
        ["users", "activate", model_rater_cli],
        ["users", "reset-password", model_rater_cli],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code != 0
        assert "model rater" in result.output and "never logs in" in result.output
        assert "Traceback" not in result.output


@pytest.fixture
def model_rater_cli(configured):
    from itsmreview.db import session_scope
    from itsmreview.review.assist.rater import model_rater

    with session_scope() as session:
        return model_rater(session=session, model="claude-test", prompt_sha256="cd" * 32).username


@pytest.mark.parametrize("write", ["claim", "submit"])
def test_a_claim_or_submit_holds_its_experts_row_until_it_commits(engine, world, write):
    """On PostgreSQL a claim or a submit reads its expert's row in its first statement, and its
    commit does not read it again: `FOR SHARE`, held to the end. So a deactivation that comes
    while the write is open waits for it; the write commits (it was allowed when it ran) and
    the deactivation lands after it. Read earlier without the lock, the check would be stale.
    On SQLite the open write holds the database's write lock: the same holds."""
    import threading

    made, versions = world
    open_tab = tab(made["eva"])
    assignment = assignment_of(engine, "eva", versions[0])
    scores = _rubric_scores(engine)
    done = threading.Event()
    writing = Session(engine, expire_on_commit=False)
    if write == "claim":
        claimed = claim_next(session=writing, actor=open_tab, round_name="R2")
        assert claimed is not None
    else:
        submit_rating(
            session=writing,
            actor=open_tab,
            assignment_id=assignment,
            scores=scores,
            verdict="accept",
        )
    admin = threading.Thread(target=lambda: (change(engine, "eva", "deactivate"), done.set()))
    admin.start()
    try:
        assert not done.wait(1.0), "the deactivation did not wait for the open write"
        writing.commit()  # its check holds: the row it locked is the row as it is
    finally:
        writing.close()
        admin.join(30)
    assert done.is_set()
    with Session(engine) as session:
        assert not session.exec(select(User.active).where(User.username == "eva")).one()
        if write == "submit":
            assert (
                session.exec(
                    select(func.count())
                    .select_from(Rating)
                    .where(Rating.assignment_id == assignment)
                ).one()
                == 1
            )
    with pytest.raises(SessionEnded):  # and the tab's next write is refused
        write_transaction(
            lambda s: save_draft(session=s, actor=open_tab, assignment_id=assignment, scores={}),
            engine=engine,
        )


def test_the_commit_reads_the_row_again_when_this_transaction_moved_its_epoch(engine, world):
    """A row share-locked early is not trusted once the same transaction moved the user's
    epoch (their own password reset): the commit reads it again, and the reset still commits."""
    from itsmreview.accounts.acting import SHARE_LOCKED

    made, versions = world
    open_tab = tab(made["eva"])
    assignment = assignment_of(engine, "eva", versions[0])  # in round R
    with Session(engine, expire_on_commit=False) as writing:
        claim_next(session=writing, actor=open_tab, round_name="R2")
        if engine.dialect.name == "postgresql":
            assert made["eva"].id in writing.info[SHARE_LOCKED]
        reset_password(session=writing, actor=tab(made["admin"]), username="eva")
        writing.commit()  # eva's epoch moved in this transaction: not a stale tab of eva's own
    with pytest.raises(SessionEnded):  # a later write of the tab is refused
        write_transaction(
            lambda s: save_draft(session=s, actor=open_tab, assignment_id=assignment, scores={}),
            engine=engine,
        )
