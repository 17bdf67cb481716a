"""disembed: split multilingual sentence embeddings into meaning and language, and use the meaning.

The public API::

    from disembed import (load_encoder, cached, build_training_set, fit_method, evaluate,
                          make_method, load_disentangler, run_bench, BenchConfig)
"""

from __future__ import annotations

import logging

from .version import __version__  # noqa: E402

logging.getLogger("disembed").addHandler(logging.NullHandler())

from .analysis import AnalysisConfig, compare_scores, language_id_probe, run_analyses  # noqa: E402
from .bench import BenchConfig, BenchResult, run_bench  # noqa: E402
from .data.parallel import ParallelPairs, read_parallel_files, read_parallel_tsv  # noqa: E402
from .data.training_set import build_training_set  # noqa: E402
from .encoders import DEFAULT_ENCODER, Encoder, EncoderIdentity, load_encoder  # noqa: E402
from .methods import METHODS, Disentangler, load_disentangler, make_method  # noqa: E402
from .mining import MineConfig, mine_embeddings, mine_files, score_tsv, search_files  # noqa: E402
from .pipeline import cached, embed_pairs, evaluate, fit_method  # noqa: E402
from .results import RunResult  # noqa: E402
from .training import TrainConfig  # noqa: E402

__all__ = [
    "__version__", "BenchConfig", "BenchResult", "DEFAULT_ENCODER", "Disentangler", "Encoder",
    "EncoderIdentity", "METHODS", "ParallelPairs", "RunResult", "TrainConfig",
    "build_training_set", "cached", "embed_pairs", "evaluate", "fit_method",
    "load_disentangler", "load_encoder", "make_method", "read_parallel_files",
    "read_parallel_tsv", "run_bench",
]
__all__ += ["AnalysisConfig", "compare_scores", "language_id_probe", "run_analyses"]
__all__ += ["MineConfig", "mine_embeddings", "mine_files", "score_tsv", "search_files"]
from .hardware import configure_threads, probe  # noqa: E402

__all__ += ["configure_threads", "probe"]
