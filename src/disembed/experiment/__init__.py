"""The experiment layer: one :class:`RunSpec`, one :func:`run`, and the experiments built
from lists of specs (the bench, the analyses, sweeps).

Every verb of the command line calls this layer; it owns which tasks run with which
options, which hyperparameters a method gets, how a model is fitted and how a run is
recorded.
"""

from .bench import (
    DEFAULT_METHODS,
    DEFAULT_RECIPE,
    DEFAULT_RECIPE_PARAMS,
    BenchConfig,
    all_methods,
    run_bench,
)
from .params import (
    build_method,
    check_method_grids,
    check_method_params,
    method_params,
    shared_overrides,
)
from .run import RunHooks, RunOutputs, run
from .spec import (
    DEFAULT_MAX_EVAL_ITEMS,
    DEFAULT_PAIRS_PER_LANGUAGE,
    DEFAULT_TRAIN_LANGUAGES,
    RunSpec,
    TrainingData,
    Workspace,
)
from .steps import (
    embed_pairs,
    evaluate,
    fit_method,
    load_pairs,
    open_encoder,
)
from .tasks import build_tasks, check_tasks, kept_out_sets
from .validation import qe_dev_score, qe_dev_validator, validation_options

__all__ = ["DEFAULT_MAX_EVAL_ITEMS", "DEFAULT_METHODS", "DEFAULT_PAIRS_PER_LANGUAGE",
           "DEFAULT_RECIPE", "DEFAULT_RECIPE_PARAMS",
           "DEFAULT_TRAIN_LANGUAGES", "BenchConfig", "RunHooks", "RunOutputs", "RunSpec",
           "TrainingData", "Workspace", "all_methods", "build_method", "build_tasks",
           "check_method_grids", "check_method_params",
           "check_tasks", "embed_pairs", "evaluate", "fit_method",
           "kept_out_sets", "load_pairs", "method_params", "open_encoder", "qe_dev_score",
           "qe_dev_validator",
           "run", "run_bench", "shared_overrides", "validation_options"]
