"""Safe file handling for everything read from or written to paths that come from outside:
joins that cannot leave their folder, folder walks that never follow a link out, and reads
bounded before they start."""

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import yaml


class UnsafePath(ValueError):
    """A path from outside that would reach beyond the folder it belongs to."""


def safe_join(root: Path, relative: str) -> Path:
    """`root / relative` when `relative` is a plain relative path that stays inside `root`.

    Raises UnsafePath for an absolute path, a drive, a `..` segment, an empty or NUL-bearing
    name, or a path whose existing part resolves (through links) outside `root`.

    >>> safe_join(Path("/out"), "tests/test.sh").as_posix()
    '/out/tests/test.sh'
    >>> safe_join(Path("/out"), "../etc/passwd")
    Traceback (most recent call last):
    ...
    itsmreview.files.UnsafePath: '../etc/passwd' leaves its folder ...
    """
    target = root.joinpath(*relative_parts(relative))
    if not is_within(root, target):
        raise UnsafePath(f"{str(relative)!r} resolves outside {root} through a link")
    return target


MAX_KEY_CHARS = 1024  # a relative path (a storage key) in characters; S3 allows 1,024 bytes
MAX_NAME_BYTES = 255  # one segment, as most file systems allow


def relative_parts(relative: str) -> list[str]:
    """The segments of `relative`, a plain relative path: no absolute path, drive or `..`
    segment, no NUL, not empty, at most MAX_KEY_CHARS characters and MAX_NAME_BYTES bytes a
    segment. Checks the text only (safe_join also resolves links). Raises UnsafePath.

    >>> relative_parts("logs/ab12/events.parquet")
    ['logs', 'ab12', 'events.parquet']
    >>> relative_parts("/etc/passwd")
    Traceback (most recent call last):
    ...
    itsmreview.files.UnsafePath: '/etc/passwd' is an absolute path; use a path relative to ...
    """
    text = str(relative)
    if not text or "\x00" in text:
        raise UnsafePath(f"{text[:80]!r} is not a usable file name (empty or with a NUL character)")
    if len(text) > MAX_KEY_CHARS:
        raise UnsafePath(
            f"{text[:40]!r}... is {len(text):,} characters long; a path may have at most "
            f"{MAX_KEY_CHARS:,}"
        )
    posix, windows = PurePosixPath(text.replace("\\", "/")), PureWindowsPath(text)
    if posix.is_absolute() or windows.drive or windows.root:
        raise UnsafePath(f"{text!r} is an absolute path; use a path relative to its folder")
    if ".." in posix.parts:
        raise UnsafePath(f"{text!r} leaves its folder (a '..' segment); use a path inside it")
    parts = [p for p in posix.parts if p not in ("", ".")]
    if not parts:
        raise UnsafePath(f"{text!r} names the folder itself, not a file in it")
    long = next((p for p in parts if len(p.encode("utf-8", "replace")) > MAX_NAME_BYTES), None)
    if long is not None:
        raise UnsafePath(
            f"{long[:40]!r}... is longer than {MAX_NAME_BYTES} bytes; a file name may have at "
            f"most {MAX_NAME_BYTES}"
        )
    return parts


def is_within(root: Path, path: Path) -> bool:
    """Whether `path`, with every link resolved, lies inside `root` (resolved too)."""
    base = root.resolve()
    resolved = path.resolve()
    return resolved == base or base in resolved.parents


def walk_files(folder: Path, *, max_files: int) -> Iterator[Path]:
    """The regular files below `folder`, sorted, without following any link that leads
    outside it. Raises UnsafePath naming the first such link, ValueError past `max_files`."""
    if folder.is_symlink() and not is_within(folder.parent, folder):
        raise UnsafePath(f"{folder} is a link to {folder.resolve()}, outside its task folder")
    found: list[Path] = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        here = Path(current)
        for name in sorted(dirs):
            link = here / name
            if link.is_symlink():
                raise UnsafePath(
                    f"{link} is a link to a folder ({os.readlink(link)}); links to folders are "
                    "not followed: copy the files into the task folder"
                )
        for name in files:
            path = here / name
            if path.is_symlink() and not is_within(folder, path):
                raise UnsafePath(
                    f"{path} is a link to {os.readlink(path)}, outside the task folder; "
                    "copy the file into the folder instead"
                )
            if path.is_file():
                found.append(path)
                if len(found) > max_files:
                    raise ValueError(
                        f"{folder}: more than {max_files:,} files; a task folder this large is "
                        "almost surely the wrong folder"
                    )
    return iter(sorted(found))


