"""Writing an export folder deterministically, its manifest, and checking a folder against it.

Everything is written into a staging folder beside the destination and renamed into place
only when complete, so a failed or killed export leaves no partial folder behind.
"""

import hashlib
import json
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itsmreview.files import safe_join

MANIFEST = "manifest.json"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # zip entries carry no real time: the same files, same bytes
EXECUTABLE = 0o755


def canonical(value: Any, *, indent: int | None = None) -> str:
    """JSON with sorted keys and fixed separators: the same value, the same text. Compact by
    default (the C encoder; indenting falls back to a pure-Python one, 10x slower)."""
    separators = (",", ": ") if indent else (",", ":")
    return (
        json.dumps(
            value,
            sort_keys=True,
            ensure_ascii=False,
            indent=indent,
            separators=separators,
            default=str,
        )
        + "\n"
    )


_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def jsonl(rows: Iterable[Any]) -> str:
    return "".join(_LINE(row) + "\n" for row in rows)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class Staging:
    """A folder that becomes `destination` on `commit`, or disappears."""

    def __init__(self, destination: Path):
        self.destination = destination
        destination.parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(
            tempfile.mkdtemp(prefix=f".{destination.name}.staging-", dir=destination.parent)
        )

    def path(self, relative: str) -> Path:
        target = safe_join(self.root, relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_text(self, relative: str, text: str, *, executable: bool = False) -> Path:
        target = self.path(relative)
        target.write_text(text, encoding="utf-8", newline="\n")
        if executable:
            target.chmod(EXECUTABLE)
        return target

    def open(self, relative: str):
        """A text file in the folder, for writing piece by piece."""
        return open(self.path(relative), "w", encoding="utf-8", newline="\n")

    def files(self) -> list[str]:
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in self.root.rglob("*")
            if p.is_file() and not p.is_symlink()
        )

    def commit(self, *, replace: bool) -> Path:
        if self.destination.exists():
            if not replace:
                raise FileExistsError(self.destination)
            old = self.destination.with_name(f".{self.destination.name}.old-{os.getpid()}")
            self.destination.rename(old)
            self.root.rename(self.destination)
            shutil.rmtree(old, ignore_errors=True)
        else:
            self.root.rename(self.destination)
        return self.destination

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def file_digests(root: Path, names: Iterable[str]) -> dict[str, str]:
    return {name: sha256_file(root / name) for name in sorted(names)}


def file_sizes(root: Path, names: Iterable[str]) -> dict[str, int]:
    return {name: (root / name).stat().st_size for name in sorted(names)}


def executables(root: Path, names: Iterable[str]) -> list[str]:
    """The files of `names` with an executable bit (scripts of Harbor tasks)."""
    return sorted(name for name in names if (root / name).stat().st_mode & 0o111)


def write_zip(folder: Path, target: Path, *, prefix: str | None = None) -> Path:
    """A zip of `folder` with sorted entries under `prefix/` (default: the folder's name),
    fixed times and modes (755 for executables, else 644): byte-identical for the same
    files. Written beside `target` first, then renamed."""
    partial = target.with_name(f".{target.name}.partial")
    prefix = prefix or folder.name
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            info = zipfile.ZipInfo(f"{prefix}/{path.relative_to(folder).as_posix()}", ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            mode = EXECUTABLE if path.stat().st_mode & 0o111 else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, path.read_bytes())
    partial.replace(target)
    return target


@dataclass
class VerifyReport:
    folder: Path
    files: int = 0
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    manifest_sha256: str | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.extra or self.problem)

    def as_dict(self) -> dict:
        return {
            "folder": str(self.folder),
            "ok": self.ok,
            "files": self.files,
            "missing": self.missing,
            "changed": self.changed,
            "extra": self.extra,
            "manifest_sha256": self.manifest_sha256,
            "problem": self.problem,
        }


MAX_MANIFEST_BYTES = 256 << 20  # an export of 100,000 task folders holds a manifest under 64 MiB
MAX_FILES = 1_000_000  # files below an export folder that verify looks at


def _regular(path: Path) -> os.stat_result | None:
    """The lstat of `path` when it is a regular file (not a link, FIFO, device or folder)."""
    try:
        status = path.lstat()
    except OSError:
        return None
    return status if stat.S_ISREG(status.st_mode) else None


def _kind(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return f"a link to {os.readlink(path)}"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    return "not a regular file"


def _present(folder: Path) -> list[str]:
    """Every name below `folder` that is not a folder, links and FIFOs included (never
    followed), relative and in POSIX form."""
    found = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        here = Path(current)
        names = files + [d for d in dirs if (here / d).is_symlink()]
        for name in names:
            found.append((here / name).relative_to(folder).as_posix())
            if len(found) > MAX_FILES:
                raise ValueError(f"more than {MAX_FILES:,} files below it; not an export folder")
    return found


def verify_folder(folder: Path) -> VerifyReport:
    """Every file of an export folder against its manifest: missing, changed and extra files
    are named. A folder without a readable manifest is reported, not raised.

    Nothing is followed or opened that is not a regular file: a manifest that is a link, a
    FIFO or larger than MAX_MANIFEST_BYTES is a problem; a listed file that is a link or
    not a regular file counts as changed; a file whose size differs from the manifest's
    record is changed without being hashed, and so is a script that lost its executable
    bit."""
    report = VerifyReport(folder)
    manifest_path = folder / MANIFEST
    if folder.is_symlink() or not folder.is_dir():
        report.problem = (
            f"{folder}: is a link; give the export folder itself"
            if folder.is_symlink()
            else f"{folder}: no such folder"
        )
        return report
    status = _regular(manifest_path)
    if status is None:
        report.problem = (
            f"{manifest_path}: {_kind(manifest_path)}; an export's manifest is a regular file "
            "inside its folder (re-export, or copy the export without links)"
        )
        return report
    if status.st_size > MAX_MANIFEST_BYTES:
        report.problem = (
            f"{manifest_path}: {status.st_size:,} bytes, over the {MAX_MANIFEST_BYTES:,} an "
            "export manifest can hold; not an itsmreview manifest"
        )
        return report
    try:
        with open(manifest_path, "rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
        manifest = json.loads(raw.decode("utf-8"))
        expected = dict(manifest["files"])
        sizes = dict(manifest.get("sizes") or {})
        executable = set(manifest.get("executables") or [])
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in expected.items()):
            raise TypeError("'files' must map file names to sha256 digests")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        report.problem = f"{manifest_path}: not a readable export manifest ({exc})"
        return report
    report.manifest_sha256 = hashlib.sha256(raw).hexdigest()
    try:
        present = set(_present(folder)) - {MANIFEST}
    except (OSError, ValueError) as exc:
        report.problem = f"{folder}: {exc}"
        return report
    report.files = len(expected)
    for name, digest in sorted(expected.items()):
        if name not in present:
            report.missing.append(name)
            continue
        try:
            path = safe_join(folder, name)
        except ValueError:
            report.changed.append(name)
            continue
        found = _regular(path)
        if (
            found is None
            or (name in sizes and sizes[name] != found.st_size)
            or (name in executable and not found.st_mode & 0o111)
            or sha256_file(path) != digest
        ):
            report.changed.append(name)
    report.extra = sorted(present - set(expected))
    return report
