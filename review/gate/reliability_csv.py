"""Reading reliability data from CSV: one row per rater, one column per unit."""

import csv
from pathlib import Path

import numpy as np
import pandas as pd
from itsmreview.files import read_text_bounded

MISSING = {"", "*", ".", "na", "nan", "NA", "NaN"}
RATER_HEADERS = {"", "rater", "raters", "coder", "observer", "annotator", "expert"}
MAX_BYTES = 64 * 2**20


def _rows(path: Path) -> list[list[str]]:
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give the CSV file")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = read_text_bounded(path, MAX_BYTES, what="reliability CSV").lstrip("\ufeff")
    rows = [row for row in csv.reader(text.splitlines()) if any(c.strip() for c in row)]
    if len(rows) < (2 if rows else 1):
        raise ValueError(
            f"{path}: no ratings (expected a header row naming the units, then one row per rater)"
        )
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise ValueError(
                f"{path}: row {number} has {len(row)} cells but the header has {width}; every "
                "rater row needs one cell per unit (leave missing ratings empty)"
            )
    return rows


def read_reliability_csv(
    path: Path | str, level: str = "ordinal", *, header: bool = True
) -> np.ndarray:
    """A (raters x units) array. The first row names the units (unless `header` is False:
    then units are numbered); the first column names the raters when its header is empty or
    rater/coder/observer/annotator/expert (or, for numeric levels, when it holds no numbers);
    empty cells (or *, ., NA) are missing. Nominal data may be text (coded in order of first
    appearance); other levels need finite numbers. Raises ValueError with the row and column
    of the first bad cell, and for a first row that cannot be a header (unit names empty or
    repeated: a header row is probably missing)."""
    path = Path(path)
    rows = _rows(path)
    if not header:
        rows = [[str(i) for i in range(1, len(rows[0]) + 1)], *rows]
    names = [c.strip() for c in rows[0]]
    body = pd.DataFrame(rows[1:], columns=range(len(names)), dtype=str)
    first_header = names[0].lower()
    first = body.iloc[:, 0].str.strip()
    textual = not pd.to_numeric(first.where(~first.isin(MISSING)), errors="coerce").notna().any()
    if first_header in RATER_HEADERS or (
        level != "nominal" and textual and bool((~first.isin(MISSING)).any())
    ):
        body, names = body.iloc[:, 1:], names[1:]
    if not names:
        raise ValueError(f"{path}: no unit columns")
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name == "" or name in seen:
            problem = "is empty" if name == "" else f"repeats column {seen[name] + 1}'s"
            raise ValueError(
                f"{path}: the unit name in column {index + 1} of the first row {problem}; the "
                "first row must name each unit once. If the file has no header row, add one "
                "(or pass --no-header): otherwise its first rater would be read as the header"
            )
        seen[name] = index
    cells = body.apply(lambda c: c.str.strip())
    cells.columns = names
    missing = cells.isin(MISSING)
    numbers = cells.apply(pd.to_numeric, errors="coerce")
    bad = (numbers.isna() | ~np.isfinite(numbers.fillna(0))) & ~missing
    if bad.any().any():
        if level != "nominal" or not numbers.isna().where(~missing, False).any().any():
            row, col = np.argwhere(bad.to_numpy())[0]
            problem = "is infinite" if np.isinf(numbers.iat[row, col]) else "is not a number"
            raise ValueError(
                f"{path}: row {row + 2}, column {names[col]!r}: {cells.iat[row, col]!r} {problem}; "
                f"{level} data must be finite numbers (use --level nominal for labels)"
            )
        codes, _ = pd.factorize(cells.where(~missing).to_numpy().ravel(), sort=False)
        data = codes.reshape(cells.shape).astype(float)
        data[data < 0] = np.nan
        return data
    return numbers.where(~missing).to_numpy(dtype=float)
