import pytest
from itsmreview.accounts.models import Role, User
from itsmreview.catalog.models import Task, TaskVersion, Track, Transcript
from itsmreview.db import create_db_engine, utcnow
from itsmreview.review.models import Rubric
from sqlalchemy.exc import IntegrityError
from sqlmodel import select


def _user(name="ada", role=Role.expert):
    return User(
        username=name,
        display_name=name.title(),
        role=role,
        password_hash="x",
        expertise=["L2 resolver"],
    )


def test_round_trip_keeps_json_enums_and_aware_times(session):
    user = _user()
    session.add(user)
    session.commit()
    session.expire_all()
    loaded = session.exec(select(User).where(User.username == "ada")).one()
    assert loaded.role == Role.expert
    assert loaded.expertise == ["L2 resolver"]
    assert loaded.created_at.tzinfo is not None
    assert abs((utcnow() - loaded.created_at).total_seconds()) < 60


def test_unique_username(session):
    session.add(_user())
    session.commit()
    session.add(_user())
    with pytest.raises(IntegrityError):
        session.commit()


def test_task_version_unique_per_task_and_cascade(session):
    task = Task(external_id="t-1", title="T", persona="L1", track=Track.single_agent)
    session.add(task)
    session.flush()
    version = TaskVersion(
        task_id=task.id,
        version=1,
        content_hash="h" * 64,
        instruction="do",
        source={"variants": [["a", "b"]]},
    )
    session.add(version)
    session.flush()
    session.add(
        Transcript(
            task_version_id=version.id,
            external_id="r1",
            messages=[{"role": "user", "content": "hi"}],
            n_turns=1,
        )
    )
    session.commit()
    session.add(TaskVersion(task_id=task.id, version=1, content_hash="g" * 64, instruction="x"))
    with pytest.raises(IntegrityError):
        session.commit()
    session.rollback()
    loaded = session.exec(select(TaskVersion)).one()
    assert loaded.source == {"variants": [["a", "b"]]}


def test_foreign_keys_are_enforced(session):
    session.add(TaskVersion(task_id=999, version=1, content_hash="h" * 64, instruction="x"))
    with pytest.raises(IntegrityError):
        session.commit()


def test_rubric_name_version_unique(session):
    for _ in range(2):
        session.add(Rubric(name="r", version=1, title="R", definition={}, content_hash="h"))
    with pytest.raises(IntegrityError):
        session.commit()


def test_a_url_without_a_driver_gets_the_shipped_one(database_url):
    plain = database_url.replace("postgresql+psycopg://", "postgresql://")
    engine = create_db_engine(plain)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
        assert engine.dialect.driver in ("psycopg", "pysqlite")
    finally:
        engine.dispose()


def test_a_set_of_70000_ids_is_one_bind_parameter(session):
    """More ids than PostgreSQL (65,535) or SQLite (32,766) allow as parameters: `in_ids`
    passes the list as one array (PostgreSQL) or one JSON text (SQLite)."""
    from itsmreview.catalog.models import Task
    from itsmreview.db import in_ids
    from sqlalchemy import func
    from sqlmodel import select

    for n in (1, 2, 3):
        session.add(Task(external_id=f"t{n}", title="t", persona="p", track="single-agent"))
    session.flush()
    ids = [t.id for t in session.exec(select(Task)).all()]
    wanted = list(range(10**6, 10**6 + 70_000)) + ids[:2]
    query = select(func.count()).select_from(Task).where(in_ids(session, Task.id, wanted))
    assert len(query.compile(session.get_bind()).params) == 1
    assert session.exec(query).one() == 2
    assert (
        session.exec(
            select(func.count()).select_from(Task).where(in_ids(session, Task.id, []))
        ).one()
        == 0
    )


def test_driver_rows_take_ids_as_one_parameter_and_keep_literal_percent_signs(session):
    """`driver_rows` with `ids_in`/`ids_param` on either dialect: the driver's tuples, the id
    list as one parameter, a `%` in the statement's text left as it is."""
    from itsmreview.catalog.models import Task
    from itsmreview.db import driver_rows, ids_in, ids_param

    for n in (1, 2, 3):
        session.add(Task(external_id=f"p{n}%", title="t", persona="p", track="single-agent"))
    session.flush()
    ids = [t.id for t in session.exec(select(Task).order_by(Task.id)).all()]
    rows = driver_rows(
        session,
        "SELECT external_id, '100%' FROM tasks WHERE external_id LIKE ? AND "
        + ids_in(session, "id")
        + " ORDER BY id",
        ("p%", ids_param(session, [*ids[:2], 10**6])),
    )
    assert rows == [("p1%", "100%"), ("p2%", "100%")]
    assert isinstance(rows[0], tuple)
