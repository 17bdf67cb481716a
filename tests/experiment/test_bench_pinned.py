"""The bench's tables on the hash encoder, pinned to the last digit (the methods are
those that were the default when the golden file was written).

The golden file was written by the code before the experiment layer was rebuilt
(commit a7a906c); any change in what a bench computes or how it renders the tables
shows up here. Regenerate only for an intended change:
``DISEMBED_REGENERATE_GOLDEN=1 pytest tests/experiment/test_bench_pinned.py``.
"""

import os
import re
from pathlib import Path

from disembed.cli import main

GOLDEN = Path(__file__).parent / "golden" / "bench_hash_tables.md"


def _tables(report: str) -> str:
    """Every section of results.md but the machine-dependent ones (time, provenance)."""
    sections = re.split(r"\n(?=## )", report)
    kept = [s for s in sections
            if s.startswith("## ") and not s.startswith(("## Time", "## Provenance"))]
    return "\n".join(kept).strip() + "\n"


def test_default_bench_tables_on_the_hash_encoder_are_pinned(full_data_dir, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "bench"
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh",
                 "--methods", "baseline,mean-centering,seed", "--pairs-per-language", "40",
                 "--max-epochs", "3", "--out", str(out),
                 "--data-dir", str(full_data_dir), "-q"]) == 0
    tables = _tables((out / "results.md").read_text(encoding="utf-8"))
    if os.environ.get("DISEMBED_REGENERATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(tables, encoding="utf-8")
    assert tables == GOLDEN.read_text(encoding="utf-8")
