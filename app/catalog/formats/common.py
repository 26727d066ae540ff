import json
from pathlib import Path
from typing import Any

ORIGINAL = "original"  # key under which a task keeps the document it was imported from
ORIGINAL_FORMAT = "original_format"


class FormatError(ValueError):
    """Input that does not follow its format; the message names file, path and fix."""


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text ({exc.reason})") from None


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
