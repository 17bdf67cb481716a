"""One distinct line, one embedding: the de-duplication every job over crawl-shaped input
shares (mining, search, scoring, filtering).

Web crawls repeat lines (boilerplate, menus, cookie notices). A vector is a function of the
text only, and texts are embedded as :func:`~disembed.util.text.normalize_text` writes them,
so two lines with the same normalised text have the same vector: each is embedded (and
searched) once and the result is mapped back to every line with ``values[inverse]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .text import normalize_text


@dataclass(frozen=True)
class Distinct:
    """The distinct texts of a list, in order of first appearance.

    ``texts``: the distinct texts (as given: the first line of each group);
    ``inverse (n,) int64``: for each input line, the row of its text in ``texts``, so
    ``np.asarray(texts)[inverse]`` is the input again (up to Unicode form);
    ``first (u,) int64``: for each distinct text, the first input line that holds it."""

    texts: list[str]
    inverse: np.ndarray
    first: np.ndarray

    @property
    def duplicates(self) -> int:
        """How many input lines repeat an earlier one."""
        return len(self.inverse) - len(self.texts)

    def expand(self, values: np.ndarray) -> np.ndarray:
        """``values (u, ...)``, one row per distinct text, as one row per input line."""
        return np.asarray(values)[self.inverse]


def distinct(texts: Iterable[str]) -> Distinct:
    """The distinct texts of ``texts`` under :func:`~disembed.util.text.normalize_text`
    (NFC, control characters as spaces: the key the embedding cache uses), in order of first
    appearance. O(n) time, one dict entry per distinct text."""
    rows: dict[str, int] = {}
    kept: list[str] = []
    first: list[int] = []
    inverse: list[int] = []
    for i, text in enumerate(texts):
        key = normalize_text(text)
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(kept)
            kept.append(text)
            first.append(i)
        inverse.append(row)
    return Distinct(kept, np.asarray(inverse, np.int64), np.asarray(first, np.int64))
