"""What `ledger verify` reports: the kinds of problem, one finding per object, the report."""

from dataclasses import asdict, dataclass, field

MISSING = "missing object"  # an entry commits to an object that is not there
UNCOVERED = "object without entry"  # an object no entry commits to
MISMATCH = "content mismatch"  # the object differs from what its entry commits to
STATUS = "status mismatch"  # a stored status is not the one the ledger recorded
HELD = "queued rating changed"  # a rating changed between its submit and the gate


@dataclass(frozen=True)
class Finding:
    """One object that does not match the ledger: which (kind, id, as named), which entry
    (seq; None for an object no entry covers), the kind of problem and what differs."""

    kind: str
    ident: str
    problem: str
    seq: int | None
    detail: str
    label: str = ""

    def text(self) -> str:
        return f"{self.label or f'{self.kind} {self.ident}'}: {self.detail}"


@dataclass
class AuditReport:
    """What `verify_ledger` found. `findings` name each object: those at an entry in the
    ledger's order, then the rest kind by kind."""

    entries: int = 0
    head: tuple[int, str] | None = None
    broken_at: int | None = None
    chain_problem: str | None = None
    expected_head_problem: str | None = None
    findings: list[Finding] = field(default_factory=list)
    objects_checked: int = 0
    queued: int = 0  # ratings whose entry waits, with them, in the gate's queue

    @property
    def problems(self) -> list[str]:
        return [f.text() for f in self.findings]

    @property
    def ok(self) -> bool:
        return not (self.chain_problem or self.expected_head_problem or self.findings)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "head": None if self.head is None else {"seq": self.head[0], "hash": self.head[1]},
            "broken_at": self.broken_at,
            "chain_problem": self.chain_problem,
            "expected_head_problem": self.expected_head_problem,
            "problems": self.problems,
            "findings": [asdict(f) for f in self.findings],
            "objects_checked": self.objects_checked,
            "queued": self.queued,
        }
