"""disembed: split multilingual sentence embeddings into meaning and language, and use the meaning.

The public API::

    from disembed import (load_encoder, cached, build_training_set, fit_method, evaluate,
                          make_method, load_disentangler, RunSpec, run, BenchConfig, run_bench)
"""

from __future__ import annotations

import logging

from . import _openmp

_openmp.spin_for_the_command_line()  # first: only in the command line, before torch loads
from .analysis import compare_scores, language_id_probe
from .data.languages import normalize_language
from .data.parallel import ParallelPairs, read_parallel_files, read_parallel_tsv
from .data.training_set import build_training_set
from .encoders import DEFAULT_ENCODER, Encoder, EncoderIdentity, load_encoder
from .encoders.cached import cached
from .evaluation import EvalOptions
from .experiment import (
    BenchConfig,
    RunSpec,
    TrainingData,
    Workspace,
    embed_pairs,
    evaluate,
    fit_method,
    run,
    run_bench,
)
from .experiment.analyse import AnalysisConfig, run_analyses
from .filtering import FilterConfig, PairScorer, filter_bitext
from .methods import METHODS, Disentangler, load_disentangler, make_method
from .methods.language_id import LanguagePrediction
from .methods.routing import tags_with_scripts
from .methods.text_path import TextMeaning, text_meaning
from .mining import MineConfig, mine_embeddings, mine_files, score_tsv, search_files
from .progress import set_progress
from .results import ExperimentResult, RunResult
from .saved_model import SavedModel, calibrate_saved
from .serving import export_model
from .training import TrainConfig
from .version import __version__

logging.getLogger("disembed").addHandler(logging.NullHandler())

__all__ = [
    "__version__", "AnalysisConfig", "BenchConfig", "DEFAULT_ENCODER", "Disentangler",
    "Encoder", "EncoderIdentity", "EvalOptions", "ExperimentResult", "FilterConfig",
    "LanguagePrediction", "PairScorer", "filter_bitext",
    "METHODS", "MineConfig", "calibrate_saved", "normalize_language",
    "export_model",
    "ParallelPairs", "RunResult", "RunSpec", "SavedModel", "TrainConfig", "TrainingData",
    "Workspace",
    "build_training_set", "cached", "compare_scores", "embed_pairs", "evaluate", "fit_method",
    "language_id_probe", "load_disentangler", "load_encoder", "make_method", "mine_embeddings",
    "mine_files", "read_parallel_files", "read_parallel_tsv", "run", "run_analyses", "run_bench",
    "score_tsv", "search_files", "set_progress", "tags_with_scripts", "text_meaning",
    "TextMeaning",
]
