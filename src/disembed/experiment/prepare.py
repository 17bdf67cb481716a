"""Encoding at scale, ahead of training: fill the embedding cache with a whole training
pool and the evaluation sets, in resumable steps.

Steps run in the order a study needs them: the evaluation sets, the held-out validation
pairs, then the training pool in growing prefixes (``tiers``, e.g. 500, 2000, 5000 pairs
per language, then everything). Each step encodes only what the cache lacks, in chunks
that are stored as they finish, so the job can be interrupted at any moment (Ctrl-C,
``kill``, a reboot) and run again to continue; ``bench``, ``train`` and ``tune`` then read
the cache and encode nothing. Safe to run in the background (``nohup disembed prepare
... &``) while other work uses the finished steps.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..data.parallel import ParallelPairs
from ..encoders.base import supported_languages
from ..encoders.cached import CachedEncoder
from ..evaluation import DEFAULT_TASKS, EvalOptions
from ..exceptions import ConfigError
from .spec import DEFAULT_TRAIN_LANGUAGES, RunSpec, TrainingData, Workspace
from .steps import load_training_set, open_encoder
from .tasks import build_tasks, check_tasks

logger = logging.getLogger(__name__)


@dataclass
class PrepareConfig:
    """What ``prepare`` encodes; ``pairs_per_language=None`` means the whole pool."""

    encoders: list[str] = field(default_factory=lambda: ["e5-small"])
    languages: list[str] = field(default_factory=lambda: list(DEFAULT_TRAIN_LANGUAGES))
    pairs_per_language: int | None = None
    tiers: list[int] = field(default_factory=lambda: [500, 2000, 5000])
    holdout_per_language: int = 0
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    evaluation: EvalOptions = field(default_factory=EvalOptions)
    seed: int = 0
    #: where it reads and writes (data, cache and its dtype, encoding batch size, force)
    workspace: Workspace = field(default_factory=Workspace)

    def __post_init__(self) -> None:
        if not self.encoders:
            raise ConfigError("prepare needs at least one encoder, e.g. encoders=['e5-small']")
        bad = [t for t in self.tiers if isinstance(t, bool) or not isinstance(t, int) or t < 1]
        if bad:
            raise ConfigError(f"tiers are pair counts per language (positive integers); got "
                              f"{bad}")
        self.tasks = list(check_tasks(self.tasks))
        self.training_data()  # validates languages and sizes now

    def training_data(self) -> TrainingData:
        return TrainingData(tuple(self.languages), self.pairs_per_language, seed=self.seed,
                            holdout_per_language=self.holdout_per_language)


@dataclass
class PreparedStep:
    """One step: how many distinct sentences it needs and how many were encoded now."""

    encoder: str
    step: str
    sentences: int
    encoded: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.encoded / self.seconds if self.encoded and self.seconds else float("nan")


def prepare(config: PrepareConfig) -> list[PreparedStep]:
    """Encode every step of ``config`` for every encoder; see the module docstring."""
    workspace = config.workspace
    steps: list[PreparedStep] = []
    for spec in config.encoders:
        encoder = open_encoder(RunSpec(encoder=spec), workspace)
        for name, texts in plan(config, encoder, workspace):
            t0 = time.perf_counter()
            encoded = encoder.fill(texts, batch_size=workspace.batch_size,
                                   desc=f"{spec}: {name}")
            steps.append(PreparedStep(spec, name, len(set(texts)), encoded,
                                      time.perf_counter() - t0))
            logger.info("%s %s: %d sentences, %d encoded now (%.0f s)", spec, name,
                        steps[-1].sentences, encoded, steps[-1].seconds)
    return steps


def plan(config: PrepareConfig, encoder: CachedEncoder, workspace: Workspace
         ) -> list[tuple[str, list[str]]]:
    """The steps for one encoder, in order: evaluation sets, held-out pairs, pool tiers."""
    out = []
    supported = supported_languages(encoder)
    for task in build_tasks(config.tasks, config.evaluation, data_dir=workspace.data_dir,
                            supported=supported):
        texts = [t for subset in task.load_subsets() for sub in [task.subsample(subset)]
                 for t in sub.texts_a + sub.texts_b]
        out.append((f"evaluation: {task.metadata.name}", texts))
    data = config.training_data()
    if supported is not None:
        kept = tuple(x for x in data.languages if x in supported)
        if kept != data.languages:
            logger.info("%s does not support %s; its pool leaves them out", encoder.name,
                        sorted(set(data.languages) - set(kept)))
        data = TrainingData(kept, data.pairs_per_language, seed=data.seed,
                            holdout_per_language=data.holdout_per_language)
    built = load_training_set(data, config.tasks, workspace)
    if len(built.heldout):
        out.append((f"held-out ({config.holdout_per_language} per language)",
                    _texts(built.heldout)))
    biggest = max((r.used for r in built.languages), default=0)
    for n in sorted(t for t in set(config.tiers) if t < biggest):
        out.append((f"pool: {n} per language", _texts(_prefix(built.pairs, n))))
    size = "all" if config.pairs_per_language is None else config.pairs_per_language
    out.append((f"pool: {size} per language", _texts(built.pairs)))
    return out


def _prefix(pairs: ParallelPairs, n: int) -> ParallelPairs:
    """The first ``n`` pairs of each language (the training set of size ``n``)."""
    seen: dict[str, int] = {}
    keep = []
    for i, lang in enumerate(pairs.src_lang):
        seen[lang] = seen.get(lang, 0) + 1
        if seen[lang] <= n:
            keep.append(i)
    return pairs.subset(keep)


def _texts(pairs: ParallelPairs) -> list[str]:
    return list(pairs.src) + list(pairs.tgt)


def render_prepared(steps: Sequence[PreparedStep]) -> str:
    """The steps as a markdown table (sentences, encoded now, time, rate)."""
    lines = ["| encoder | step | sentences | encoded now | seconds | sentences/s |",
             "|---|---|---:|---:|---:|---:|"]
    for s in steps:
        rate = "" if s.rate != s.rate else f"{s.rate:.1f}"
        lines.append(f"| {s.encoder} | {s.step} | {s.sentences} | {s.encoded} | "
                     f"{s.seconds:.0f} | {rate} |")
    return "\n".join(lines) + "\n"


__all__ = ["PrepareConfig", "PreparedStep", "plan", "prepare", "render_prepared"]
