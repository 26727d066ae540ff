"""The `itsmreview` command line: a thin client of the service functions, one module per
command group."""

from itsmreview.cli import (  # noqa: F401 - each module registers its commands
    analysis,
    authoring,
    exports,
    findings,
    ledger,
    logs,
    model,
    realism,
    rounds,
    server,
    tasks,
    users,
    worker,
)
from itsmreview.cli.base import app

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
