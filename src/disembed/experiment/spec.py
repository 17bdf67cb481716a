"""What one run is: a typed :class:`RunSpec`, and where it runs: a :class:`Workspace`.

A spec holds everything that changes a run's result (encoder, method and its
hyperparameters, training data, tasks and their options, seeds); its
:meth:`RunSpec.fingerprint` decides whether a finished run can be reused. The workspace
holds what does not change the result (data and cache folders, output folder, batch size).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from ..data.languages import known_languages, normalize_language
from ..encoders import DEFAULT_ENCODER
from ..evaluation import DEFAULT_TASKS, EvalOptions
from ..exceptions import ConfigError
from ..util.constraints import SEED, Boolean, Interval, Options
from ..util.fields import check_fields
from .tasks import check_task_options, check_tasks, eval_options_from_dict

logger = logging.getLogger(__name__)

#: Languages of the STS17 and WMT20 QE test sets, each trained paired with English.
DEFAULT_TRAIN_LANGUAGES = ("ar", "de", "es", "et", "fr", "it", "ne", "nl", "ro", "si", "tr", "zh")
#: Sized so that the first run on the default e5-small encodes ~28k sentences in about 15
#: minutes on 2 cores. The published protocol scores every item: ``max_items=None``.
DEFAULT_PAIRS_PER_LANGUAGE = 500
DEFAULT_MAX_EVAL_ITEMS = 300
MIN_PAIRS_PER_LANGUAGE = 20


@dataclass(frozen=True)
class TrainingData:
    """Where a run's translation pairs come from.

    Either the pool under ``<data>/parallel`` (``languages`` x English, at most
    ``pairs_per_language`` each, ``None`` = all, a seeded sample), with every pair that
    overlaps an evaluation set in ``keep_out`` removed (``None``: the sets of the run's
    tasks, or of the default tasks when the run has none), or your own TSV
    (``pairs_file`` with ``src_col``/``tgt_col``; languages default to the column names).
    ``holdout_per_language`` pairs of each language are set aside for validation (never
    trained on; see :func:`~disembed.data.training_set.build_training_set`).
    ``skip_missing``: languages without any pair in the data folder are left out (warned
    and reported) instead of failing the run.
    """

    _field_constraints: ClassVar[dict] = {
        "pairs_per_language": [Interval(int, MIN_PAIRS_PER_LANGUAGE, None), None],
        "holdout_per_language": [Interval(int, 0, None)],
        "seed": [SEED],
    }

    languages: tuple[str, ...] = DEFAULT_TRAIN_LANGUAGES
    pairs_per_language: int | None = DEFAULT_PAIRS_PER_LANGUAGE
    seed: int = 0
    keep_out: tuple[str, ...] | None = None
    holdout_per_language: int = 0
    skip_missing: bool = False
    pairs_file: str | None = None
    src_col: str | None = None
    tgt_col: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    skip_bad: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        if self.pairs_file is not None:
            if not (self.src_col and self.tgt_col):
                raise ConfigError(f"pairs_file {self.pairs_file!r} needs src_col and tgt_col "
                                  "naming its two columns (--src-col, --tgt-col)")
            if self.src_col == self.tgt_col:
                raise ConfigError(f"src_col and tgt_col are both {self.src_col!r}: that trains "
                                  "on copies of one column; name two different columns")
            self._check_file_languages()
            return
        if not self.languages:
            raise ConfigError("training data needs at least one language, e.g. ('de', 'zh')")
        given = tuple(normalize_language(x) for x in self.languages)
        langs = tuple(dict.fromkeys(given))
        if len(langs) < len(given):
            logger.warning("languages %s name %s more than once (after normalising the codes); "
                           "each is used once: %s", ",".join(self.languages),
                           ", ".join(x for x in langs if given.count(x) > 1), ",".join(langs))
        if "en" in langs:
            raise ConfigError("languages are paired with English; leave 'en' out of the list")
        object.__setattr__(self, "languages", langs)
        if self.keep_out is not None:
            object.__setattr__(self, "keep_out", tuple(self.keep_out))

    def _check_file_languages(self) -> None:
        """The languages of a pairs file must be language codes; a column name taken as one
        (no ``--src-lang``) must be a language this project knows: ``src`` and ``tgt`` are
        codes of real languages (Logudorese, Tagbanwa), but hardly what a header means."""
        for lang, col, option in ((self.src_lang, self.src_col, "--src-lang"),
                                  (self.tgt_lang, self.tgt_col, "--tgt-lang")):
            try:
                code = normalize_language(lang or col)
                if not lang and code not in known_languages():
                    raise ConfigError(code)
            except ConfigError:
                source = "is" if lang else "defaults to the column name"
                raise ConfigError(
                    f"the language of column {col!r} {source}, {lang or col!r}, which is not a "
                    f"language code; name it with {option} (e.g. {option} de)") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunSpec:
    """One run: fit ``method`` on ``data`` embedded by ``encoder`` (or load ``model_dir``),
    then evaluate ``tasks``.

    Attributes:
        method: a registered method name (``"seed"``, ``"oracle+meat"``, ...).
        params: its hyperparameters; a name the method does not take is an error.
        encoder: an encoder spec (``"e5-small"``, ``"st:path"``, ...); ``None`` with
            ``model_dir``: the saved model's encoder. encoder_options: e.g. pooling for st:.
        data: the training data; ``None`` for methods that need none (``baseline``) and
            for ``model_dir``.
        tasks / evaluation: task names (``[]``: train only; ``"all"``: every registered
            task), checked against the registry when the spec is made, and their shared
            options.
        model_dir: evaluate this saved model instead of fitting one.
        truncate: keep only the first ``truncate`` embedding dimensions (dimension sweeps).
        seed: the method's seed (initialisation, sampling).
        label: how tables name the run (default ``"<encoder> / <method>"``).
    """

    method: str = "baseline"
    params: dict = field(default_factory=dict)
    encoder: str | None = DEFAULT_ENCODER
    encoder_options: dict = field(default_factory=dict)
    data: TrainingData | None = None
    tasks: tuple[str, ...] = DEFAULT_TASKS
    evaluation: EvalOptions = field(
        default_factory=lambda: EvalOptions(max_items=DEFAULT_MAX_EVAL_ITEMS))
    model_dir: str | None = None
    truncate: int | None = None
    seed: int = 0
    label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", check_tasks(self.tasks))  # checked once, here
        check_task_options(self.evaluation)
        if self.model_dir is None and self.encoder is None:
            raise ConfigError("a run needs an encoder spec (e.g. 'e5-small') unless it "
                              "evaluates a saved model (model_dir)")
        if self.model_dir is not None and self.data is not None:
            raise ConfigError("a run either fits on training data or evaluates a saved "
                              "model (model_dir), not both")
        if self.truncate is not None and (not isinstance(self.truncate, int) or
                                          self.truncate < 1):
            raise ConfigError(f"truncate must be a positive number of dimensions; got "
                              f"{self.truncate!r}")

    @property
    def display_label(self) -> str:
        return self.label or f"{self.encoder or 'model'} / {self.method}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evaluation"] = self.evaluation.to_dict()
        d["tasks"] = list(self.tasks)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        d = dict(data)
        if d.get("data") is not None:
            d["data"] = TrainingData(**{**d["data"], "languages": tuple(d["data"]["languages"])})
        if d.get("evaluation") is not None:
            d["evaluation"] = eval_options_from_dict(d["evaluation"])
        return cls(**d)

    def fingerprint(self) -> str:
        """Hash of what the result depends on (the label and nothing else left out)."""
        keys = {k: v for k, v in self.to_dict().items() if k != "label"}
        blob = json.dumps(keys, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_(self, **changes: Any) -> "RunSpec":
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Workspace:
    """Where runs read and write; nothing here changes a result.

    Attributes:
        data_dir: the data folder (default: ``$DISEMBED_DATA_DIR`` or ``../shared/data``).
        cache_dir / cache_dtype: the embedding cache (default ``$DISEMBED_CACHE_DIR`` or
            ``~/.cache/disembed``), stored as float32 or float16.
        batch_size: encoding batch size.
        force: redo finished runs instead of reusing them.
    """

    _field_constraints: ClassVar[dict] = {"cache_dtype": [Options("float32", "float16")],
                                           "batch_size": [Interval(int, 1, None)],
                                           "force": [Boolean()]}

    data_dir: str | None = None
    cache_dir: str | None = None
    cache_dtype: str = "float32"
    batch_size: int = 64
    force: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


__all__ = ["DEFAULT_MAX_EVAL_ITEMS", "DEFAULT_PAIRS_PER_LANGUAGE", "DEFAULT_TRAIN_LANGUAGES",
           "RunSpec", "TrainingData", "Workspace"]
