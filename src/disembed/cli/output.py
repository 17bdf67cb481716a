"""What the command line shows while a verb runs: log lines and progress bars that do not
trample each other, and ``-q`` / ``--no-progress`` reaching the libraries underneath.

* Log records go through tqdm's logging redirect, so a log line is written above the live
  bar instead of onto its line.
* ``--no-progress`` (and ``-q``) switch off disembed's bars (``DISEMBED_PROGRESS=0``), the
  Hugging Face Hub's and transformers' bars (``HF_HUB_DISABLE_PROGRESS_BARS``, and their
  switches when they are already imported), and tqdm bars in worker processes started
  during the verb (``TQDM_DISABLE``, read when tqdm is imported).
* ``-q`` also keeps transformers, sentence-transformers, Hugging Face Hub and tokenizers at
  errors only (``TRANSFORMERS_VERBOSITY`` and their loggers).

The environment is changed for the verb's run and restored afterwards, so an in-process
caller (a test, a notebook) gets its own settings back.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import ExitStack, contextmanager
from typing import Iterator

from tqdm.contrib.logging import logging_redirect_tqdm

#: the loggers of the libraries a verb may load (sentence-transformers models, the Hub)
LIBRARY_LOGGERS = ("transformers", "sentence_transformers", "huggingface_hub", "tokenizers",
                   "filelock", "urllib3")
_NO_BARS = {"DISEMBED_PROGRESS": "0", "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
_QUIET = {"TRANSFORMERS_VERBOSITY": "error"}


@contextmanager
def verb_output(*, quiet: bool, no_progress: bool) -> Iterator[None]:
    """The run of one verb: log lines above the bars; the switches passed on (module doc)."""
    settings = dict(_NO_BARS) if (quiet or no_progress) else {}
    if quiet:
        settings.update(_QUIET)
    with ExitStack() as stack:
        stack.enter_context(_environment(settings))
        if settings:
            stack.enter_context(_imported_library_bars_off())
        if quiet:
            stack.enter_context(_logger_levels(LIBRARY_LOGGERS, logging.ERROR))
        stack.enter_context(logging_redirect_tqdm())
        yield


@contextmanager
def _environment(settings: dict[str, str]) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _logger_levels(names: tuple[str, ...], level: int) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, old in zip(loggers, before, strict=True):
            lg.setLevel(old)


@contextmanager
def _imported_library_bars_off() -> Iterator[None]:
    """Libraries imported before the verb read the environment already: use their switches
    (and give each back as it was)."""
    undo = []
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            undo.append(hf_logging.enable_progress_bar)
    if "huggingface_hub" in sys.modules:
        from huggingface_hub import utils as hub

        if not hub.are_progress_bars_disabled():
            hub.disable_progress_bars()
            undo.append(hub.enable_progress_bars)
    try:
        yield
    finally:
        for step in undo:
            step()
