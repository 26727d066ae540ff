from alembic import command
from alembic.util.exc import CommandError
from itsmreview.db import alembic_config, create_db_engine, current_revision, upgrade_database
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