def read_text_bounded(
    path: Path, limit_bytes: int, *, what: str = "file", setting: str | None = None
) -> str:
    """The UTF-8 text of `path`, refused before reading when it is not a regular file (a
    FIFO, a device, a folder: reading one could block forever or never end) or is larger
    than `limit_bytes`. Raises ValueError with the kind, or the size, the limit and the
    setting that raises it, if any; OSError when it cannot be opened."""
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(
                f"{path}: is {_kind(info.st_mode)}, not a regular file; give the {what} itself"
            )
        if info.st_size > limit_bytes:
            raise ValueError(
                f"{path}: the {what} is {info.st_size:,} bytes, over the limit of "
                f"{limit_bytes:,}; split it"
                + (f", or raise {setting} if it really is this large" if setting else "")
            )
    except BaseException:
        os.close(handle)
        raise
    with os.fdopen(handle, "rb") as source:
        data = source.read(limit_bytes + 1)
    if len(data) > limit_bytes:  # it grew after the check
        raise ValueError(f"{path}: the {what} is over the limit of {limit_bytes:,} bytes; split it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


MAX_DEPTH = 64  # nesting of objects and lists; real task files stay under 15
MAX_YAML_NODES = 2_000_000  # nodes of a YAML document with its aliases expanded


def check_depth(data: Any, source: str) -> None:
    """ValueError when `data` nests deeper than MAX_DEPTH (checked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(
                f"{source}: nested more than {MAX_DEPTH} levels deep; no task or rubric file "
                "is this deep, so this is probably the wrong file"
            )
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def parse_json(text: str, source: str | Path) -> Any:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ValueError(
            f"{source}: nested more than {MAX_DEPTH} levels deep; no task or rubric file is "
            "this deep, so this is probably the wrong file"
        ) from None
    check_depth(data, str(source))
    return data


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses documents whose aliases expand past MAX_YAML_NODES nodes or
    that nest past MAX_DEPTH (the "billion laughs" bomb is a few hundred bytes)."""

    def construct_document(self, node):
        _check_yaml_size(node, self.name)
        return super().construct_document(node)


def _check_yaml_size(root, source: str) -> None:
    sizes: dict[int, int] = {}
    stack = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if depth > MAX_DEPTH:
            raise ValueError(f"{source}: YAML nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            continue
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if children_done:
            total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_YAML_NODES:
                raise ValueError(
                    f"{source}: the YAML expands to more than {MAX_YAML_NODES:,} values through "
                    "its aliases (&anchor / *alias); write the values out or use fewer aliases"
                )
            sizes[id(node)] = total
        else:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)


def parse_yaml(text: str, source: str | Path) -> Any:
    loader = _BoundedLoader(text)
    loader.name = str(source)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: invalid YAML: {exc}") from None
    except RecursionError:
        raise ValueError(f"{source}: YAML nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a temporary file beside it, renamed)."""
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def jsonl_and_markdown(out: Path | str) -> tuple[Path, Path]:
    """OUT.jsonl and OUT.md for an output name given by a user (a suffix .jsonl or .md on it
    is dropped first). Raises ValueError for a folder or a missing parent folder."""
    out = Path(out)
    if out.suffix in (".jsonl", ".md"):
        out = out.with_suffix("")
    if out.is_dir():
        raise ValueError(f"{out}: is a folder; give a file name such as {out / 'out'}")
    if not out.parent.is_dir():
        raise ValueError(f"{out.parent}: no such folder")
    return out.with_name(out.name + ".jsonl"), out.with_name(out.name + ".md")
