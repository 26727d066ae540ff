"""Import leases on storage keys (begin, renew, publish, abandon) and the sweep of leftovers."""

import threading
from datetime import timedelta

from itsmreview.coverage import queries
from itsmreview.coverage.models import LeaseState
from itsmreview.db import own_transaction, utcnow
from itsmreview.errors import Conflict
from itsmreview.processes import this_process
from itsmreview.settings import get_settings
from itsmreview.storage import Storage, get_storage
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

LEASE_WAIT_S = 2.0  # how long a lease's own transaction waits for SQLite's write lock


class Lease:
    """An import's lease on its storage key (coverage.models.ImportLease).

    `begin` commits the lease on a connection of its own before any file is written, and a
    thread renews it every third of ITSMREVIEW_STORAGE_LEASE_S while the import runs.
    `publish` marks it published in the import's own transaction, which fails (Conflict)
    when a cleanup reaped it after it expired. On SQLite, when the caller's transaction
    already holds the single write lock (a page's import), nothing else can write until it
    commits: the lease is then written in that transaction, and a killed import's files are
    left in place (never a published log's)."""

    def __init__(self, session: Session, key: str):
        self.session, self.key = session, key
        self.engine = session.get_bind()
        self.seconds = get_settings().storage_lease_s
        self.separate = not _holds_sqlite_write_lock(session)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _expiry(self):
        return utcnow() + timedelta(seconds=self.seconds)

    def begin(self) -> None:
        if not self.separate:
            queries.begin_lease(
                session=self.session, key=self.key, holder=this_process(), expires_at=self._expiry()
            )
            return
        with own_transaction(self.engine, wait_s=LEASE_WAIT_S) as own:
            queries.begin_lease(
                session=own, key=self.key, holder=this_process(), expires_at=self._expiry()
            )
        self._thread = threading.Thread(target=self._renew, name="import-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                with own_transaction(self.engine, wait_s=LEASE_WAIT_S) as own:
                    if not queries.renew_lease(
                        session=own, key=self.key, expires_at=self._expiry()
                    ):
                        return
            except DBAPIError:  # SQLite's lock held by the import itself: try again later
                continue

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def publish(self, session: Session) -> None:
        """Mark the lease published in the import's transaction. Raises Conflict when a
        cleanup took it meanwhile (its files are gone or going)."""
        self._stop_renewing()
        if not queries.settle_lease(session=session, key=self.key, state=LeaseState.published):
            raise Conflict(
                f"the import's staged files ({self.key}) were removed by another import's "
                f"cleanup after its lease of {self.seconds:g} s expired: nothing was stored; "
                "import again, and raise ITSMREVIEW_STORAGE_LEASE_S if imports run this long "
                "without renewing it"
            )

    def abandon(self, storage: Storage) -> None:
        """The import failed: remove its own files, then its lease (or, when the files could
        not be removed, mark it ended for a later cleanup). Best effort: a lease left running
        expires, and a later cleanup removes what is left."""
        self._stop_renewing()
        if not self.separate:  # the lease rolls back with the caller's transaction
            storage.delete(self.key)
            return
        try:
            storage.delete(self.key)
        except Exception:  # noqa: BLE001 - the import's own error matters; a cleanup retries
            gone = False
        else:
            gone = True
        if _holds_sqlite_write_lock(self.session):
            return  # nobody else can write before it rolls back: the lease expires instead
        try:
            with own_transaction(self.engine, wait_s=LEASE_WAIT_S) as own:
                if gone:
                    queries.forget_lease(session=own, key=self.key, state=LeaseState.running)
                else:
                    queries.settle_lease(session=own, key=self.key, state=LeaseState.ended)
        except DBAPIError:
            pass


def _holds_sqlite_write_lock(session: Session) -> bool:
    """Whether `session` is a SQLite session whose transaction has begun writing (or began
    IMMEDIATE): then no other connection can write before it ends."""
    if session.get_bind().dialect.name != "sqlite":
        return False
    return bool(session.connection().connection.dbapi_connection.in_transaction)


def sweep_leftovers(*, session: Session, storage: Storage | None = None) -> list[str]:
    """Remove the files of imports that ended without publishing them or whose lease
    expired: each lease is first marked reaped in a committed transaction of its own (which
    a running import's publish excludes), then its files go, then the lease. Never touches
    a key a stored log points at, nor anything that no lease names. Returns the keys.
    Skipped when the database is busy (SQLite's lock held by this very transaction)."""
    storage = storage or get_storage()
    engine = session.get_bind()
    if _holds_sqlite_write_lock(session):
        return []
    removed = []
    try:
        with own_transaction(engine, wait_s=LEASE_WAIT_S) as own:
            candidates = queries.reapable_leases(session=own, now=utcnow())
        for key in candidates:
            with own_transaction(engine, wait_s=LEASE_WAIT_S) as own:
                taken = queries.reap_lease(session=own, key=key, now=utcnow())
            if not taken:
                continue
            storage.delete(key)
            with own_transaction(engine, wait_s=LEASE_WAIT_S) as own:
                queries.forget_lease(session=own, key=key)
            removed.append(key)
    except DBAPIError:  # busy: the next import sweeps
        pass
    return removed
