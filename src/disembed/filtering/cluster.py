"""``filter`` on a cluster: each chunk a task, the driver streaming the input.

The chunks of a bitext are scored independently (:mod:`.filter`), so each is one task on
an executor of :mod:`disembed.mining.distributed` (Ray: ``connect("local:4")``, ``"auto"``,
``"ray://host:10001"``; or ``InProcess``). A task gets the chunk's pairs and a
:class:`ScorerSpec`, builds the scorer once per worker process (the saved model and its
encoder behind the embedding cache, as the command line does), scores the chunk and writes
its part file atomically, as the single-process job does; the driver then writes the
outputs from the parts. The parts' rows depend only on their chunk, so the outputs equal the
single-process run's byte for byte, and a retried task (its worker died) writes the same
part again. The driver holds at most ``window`` chunks in flight.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..data.bitext import BitextChunk
from ..encoders import DEFAULT_ENCODER, load_encoder
from ..encoders.cached import cached
from ..saved_model import SavedModel
from ..util.files import atomic_write_bytes
from .language_check import make_check
from .rules import RuleConfig
from .scoring import PairScorer


@dataclass(frozen=True)
class ScorerSpec:
    """What a worker needs to rebuild the driver's :class:`~.scoring.PairScorer`: the saved
    ``model`` folder (or none), the ``encoder`` spec (``None``: the model's own), the
    language ``check`` and its candidate ``languages``, the rules, ``k``, the batch size and
    the embedding cache folder."""

    model: str | None = None
    encoder: str | None = None
    check: str = "auto"
    languages: tuple[str, ...] = ()
    rules: RuleConfig = field(default_factory=RuleConfig)
    k: int = 4
    batch_size: int = 64
    cache_dir: str | None = None

    def build(self) -> PairScorer:
        if self.model:
            saved = SavedModel.load(self.model, self.encoder)
            encoder, model = cached(saved.encoder, self.cache_dir), saved.disentangler
        else:
            encoder, model = cached(load_encoder(self.encoder or DEFAULT_ENCODER),
                                    self.cache_dir), None
        return PairScorer(encoder, model, make_check(self.check, model,
                                                     list(self.languages) or None),
                          rules=self.rules, k=self.k, batch_size=self.batch_size)


@functools.lru_cache(maxsize=2)
def _scorer(spec: ScorerSpec) -> PairScorer:
    return spec.build()


def score_chunk_task(spec: ScorerSpec, chunk: BitextChunk, languages: tuple, part: str,
                     rows) -> str:
    """Score ``chunk`` with the scorer of ``spec`` and write its part file ``part``
    (``rows``: the function turning a chunk and its scores into the part's lines)."""
    scorer = _scorer(spec)
    scores = scorer.score(chunk.src, chunk.tgt)
    if scorer.check is not None:
        scores = scorer.judge(scores, chunk.src, chunk.tgt, *languages)
    atomic_write_bytes(part, rows(chunk, scores))
    return part
