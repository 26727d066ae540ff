"""What every task format reader shares: the keys of the original document, errors, text blocks."""

import json
from pathlib import Path
from typing import Any

from itsmreview.files import parse_json, parse_yaml, read_text_bounded

__all__ = ["parse_json", "parse_yaml"]

ORIGINAL = "original"  # key under which a task keeps the document it was imported from
ORIGINAL_FORMAT = "original_format"


class FormatError(ValueError):
    """Input that does not follow its format; the message names file, path and fix."""


def read_task_text(path: Path) -> str:
    """A task file's text, refused before reading when larger than the configured limit."""
    from itsmreview.settings import get_settings

    if path.is_dir():
        raise FormatError(f"{path}: is a folder; give a task file (or a Harbor task folder)")
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    try:
        return read_text_bounded(
            path,
            get_settings().max_task_file_bytes,
            what="task file",
            setting="ITSMREVIEW_MAX_TASK_FILE_BYTES",
        )
    except ValueError as exc:
        raise FormatError(str(exc)) from None


def load_json(path: Path) -> Any:
    return parse_json(read_task_text(path), path)


def find_nul(data: Any, where: str = "$") -> str | None:
    """The JSON path of the first text (key or value) holding a NUL character, else None.
    NUL cannot be stored in PostgreSQL text and is never part of a real task."""
    stack = [(data, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return path
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"{path} (a key)"
                stack.append((item, f"{path}.{key}"))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))
    return None


def need(mapping: Any, key: str, where: str, kind: type | tuple = object) -> Any:
    if not isinstance(mapping, dict):
        raise FormatError(f"{where}: expected an object, found {type(mapping).__name__}")
    if key not in mapping:
        raise FormatError(f"{where}.{key}: required field is missing")
    value = mapping[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FormatError(f"{where}.{key}: expected {names}, found {type(value).__name__}")
    return value


def text_block(*parts: tuple[str, Any]) -> str:
    """Labelled paragraphs from (label, value) pairs, skipping empty values."""
    lines = []
    for label, value in parts:
        if value in (None, "", [], {}):
            continue
        if not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False, indent=1)
        lines.append(f"{label}: {value}" if label else value)
    return "\n\n".join(lines)


def arguments_of(raw: Any, where: str) -> dict:
    """Tool-call arguments as an object; JSON strings (OpenAI chat format) are decoded."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"{where}: tool-call arguments are not valid JSON: {exc.msg}"
            ) from None
    if not isinstance(raw, dict):
        raise FormatError(f"{where}: tool-call arguments must be an object")
    return raw
