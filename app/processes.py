"""Which process does a piece of work: a name to store beside it, and whether it still runs."""

import gc
import multiprocessing
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def this_process() -> str:
    """'host pid' of the running process."""
    return f"{socket.gethostname()} {os.getpid()}"


def process_alive(owner: str) -> bool | None:
    """Whether the process named by `this_process()` still runs: None when it ran on another
    host (or the name is unreadable), where only time can tell.

    >>> process_alive(this_process())
    True
    >>> process_alive(f"{socket.gethostname()} 0") is False or os.getuid() == 0
    True
    """
    try:
        host, pid = owner.split()
        number = int(pid)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if number == os.getpid():
        return True
    if number <= 0:
        return False
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def second_process_context():
    """How to start a process that shares a piece of work: forked where that is safe (one
    thread: the CLI, the worker's job), spawned where threads run (the app)."""
    return multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")


@contextmanager
def cycles_collected_after() -> Iterator[None]:
    """Run a long read without the cycle collector, which it would start again and again for
    objects reference counting frees anyway (the rows and decoded JSON of a batch): a ledger
    check at 100,000 tasks spends 2.8 s of its 6 s of task-version reads there, an export of
    50,000 tasks 5 s of 25. Collection resumes afterwards, in whatever state it was. A
    context manager or a decorator."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
