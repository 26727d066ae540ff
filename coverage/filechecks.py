"""Checks of a log file before and while it is read: limits, kind, size, encoding, columns."""

import bz2
import codecs
import gzip
import lzma
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa


@dataclass(frozen=True)
class Limits:
    """Bounds checked while reading a log, before they can fill memory."""

    max_bytes: int = 4 * 2**30
    max_row_bytes: int = 4 * 2**20
    min_year: int = 1970
    max_year: int = 2100

    @classmethod
    def from_settings(cls) -> "Limits":
        from itsmreview.settings import get_settings

        settings = get_settings()
        return cls(
            settings.max_log_bytes,
            settings.max_log_row_bytes,
            settings.timestamp_min_year,
            settings.timestamp_max_year,
        )


_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _compression(path: Path):
    return _OPENERS.get(path.suffix.lower())


def check_inflated_size(path: Path, limits: Limits) -> None:
    """For a compressed file, inflate it once in bounded blocks and stop as soon as it passes
    the size limit: a 1 MB archive can hold terabytes of zeros. Uncompressed files are
    checked by their size alone."""
    opener = _compression(path)
    if opener is None:
        return
    total = 0
    try:
        with opener(path, "rb") as handle:
            while block := handle.read(1 << 20):
                total += len(block)
                if total > limits.max_bytes:
                    raise ValueError(
                        f"{path}: decompresses to more than {limits.max_bytes:,} bytes; raise "
                        "ITSMREVIEW_MAX_LOG_BYTES if the log really is this large"
                    )
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(corrupt_message(path, exc)) from None


def corrupt_message(path: Path, exc: BaseException) -> str:
    """The error for a compressed file that cannot be inflated."""
    return (
        f"{path}: the compressed file is truncated or corrupt ({exc}); download or compress it "
        "again"
    )


def check_size(path: Path, limits: Limits) -> None:
    """ValueError when the file on disk is over the size limit."""
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise ValueError(
            f"{path}: {size:,} bytes, over the limit of {limits.max_bytes:,}; raise "
            "ITSMREVIEW_MAX_LOG_BYTES if the log really is this large"
        )


def check_file(path: Path, limits: Limits | None = None, *, what: str = "log") -> None:
    """ValueError unless `path` is a regular file within the size limit, checked from its
    metadata alone, before anything reads or hashes it: a FIFO would block, a device never
    ends, and a file over the limit would be hashed for minutes before being refused."""
    limits = limits or Limits.from_settings()
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file ({what})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{path}: is a folder; give the {what} file inside it")
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device or socket"
        raise ValueError(f"{path}: is {kind}, not a regular file; copy the {what} into a file")
    check_size(path, limits)


def check_encoding(encoding: str) -> None:
    """ValueError unless `encoding` names a Python text codec (rot13 or zlib name codecs,
    but not ones that turn bytes into text)."""
    try:
        info = codecs.lookup(encoding)
    except (LookupError, TypeError, ValueError):
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ValueError(
            f"unknown encoding {encoding!r}; use a Python codec name such as utf-8, latin-1 or "
            "cp1252"
        ) from None


def header_sample(path: Path, limits: Limits) -> bytes:
    """The file's first row (decompressed), read in a bounded amount."""
    opener = _compression(path)
    try:
        with opener(path, "rb") if opener else open(path, "rb") as handle:
            sample = handle.read(min(limits.max_row_bytes, 1 << 20))
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(corrupt_message(path, exc)) from None
    if not sample.strip():
        raise ValueError(f"{path}: the file is empty; a CSV log starts with a header row")
    end = sample.find(b"\n")
    header = sample if end < 0 else sample[:end]
    if b"\x00" in header:
        raise ValueError(
            f"{path}: the first row holds NUL bytes, so this is not a text CSV file (a binary "
            "or sparse file?); export the log as CSV text"
        )
    if end < 0 and len(sample) >= min(limits.max_row_bytes, 1 << 20):
        raise ValueError(
            f"{path}: the header row is longer than {len(sample):,} bytes; is this a CSV log?"
        )
    return header


