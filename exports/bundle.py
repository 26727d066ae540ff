"""Writing an export folder deterministically, its manifest, and checking a folder against it.

Everything is written into a staging folder beside the destination and renamed into place
only when complete, so a failed or killed export leaves no partial folder behind.
"""

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itsmreview.files import safe_join

MANIFEST = "manifest.json"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # zip entries carry no real time: the same files, same bytes


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

    def write_text(self, relative: str, text: str) -> Path:
        target = self.path(relative)
        target.write_text(text, encoding="utf-8", newline="\n")
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


def write_zip(folder: Path, target: Path) -> Path:
    """A zip of `folder` with sorted entries and fixed times: byte-identical for the same
    files. Written beside `target` first, then renamed."""
    partial = target.with_name(f".{target.name}.partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}", ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
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


def verify_folder(folder: Path) -> VerifyReport:
    """Every file of an export folder against its manifest: missing, changed and extra files
    are named. A folder without a readable manifest is reported, not raised."""
    report = VerifyReport(folder)
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        report.problem = f"{folder}: no such folder"
        return report
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        expected = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report.problem = f"{manifest_path}: not a readable export manifest ({exc})"
        return report
    report.manifest_sha256 = sha256_file(manifest_path)
    present = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and p != manifest_path
    }
    report.files = len(expected)
    for name, digest in sorted(expected.items()):
        path = folder / name
        if name not in present:
            report.missing.append(name)
        elif path.is_symlink() or sha256_file(path) != digest:
            report.changed.append(name)
    report.extra = sorted(present - set(expected))
    return report
