"""What a ledger audit keeps per row id as the chain streams: a bit per id, a status per version."""

from array import array


class IdSet:
    """A set of row ids as one bit each: what covers a table's objects costs an eighth of a
    byte per id, however many entries name them.

    >>> ids = IdSet()
    >>> ids.add(3); ids.add(70)
    >>> (3 in ids, 4 in ids, 70 in ids, 10**9 in ids)
    (True, False, True, False)
    """

    def __init__(self) -> None:
        self.bits = bytearray()

    def add(self, ident: int) -> None:
        byte = ident >> 3
        if byte >= len(self.bits):
            self.bits.extend(bytes(max(byte + 1, 2 * len(self.bits)) - len(self.bits)))
        self.bits[byte] |= 1 << (ident & 7)

    def __contains__(self, ident: int) -> bool:
        byte = ident >> 3
        return byte < len(self.bits) and bool(self.bits[byte] >> (ident & 7) & 1)

    def update(self, other: "IdSet") -> None:
        """Add every id of `other`.

        >>> a, b = IdSet(), IdSet()
        >>> a.add(1); b.add(9); b.add(1)
        >>> a.update(b); (1 in a, 9 in a, 2 in a)
        (True, True, False)
        """
        size = max(len(self.bits), len(other.bits))
        union = int.from_bytes(self.bits, "little") | int.from_bytes(other.bits, "little")
        self.bits = bytearray(union.to_bytes(size, "little"))


class Decisions:
    """The newest status entry of each task version (by version id): the status as a code
    (a byte) and the entry's seq."""

    OTHER = 255  # a status beyond the first 254 names (only a forged ledger has so many)

    def __init__(self) -> None:
        self.codes = bytearray()
        self.seqs = array("q")
        self.names: list[str] = [""]  # code -> status; 0: none recorded
        self.index: dict[str, int] = {}
        self.other: dict[int, str] = {}

    def record(self, version_id: int, status: str, seq: int) -> None:
        code = self.index.get(status)
        if code is None and len(self.names) < self.OTHER:
            code = self.index[status] = len(self.names)
            self.names.append(status)
        if version_id >= len(self.codes):
            grow = max(version_id + 1, 2 * len(self.codes)) - len(self.codes)
            self.codes.extend(bytes(grow))
            self.seqs.frombytes(bytes(8 * grow))
        if code is None:
            code, self.other[version_id] = self.OTHER, status
        self.codes[version_id] = code
        self.seqs[version_id] = seq

    def get(self, version_id: int) -> tuple[int, str] | None:
        code = self.codes[version_id] if version_id < len(self.codes) else 0
        if not code:
            return None
        status = self.other[version_id] if code == self.OTHER else self.names[code]
        return self.seqs[version_id], status

    def update(self, other: "Decisions") -> None:
        """Keep, for each version, the newer of this and `other`'s decisions (by seq).

        >>> a, b = Decisions(), Decisions()
        >>> a.record(1, "approved", 5); a.record(2, "rejected", 9)
        >>> b.record(1, "needs_revision", 7); b.record(2, "approved", 8); b.record(3, "x", 1)
        >>> a.update(b); [a.get(i) for i in (1, 2, 3)]
        [(7, 'needs_revision'), (9, 'rejected'), (1, 'x')]
        >>> len(a.seqs) == len(a.codes)  # a number per version, no more
        True
        """
        for version_id, code in enumerate(other.codes):
            if not code:
                continue
            mine = self.get(version_id)
            if mine is None or mine[0] < other.seqs[version_id]:
                seq, status = other.get(version_id)
                self.record(version_id, status, seq)