def check_unique(path: Path, wanted: list[str], present: list[str]) -> None:
    """A mapped column whose name the header repeats is ambiguous: refuse it, naming both
    places (unmapped repeated names are harmless)."""
    for name in wanted:
        at = [i for i, column in enumerate(present, start=1) if column == name]
        if len(at) > 1:
            raise ValueError(
                f"{path}: column name {name!r} appears {len(at)} times in the header (columns "
                f"{', '.join(map(str, at))}); rename the copies so that the mapped column is "
                "named once"
            )


def first_long_line(path: Path, limit: int) -> int | None:
    """The number of the first line longer than `limit` bytes (read in bounded blocks)."""
    opener = _compression(path)
    line, length = 1, 0
    try:
        with opener(path, "rb") if opener else open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                for part in block.split(b"\n")[:-1] if b"\n" in block else []:
                    if length + len(part) > limit:
                        return line
                    line, length = line + 1, 0
                length += len(block) - (block.rfind(b"\n") + 1)
                if length > limit:
                    return line
    except (OSError, EOFError, lzma.LZMAError):
        return None
    return None


def csv_error(
    path: Path, exc: BaseException, encoding: str, block_size: int, line: int | None = None
) -> str:
    """What Arrow's CSV reader failed on, said with the file and the fix (and the row's
    `line`, when the reader knows it)."""
    text = str(exc)
    first = text.splitlines()[0] if text else type(exc).__name__
    if "UTF8" in text or isinstance(exc, UnicodeDecodeError):
        return (
            f"{path}: not readable as {encoding} ({first}); pass the file's encoding, e.g. "
            "--encoding latin-1"
        )
    if "straddl" in text:
        line = first_long_line(path, block_size)
        where = f"line {line:,}: " if line else ""
        return (
            f"{path}: a row is longer than {block_size:,} bytes ({where}a quote left open, or "
            "binary data); fix the row, or raise ITSMREVIEW_MAX_LOG_ROW_BYTES"
        )
    if isinstance(exc, (OSError, EOFError)) and not isinstance(exc, pa.ArrowException):
        return corrupt_message(path, exc)
    row = re.search(r"[Rr]ow #?(\d+)", text)
    where = f" (near row {row.group(1)})" if row else ""
    counts = re.search(r"Expected (\d+) columns, got (\d+): ?(.*)", first)
    if counts:
        shown = counts.group(3)[:80].encode("unicode_escape").decode("ascii")
        at = f"line {line:,}: " if line else ""
        return (
            f"{path}: a CSV row has {counts.group(2)} fields where the header has "
            f"{counts.group(1)} ({at}the row starts {shown!r}); check the separator and the "
            "quoting of that row"
        )
    return f"{path}: cannot parse the CSV{where}: {first}"


def check_xes(path: Path, limits: Limits) -> None:
    """Refuse an XES with a DTD (entity expansion, external entities: XES never needs one)
    and, for a compressed file, one that inflates past the size limit, before pm4py parses."""
    opener = _compression(path)
    try:
        with opener(path, "rb") if opener else open(path, "rb") as handle:
            prolog = handle.read(1 << 16)
            root = prolog.find(b"<log")
            head = prolog if root < 0 else prolog[:root]
            if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
                raise ValueError(
                    f"{path}: declares a DTD or entities (<!DOCTYPE/<!ENTITY>), which XES never "
                    "needs and which can expand or read other files; remove the declaration"
                )
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(corrupt_message(path, exc)) from None
    check_inflated_size(path, limits)


def check_columns(path: Path, wanted: list[str], present: list[str], sep: str) -> None:
    """ValueError naming the mapped columns the file lacks (and a wrong separator's hint)."""
    missing = [c for c in wanted if c not in present]
    if not missing:
        return
    hint = ""
    if len(present) == 1 and sep in (",", ";", "\t"):
        hint = f" (only one column was found: is the separator {sep!r} right?)"
    raise ValueError(
        f"{path}: mapped column(s) {', '.join(repr(c) for c in missing)} not in the file{hint}; "
        f"columns present: {', '.join(repr(c) for c in present)}"
    )
