"""The acting user is checked again when a write commits, inside its transaction.

A page holds the user of its last full run (a fragment reruns alone; a tab stays open for
hours), so a role check made before the write is not enough: the account may have been
deactivated or changed since. Every role-checked service calls `require_role`, which notes
the actor here; the first session that then writes claims the noted actors, and when it
commits their rows are read again in its transaction (`FOR SHARE` on PostgreSQL, so a
deactivation waits for the write or the write sees it; SQLite's writer holds the one write
lock). Unless each is still active, of the same role and at the same session epoch, the
commit fails with `SessionEnded` and nothing is written. Pages also note their acting user
on the transaction itself (`act_as`), so a write through a service that forgot
`require_role` is checked too. Actors without an id (the CLI's operator) are trusted:
whoever runs the CLI holds the database already.
"""

from contextvars import ContextVar
from dataclasses import dataclass

from itsmreview.errors import PermissionDenied
from sqlalchemy import event
from sqlalchemy.orm import Session as OrmSession


class SessionEnded(PermissionDenied):
    """The acting user's session ended (deactivated, role changed, password reset, logged
    out) after the page that asked for the write was drawn: nothing was written."""


@dataclass(frozen=True)
class ActingCheck:
    """What an actor was when a service admitted them."""

    user_id: int
    username: str
    role: str
    epoch: int


_NOTED: ContextVar[dict[int, ActingCheck] | None] = ContextVar("itsmreview_acting", default=None)
ACTING = "itsmreview_acting"  # session.info: checks noted on the transaction itself
WROTE = "itsmreview_wrote"  # session.info: the transaction wrote something
EPOCH_MOVES = "itsmreview_epoch_moves"  # session.info: user id -> epochs this tx moved
SHARE_LOCKED = "itsmreview_share_locked"  # session.info: user id -> row read FOR SHARE in this tx


@dataclass(frozen=True)
class ActingRow:
    """A user's row as the check reads it."""

    id: int
    username: str
    active: bool
    role: str
    session_epoch: int


def share_locked(session: OrmSession, row: ActingRow) -> None:
    """This transaction read `row` with `FOR SHARE` (a claim's or a submit's first statement
    reads its expert's row so): on PostgreSQL it cannot change before the transaction ends,
    so the commit's check uses it instead of reading the row again (one round trip fewer).
    SQLite takes no row locks: there the commit reads the row as always."""
    if session.get_bind().dialect.name == "postgresql":
        session.info.setdefault(SHARE_LOCKED, {})[row.id] = row


def check_of(actor) -> ActingCheck | None:
    """The check of an actor (None for one without an id: the CLI's operator)."""
    if actor is None or getattr(actor, "id", None) is None:
        return None
    return ActingCheck(
        int(actor.id), str(actor.username), str(actor.role), int(actor.session_epoch or 0)
    )


def note(actor) -> None:
    """Remember `actor` for the next commit of this thread that writes (`require_role`)."""
    check = check_of(actor)
    if check is None:
        return
    # a new dict each time: a thread started from a copied context never shares one
    _NOTED.set({**(_NOTED.get() or {}), check.user_id: check})


def act_as(session: OrmSession, actor) -> None:
    """Check `actor` when this session's transaction commits, whether or not it wrote."""
    if (check := check_of(actor)) is not None:
        session.info.setdefault(ACTING, {})[check.user_id] = check


def epoch_moved(session: OrmSession, user_id: int) -> None:
    """This transaction raised a user's epoch (their own role change or password reset must
    still commit)."""
    moves = session.info.setdefault(EPOCH_MOVES, {})
    moves[user_id] = moves.get(user_id, 0) + 1


def _ended(check: ActingCheck, row, moves: int) -> str | None:
    """Why the acting session ended, or None while it holds."""
    if not row.active:
        return "your account was deactivated"
    if row.role == "model":
        return "a model rater never acts through a session"
    if row.session_epoch not in (check.epoch, check.epoch + moves):
        return "your account was changed or logged out everywhere"
    if row.role != check.role and not moves:
        return "your role changed"
    return None


def verify(session: OrmSession, checks: dict[int, ActingCheck]) -> None:
    """Raise SessionEnded unless every check holds against the rows as they are now."""
    from itsmreview.accounts import queries

    if not checks:
        return
    moves = session.info.get(EPOCH_MOVES, {})
    # a row share-locked earlier in this transaction is the row as it is now, unless this
    # transaction moved its epoch since
    rows = {
        user_id: row
        for user_id, row in session.info.get(SHARE_LOCKED, {}).items()
        if user_id in checks and not moves.get(user_id)
    }
    if missing := sorted(set(checks) - set(rows)):
        rows |= queries.acting_rows(session=session, user_ids=missing)
    for user_id, check in checks.items():
        row = rows.get(user_id)
        if row is None or row.username != check.username:
            continue  # users are never deleted: not an account of this database
        why = _ended(check, row, moves.get(user_id, 0))
        if why is not None:
            raise SessionEnded(f"your session has ended ({why}); nothing was saved: sign in again")


def _claim(session) -> None:
    """This session writes: the actors noted since the last transaction ended act in it."""
    session.info[WROTE] = True
    if noted := _NOTED.get():
        session.info.setdefault(ACTING, {}).update(noted)
        _NOTED.set(None)


@event.listens_for(OrmSession, "before_flush")
def _flushing(session, _context, _instances) -> None:
    if session.new or session.dirty or session.deleted:
        _claim(session)


@event.listens_for(OrmSession, "do_orm_execute")
def _executing(state) -> None:
    if not state.is_select:  # UPDATE, DELETE, INSERT, text(): taken as a write
        _claim(state.session)


def _before_commit(session) -> None:
    if session.info.get(WROTE) or session.new or session.dirty or session.deleted:
        _claim(session)
    verify(session, dict(session.info.get(ACTING, {})))


# first among the commit's listeners: before the ledger chains this transaction's entries
event.listen(OrmSession, "before_commit", _before_commit, insert=True)


@event.listens_for(OrmSession, "after_transaction_end")
def _ended_transaction(session, transaction) -> None:
    """Checks belong to one transaction; actors noted by reads that wrote nothing lapse."""
    if transaction.nested:  # a rolled back savepoint releases its row locks: read rows again
        session.info.pop(SHARE_LOCKED, None)
    elif transaction.parent is None:
        for key in (ACTING, WROTE, EPOCH_MOVES, SHARE_LOCKED):
            session.info.pop(key, None)
        _NOTED.set(None)
