"""Alembic migrations of the schema (versions/, one revision per change)."""
