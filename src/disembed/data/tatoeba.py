"""Tatoeba cross-lingual retrieval test (LASER / XTREME v1).

Layout under the data directory::

    tatoeba/tatoeba.<xxx>-eng.<xxx>   sentences in language xxx (ISO 639-3, Tatoeba's code)
    tatoeba/tatoeba.<xxx>-eng.eng     line i translates line i of the file above

Languages are named by their canonical code (``de``, ``zh``); the file codes are
Tatoeba's individual-language codes (``cmn`` for Chinese, ``swh``, ``pes``, ``zsm``,
``lvs``, ``ara``), found with :func:`~disembed.data.languages.to_iso3` and, failing
that, by scanning the folder for a code that normalizes to the same language.
Reference: Artetxe & Schwenk (2019), "Massively Multilingual Sentence Embeddings
for Zero-Shot Cross-Lingual Transfer and Beyond"; Hu et al. (2020), XTREME.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import ConfigError
from .io import read_aligned
from .languages import normalize_language, to_iso3
from .paths import missing_data, require_file, resolve_data_dir

logger = logging.getLogger(__name__)

FOLDER = "tatoeba"
_FILE = re.compile(r"^tatoeba\.([a-z]{2,3})-eng\.\1$")


@dataclass(frozen=True)
class TatoebaSet:
    """One language's Tatoeba test: ``source[i]`` (in ``lang``) translates ``english[i]``."""

    lang: str  # canonical code, e.g. "zh"
    file_code: str  # Tatoeba's code, e.g. "cmn"
    source: list[str]
    english: list[str]

    def __len__(self) -> int:
        return len(self.source)


def _file_codes(data_dir: Path) -> dict[str, str]:
    """canonical code -> Tatoeba file code, for every ``<xxx>-eng`` pair in the folder."""
    folder = data_dir / FOLDER
    if not folder.is_dir():
        raise missing_data("Tatoeba (the folder tatoeba/)", data_dir, "tatoeba")
    codes: dict[str, str] = {}
    for name in sorted(os.listdir(folder)):
        match = _FILE.match(name)
        if not match:
            continue
        code = match.group(1)
        try:
            canonical = normalize_language(code)
        except ConfigError:
            logger.warning("Tatoeba: skipping %s: unknown language code %r", name, code)
            continue
        codes.setdefault(canonical, code)
    return codes


def available_tatoeba_languages(data_dir: str | os.PathLike | None = None) -> list[str]:
    """Canonical codes of every language with a Tatoeba test file, sorted."""
    return sorted(_file_codes(resolve_data_dir(data_dir)))


def load_tatoeba(lang: str, data_dir: str | os.PathLike | None = None) -> TatoebaSet:
    """Load one language's Tatoeba test set.

    Args:
        lang: any code :func:`normalize_language` accepts (``de``, ``deu``, ``zh``, ``cmn``).
        data_dir: the data directory; ``None`` = :func:`resolve_data_dir`.

    Raises:
        ConfigError: the language has no Tatoeba file (the message lists the available ones).
        DataError: the two files differ in line count or hold an empty line (file and line named).
    """
    root = resolve_data_dir(data_dir)
    canonical = normalize_language(lang)
    code = to_iso3(canonical)
    folder = root / FOLDER
    if not (folder / f"tatoeba.{code}-eng.{code}").is_file():
        codes = _file_codes(root)
        if canonical not in codes:
            raise ConfigError(
                f"Tatoeba has no test set for language {lang!r} (canonical {canonical!r}); "
                f"expected {folder / f'tatoeba.{code}-eng.{code}'}. "
                f"Available: {', '.join(sorted(codes))}"
            )
        code = codes[canonical]
    src = require_file(folder / f"tatoeba.{code}-eng.{code}", f"Tatoeba {canonical}", "tatoeba")
    eng = require_file(folder / f"tatoeba.{code}-eng.eng", f"Tatoeba {canonical} (English side)",
                       "tatoeba")
    source, english, _ = read_aligned(src, eng)
    logger.debug("Tatoeba %s: %d pairs from %s", canonical, len(source), src)
    return TatoebaSet(lang=canonical, file_code=code, source=source, english=english)
