"""Reading reliability data from CSV: one row per rater, one column per unit."""

from pathlib import Path

import numpy as np
import pandas as pd

MISSING = {"", "*", ".", "na", "nan", "NA", "NaN"}
RATER_HEADERS = {"", "rater", "raters", "coder", "observer", "annotator", "expert"}


def read_reliability_csv(path: Path | str, level: str = "ordinal") -> np.ndarray:
    """A (raters x units) array. The first row names the units; the first column names the
    raters when its header is empty or rater/coder/observer/annotator/expert (or, for numeric
    levels, when it holds no numbers); empty cells (or *, ., NA) are missing. Nominal data
    may be text (coded in order of first appearance); other levels need numbers. Raises
    ValueError with the row and column of the first bad cell."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if frame.empty or frame.shape[1] == 0:
        raise ValueError(f"{path}: no ratings (expected a header row and one row per rater)")
    header = str(frame.columns[0]).strip().lower()
    first = frame.iloc[:, 0].str.strip()
    textual = not pd.to_numeric(first.where(~first.isin(MISSING)), errors="coerce").notna().any()
    if (
        header in RATER_HEADERS
        or header.startswith("unnamed:")
        or (level != "nominal" and textual and bool((~first.isin(MISSING)).any()))
    ):
        frame = frame.iloc[:, 1:]
    cells = frame.apply(lambda c: c.str.strip())
    missing = cells.isin(MISSING)
    numbers = cells.apply(pd.to_numeric, errors="coerce")
    bad = numbers.isna() & ~missing
    if bad.any().any():
        if level != "nominal":
            row, col = np.argwhere(bad.to_numpy())[0]
            raise ValueError(
                f"{path}: row {row + 2}, column {frame.columns[col]!r}: {cells.iat[row, col]!r} "
                f"is not a number; {level} data must be numeric (use --level nominal for labels)"
            )
        codes, _ = pd.factorize(cells.where(~missing).to_numpy().ravel(), sort=False)
        data = codes.reshape(cells.shape).astype(float)
        data[data < 0] = np.nan
        return data
    return numbers.where(~missing).to_numpy(dtype=float)
