"""The `itsmreview` command line: a thin client of the service functions, one module per
command group."""

from itsmreview.cli import analysis, ledger, logs, rounds, server, tasks, users  # noqa: F401
from itsmreview.cli.base import app

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
