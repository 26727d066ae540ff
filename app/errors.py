"""Errors that cross a boundary (CLI, pages). Pure functions raise ValueError instead."""


class ItsmReviewError(Exception):
    """Base of every error the CLI and the pages show to a person as a message."""


class NotFound(ItsmReviewError):
    """A named thing (user, log, task, round) does not exist."""


class Conflict(ItsmReviewError):
    """The request clashes with the current state (duplicate name, closed round, k reached)."""


class InvalidInput(ItsmReviewError):
    """Input (file, field, option) is malformed; the message says where and how to fix it."""


class PermissionDenied(ItsmReviewError):
    """The acting user's role does not allow this action."""


class LedgerIntegrityError(ItsmReviewError):
    """The provenance ledger's hash chain does not verify."""


class Busy(ItsmReviewError):
    """The database stayed busy with other writers for the whole retry budget."""
