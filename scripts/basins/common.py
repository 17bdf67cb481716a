"""Shared plumbing of the seed-basin study (issue 37): embeddings held in memory, the test
and validation sets built once, fits and scores in one process, results as JSON.

Everything reads the shared embedding cache (e5-small, the probe's backend); nothing here
encodes a sentence the cache lacks without saying so (``Bank`` logs it). Test scores are
computed exactly as ``disembed scale`` computes them (the project's own tasks and views,
every item), so the figures are comparable with docs/scaling.md.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from disembed.analysis.significance import task_items
from disembed.evaluation import DEFAULT_TASKS, EvalOptions, TaskScores
from disembed.evaluation.qe import WMT20QETask
from disembed.experiment import RunSpec, TrainingData, open_encoder
from disembed.experiment.spec import DEFAULT_TRAIN_LANGUAGES
from disembed.experiment.steps import UNTAGGED_VIEW, load_training_set, with_untagged
from disembed.experiment.tasks import build_tasks
from disembed.util.files import atomic_write_text

logger = logging.getLogger("basins")

TEST_OPTIONS = EvalOptions(max_items=None, task_options={"tatoeba": {"languages": "tatoeba-14"}})
MAIN = ("tatoeba", "sts17", "wmt20-qe")


class Bank:
    """``encode(texts)`` from an in-memory copy of the shared cache (one lookup per text)."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if missing:
            vecs = self.encoder.encode(missing, batch_size=batch_size)
            self.memo.update(zip(missing, vecs, strict=True))
        return np.stack([self.memo[t] for t in texts])


@dataclass
class Pairs:
    """Embedded training pairs: ``src``/``tgt`` (n, d), languages per row, digest."""

    src: np.ndarray
    tgt: np.ndarray
    src_lang: list[str]
    tgt_lang: list[str]
    digest: str

    def __len__(self) -> int:
        return len(self.src)


def embed(bank: Bank, pairs) -> Pairs:
    both = bank.encode(list(pairs.src) + list(pairs.tgt))
    n = len(pairs)
    return Pairs(both[:n], both[n:], list(pairs.src_lang), list(pairs.tgt_lang),
                 pairs.digest())


class Study:
    """The encoder, the training data of a protocol, the test tasks and QE dev, in memory."""

    def __init__(self, encoder: str = "e5-small") -> None:
        self.encoder_name = encoder
        self.bank = Bank(open_encoder(RunSpec(encoder=encoder)))
        self._tasks = None
        self._dev = None

    def data(self, pairs_per_language: int | None, holdout: int = 0, seed: int = 0
             ) -> tuple[Pairs, Pairs | None]:
        """Training pairs (and held-out pairs when ``holdout``) of the pool."""
        built = load_training_set(TrainingData(DEFAULT_TRAIN_LANGUAGES, pairs_per_language,
                                               seed=seed, holdout_per_language=holdout),
                                  DEFAULT_TASKS)
        held = embed(self.bank, built.heldout) if len(built.heldout) else None
        return embed(self.bank, built.pairs), held

    @property
    def tasks(self):
        if self._tasks is None:
            self._tasks = build_tasks(list(DEFAULT_TASKS), TEST_OPTIONS)
        return self._tasks

    @property
    def dev(self) -> WMT20QETask:
        if self._dev is None:
            self._dev = WMT20QETask("dev")
        return self._dev

    def test_scores(self, model, tasks: Sequence[str] = MAIN) -> list[TaskScores]:
        """Every test item of the named tasks, gold tags and untagged (as ``scale``)."""
        views = with_untagged(model)
        return [t.evaluate(self.bank.encode, views) for t in self.tasks
                if t.metadata.name in tasks]

    def qe_dev(self, model) -> dict[str, float]:
        """WMT20 QE dev x100, gold tags (``qe_dev``) and untagged (``qe_dev_notag``)."""
        scores = self.dev.evaluate(self.bank.encode, with_untagged(model))
        out = {"qe_dev": 100 * scores.main_score("meaning")}
        if UNTAGGED_VIEW in scores.views():
            out["qe_dev_notag"] = 100 * scores.main_score(UNTAGGED_VIEW)
        return out


def main_scores(scores: list[TaskScores]) -> dict[str, float]:
    """``{task: x100, task_notag: x100}`` of the main scores."""
    out = {}
    for s in scores:
        out[s.task] = 100 * s.main_score("meaning")
        if UNTAGGED_VIEW in s.views():
            out[s.task + "_notag"] = 100 * s.main_score(UNTAGGED_VIEW)
    return out


def items_of(scores: list[TaskScores]) -> dict[str, np.ndarray]:
    """Per-item arrays of every main score (meaning and untagged), for the bootstrap."""
    out = {}
    for s in scores:
        for view in ("meaning", UNTAGGED_VIEW):
            if view in s.views():
                items, strata, statistic = task_items(s, view)
                out[f"{s.task}|{view}|{statistic}"] = items
                out[f"{s.task}|strata"] = strata.astype(str)
    return out


def fit(method: str, params: dict[str, Any], data: Pairs, *,
        on_epoch_end: Callable[[dict], None] | None = None):
    """``method`` with ``params`` fitted on ``data`` (quietly)."""
    from disembed.methods import make_method

    model = make_method(method, **params)
    t0 = time.perf_counter()
    kwargs = {"on_epoch_end": on_epoch_end} if on_epoch_end and model.fit_accepts(
        "on_epoch_end") else {}
    model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang, **kwargs)
    model.fit_seconds_ = time.perf_counter() - t0
    return model


def history_summary(model) -> dict[str, Any] | None:
    hist = getattr(model, "history_", None)
    if hist is None:
        return None
    return {"best_epoch": hist.best_epoch, "epochs": len(hist.epochs), "steps": hist.steps,
            "stop_reason": hist.stop_reason,
            "val_loss": [round(e["val_loss"], 6) for e in hist.epochs],
            "train_loss": [round(e["train_loss"], 6) for e in hist.epochs]}


def load_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def save_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True, default=float) + "\n")


def open_study(args, **config) -> tuple["Study", Any, Any, dict]:
    """The start every study script shares: logging, the in-memory study, its training data
    (``args.pairs_per_language``, ``args.holdout`` held out), and the results file
    ``args.out`` read back (resumable) with its ``config`` set on first use: the pairs, their
    digest, the hold-out and ``config``. ``(study, data, held, results)``."""
    setup_logging()
    study = Study()
    data, held = study.data(args.pairs_per_language, args.holdout)
    results = load_json(args.out)
    results.setdefault("config", {"pairs": len(data), "digest": data.digest,
                                  "holdout": args.holdout, **config})
    return study, data, held, results


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("basins").setLevel(logging.INFO)
    os.environ.setdefault("DISEMBED_PROGRESS", "0")


def fmt(scores: dict[str, float], keys: Sequence[str] = ("tatoeba", "sts17", "wmt20-qe",
                                                          "wmt20-qe_notag")) -> str:
    return " / ".join(f"{scores[k]:.2f}" if k in scores else "-" for k in keys)
