"""What the command line shows: bars that move per batch and stay as a summary line, log
lines above the bar, and -q / --no-progress reaching the libraries underneath."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from disembed.cli.output import verb_output
from disembed.encoders import HashEncoder
from disembed.encoders.cached import CachedEncoder
from disembed.progress import advance, progress_bar, reporting_to


class BatchReporting(HashEncoder):
    """The hash encoder, reporting each batch as the real encoders do."""

    def encode(self, texts, *, batch_size=64):
        out = []
        for start in range(0, len(texts), batch_size):
            out.append(super().encode(texts[start:start + batch_size], batch_size=batch_size))
            advance(len(out[-1]))
        return np.concatenate(out)


def _positions(stderr: str) -> list[int]:
    """The counts a bar showed, in order (``' 12/40 '``)."""
    import re

    return [int(m) for m in re.findall(r"\| *(\d+)/\d+ ", stderr)]


@pytest.fixture
def bars_on(monkeypatch):
    monkeypatch.setenv("DISEMBED_PROGRESS", "1")
    logging.getLogger("disembed").setLevel(logging.INFO)
    yield
    logging.getLogger("disembed").setLevel(logging.NOTSET)


def test_encoding_moves_the_bar_after_every_batch_and_leaves_a_summary(tmp_path, capsys,
                                                                         bars_on, monkeypatch):
    from disembed.encoders import cached as cached_module

    every_update = lambda *a, **k: progress_bar(*a, mininterval=0, miniters=1, **k)  # noqa: E731
    monkeypatch.setattr(cached_module, "progress_bar", every_update)
    enc = CachedEncoder(BatchReporting(16), tmp_path, chunk_size=40)
    enc.fill([f"sentence {i}" for i in range(100)], batch_size=8, desc="encode test")
    err = capsys.readouterr().err
    shown = _positions(err)
    # every batch of 8 inside the chunks of 40 is shown, and each chunk ends at its count
    assert [n for n in shown if n % 8 == 0 and 0 < n < 40] == [8, 16, 24, 32]
    assert {40, 80, 100} <= set(shown) and shown[-1] == 100
    summary = err.rstrip("\n").split("\n")[-1].split("\r")[-1]  # what stays on screen
    assert summary.startswith("encode test: 100%") and "100/100" in summary


def test_advance_reaches_only_the_bar_in_its_block():
    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    advance(5)  # nobody listening: nothing happens
    with reporting_to(bar):
        advance(3)
    advance(7)
    assert bar.n == 3


def test_a_log_line_is_written_above_the_bar_not_onto_its_line(capsys, bars_on):
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with verb_output(quiet=False, no_progress=False):
            with progress_bar(10, "work") as bar:
                bar.update(5)
                logging.getLogger("disembed.test").warning("a log line")
                bar.update(5)
    finally:
        root.removeHandler(handler)
    lines = capsys.readouterr().err.split("\n")
    [line] = [x for x in lines if "a log line" in x]
    assert line.split("\r")[-1] == "a log line"  # the bar's line was cleared first


def test_quiet_and_no_progress_reach_the_libraries_and_are_given_back(monkeypatch):
    hf_logging = pytest.importorskip("transformers.utils.logging",
                                     reason="pip install 'disembed[st]'")

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert hf_logging.is_progress_bar_enabled()
    with verb_output(quiet=True, no_progress=False):
        assert os.environ["DISEMBED_PROGRESS"] == "0" and os.environ["TQDM_DISABLE"] == "1"
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert not hf_logging.is_progress_bar_enabled()
        assert logging.getLogger("transformers").level == logging.ERROR
        assert logging.getLogger("sentence_transformers").level == logging.ERROR
    assert hf_logging.is_progress_bar_enabled() and "TQDM_DISABLE" not in os.environ
    assert logging.getLogger("transformers").level != logging.ERROR
    with verb_output(quiet=False, no_progress=True):
        assert not hf_logging.is_progress_bar_enabled()
        assert logging.getLogger("transformers").level != logging.ERROR  # only -q quietens
    with verb_output(quiet=False, no_progress=False):
        assert hf_logging.is_progress_bar_enabled()


def test_no_progress_silences_bars_in_its_block_only(capsys, bars_on):
    from disembed.progress import no_progress

    with no_progress():
        with progress_bar(3, "hidden") as bar:
            bar.update(3)
    with progress_bar(3, "shown") as bar:
        bar.update(3)
    err = capsys.readouterr().err
    assert "hidden" not in err and "shown" in err
