"""Shared plumbing of the trained recipes: a head, the trainer, save/load of the head.

A subclass says which head it trains (:meth:`build_head`) and which constraint
terms with which weights form its own loss (:meth:`recipe_weights`); a recipe with an
adversary (MEAT) also builds one (:meth:`build_adversary`) and says what it
minimises (:meth:`adversary_loss`); everything else
(seeding, language ids, negatives, early stopping, checkpoints, strict loading)
lives here once, and so do two hyperparameters every trained recipe takes:

* ``oracle_variant`` (``None``: off; ``"paper"``, ``"official-new"``, ``"official-old"``,
  ``"official-main"``) and ``oracle_weight``: ORACLE's terms in that form, times that
  weight, are added to the recipe's (:attr:`term_weights`; see :mod:`.oracle_variants`).
  ``oracle+meat`` is Meat with ``oracle_variant="paper"``.
* ``center``: ``"none"`` or ``"language"``. With ``"language"`` the per-language means
  ``mu_lang`` of the training pairs (both sides, as :class:`.MeanCentering`) are
  subtracted from every input before the head: the head is trained on, and applied
  to, ``e - mu_lang``, and the language part gets ``mu_lang`` back at inference::

      m = M(e - mu_lang),    l = L(e - mu_lang) + mu_lang

  For SEED's head (``L(x) = x - M(x)``) this keeps ``m + l = e`` exactly (up to
  float rounding); for two-head recipes ``m + l = e`` holds as well as their
  reconstruction term made ``M(x) + L(x) = x`` on centred inputs. The training loss
  only sees centred inputs and parts (no ``mu``). A language not seen in training is
  handled by ``unknown_language`` exactly as mean-centering does it.

* ``mirror``: ``False`` (default) or ``True``: fit a second time from the mirrored start of
  the meaning bias and keep whichever of the two the ``validate`` callable given to
  :meth:`~NeuralDisentangler.fit` scores higher (:mod:`.orientation`: the two solutions
  the default recipe lands in by seed).

Three more go to the trainer unchanged (:class:`~disembed.training.TrainConfig`):
``deterministic`` (default ``True``: eager float32, bit-reproducible), ``speed``
(``"auto"``, ``"eager"``, ``"compiled"``) and ``precision`` (``"auto"``, ``"float32"``,
``"bfloat16"``). With bfloat16 only the head's products run in bfloat16; the loss
terms are computed in float32 (:func:`~disembed.training.full_precision`).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
import torch

from ..exceptions import CheckpointError, ConfigError, ShapeError
from ..training import Adversary, Batch, TrainConfig, full_precision, train
from ..util.constraints import SEED, Boolean, Interval, Options
from .base import Disentangler, Languages, as_language_array, fitting, resolving
from .constraints import BatchViews, add_weights, check_weights, needs_of, pick, weighted_loss
from .export_map import MeaningMap, centering_routes, single_route
from .guard import check_against_reference, holdout_split
from .heads import TwoHeads, start_near_identity, torch_layers
from .mean_centering import MeanCentering, check_unknown_language
from .oracle_variants import ORACLE_PAPER, ORACLE_VARIANTS, check_oracle_variant, oracle_weights
from .orientation import check_mirror, orient, start_bias

logger = logging.getLogger(__name__)

CENTER_MODES = ("none", "language")
#: the learning rates ``disembed tune`` tries for a trained recipe
LEARNING_RATES = [1e-4, 3e-4, 1e-3, 3e-3]


class NeuralDisentangler(Disentangler):
    """Base of recipes trained with the constraint library (SEED, intra/inter, ...)."""

    #: the recipe has no terms of its own (``oracle``): its loss is ORACLE's terms alone
    oracle_only: ClassVar[bool] = False
    _parameter_constraints = {
        "lr": [Interval(float, 0, None, closed="neither")],
        "batch_size": [Interval(int, 2, None)],
        "max_epochs": [Interval(int, 1, None), None],
        "patience": [Interval(int, 1, None)],
        "val_fraction": [Interval(float, 0, 0.5, closed="neither")],
        "seed": [SEED],
        "negatives": [Options("paper", "official")],
        "max_steps": [Interval(int, 1, None), None],
        "time_budget_seconds": [Interval(float, 0, None, closed="neither"), None],
        "oracle_variant": [Options(*ORACLE_VARIANTS), None],
        "oracle_weight": [Interval(float, 0, None)],
        "center": [Options(*CENTER_MODES)],
        "deterministic": [Boolean()],
        "speed": [Options("auto", "eager", "compiled")],
        "precision": [Options("auto", "float32", "bfloat16")],
        "init_scale": [Interval(float, 0, 1, closed="neither"), None],
        "hidden": [Interval(int, 0, None)],
        "mirror": [Boolean()],
        "reference_check": [Interval(float, 0, 0.5, closed="neither"), None],
        "min_epoch_steps": [Interval(int, 1, None), None],
    }

    def __init__(self, lr: float = 1e-4, batch_size: int = 512, max_epochs: int | None = None,
                 patience: int = 5, val_fraction: float = 0.1, seed: int = 0,
                 negatives: str = "paper", *, max_steps: int | None = None,
                 time_budget_seconds: float | None = None, oracle_variant: str | None = None,
                 oracle_weight: float = 1.0, center: str = "none",
                 unknown_language: str = "global", deterministic: bool = True,
                 speed: str = "auto", precision: str = "auto",
                 init_scale: float | None = None, mirror: bool = False,
                 reference_check: float | None = None,
                 min_epoch_steps: int | None = None) -> None:
        self.lr, self.batch_size, self.max_epochs = lr, batch_size, max_epochs
        self.patience, self.val_fraction, self.seed, self.negatives = (
            patience, val_fraction, seed, negatives)
        self.max_steps, self.time_budget_seconds = max_steps, time_budget_seconds
        self.oracle_variant, self.oracle_weight = oracle_variant, oracle_weight
        self.center, self.unknown_language = center, unknown_language
        self.deterministic, self.speed, self.precision = deterministic, speed, precision
        self.init_scale, self.mirror = init_scale, mirror
        self.reference_check, self.min_epoch_steps = reference_check, min_epoch_steps
        self._check_params()

    def _check_params(self) -> None:
        check_oracle_variant(self.oracle_variant, allow_none=not self.oracle_only)
        if self.center not in CENTER_MODES:
            raise ConfigError(f"center must be one of {CENTER_MODES}; got {self.center!r}")
        check_unknown_language(self.unknown_language)
        if self.reference_check is not None and (self.center != "language"
                                                 or isinstance(self, TwoHeadRecipe)):
            raise ConfigError("reference_check compares the fit with mean-centering and "
                              "blends the two, which needs SEED's one-layer head on centred "
                              f"inputs (seed-centered); {self.name} has another; leave "
                              "reference_check at None")
        if self.init_scale is not None and not 0 < self.init_scale < 1:
            raise ConfigError(f"init_scale must be in (0, 1), or None for the papers' random "
                              f"start; got {self.init_scale!r}")
        TrainConfig(deterministic=self.deterministic, speed=self.speed,  # type: ignore[arg-type]
                    precision=self.precision)  # type: ignore[arg-type]  # checks the three now

    @property
    def name(self) -> str:
        """``[oracle+]<method>[-centered]``: what this configuration is called."""
        label = self.method
        if self.oracle_variant is not None and not self.oracle_only:
            label = f"oracle+{label}"
        return f"{label}-centered" if self.center != "none" else label

    def papers(self) -> list[str]:
        """The recipe's paper, ORACLE's when its terms are on, mean-centering's when centred."""

        out = super().papers()
        if self.oracle_variant is not None and not self.oracle_only:
            out.append(ORACLE_PAPER)
        if self.center != "none":
            out.append(MeanCentering.paper + " (the per-language centring before the head)")
        return out

    @property
    def uses_language(self) -> bool:  # type: ignore[override]
        """A ``*-centered`` recipe subtracts ``mu_lang`` first, so it needs the language."""
        return self.center != "none"

    # --- what a recipe defines ---------------------------------------------
    def build_head(self, dim: int) -> torch.nn.Module:
        raise NotImplementedError

    def recipe_weights(self) -> Mapping[str, float]:
        """The recipe's own constraint terms and weights (without ORACLE's)."""
        raise NotImplementedError

    def build_adversary(self, dim: int) -> torch.nn.Module | None:
        """A module trained against the head (MEAT's discriminator); ``None``: no adversary."""
        return None

    def adversary_loss(self, batch: Batch) -> torch.Tensor:
        """What the adversary minimises on one batch (only with :meth:`build_adversary`)."""
        raise NotImplementedError

    def term_weights(self) -> dict[str, float]:
        """Every term of the loss: the recipe's, plus ORACLE's when ``oracle_variant`` is set."""
        oracle = ({} if self.oracle_variant is None
                  else oracle_weights(self.oracle_variant, self.oracle_weight))
        return add_weights(self.recipe_weights(), oracle)

    # --- training ------------------------------------------------------------
    def check_settings(self) -> None:
        """The training settings, checked by :class:`~disembed.training.TrainConfig`."""
        self.train_config  # noqa: B018 (building it validates every field)

    def fit_record(self) -> dict[str, Any]:
        """The base's record, with the training history (every epoch, how it stopped)."""
        history = getattr(self, "history_", None)
        return {**super().fit_record(), "history": None if history is None else history.to_dict()}

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig(lr=self.lr, batch_size=self.batch_size, max_epochs=self.max_epochs,
                           patience=self.patience, val_fraction=self.val_fraction,
                           seed=self.seed, negatives=self.negatives,  # type: ignore[arg-type]
                           max_steps=self.max_steps,
                           time_budget_seconds=self.time_budget_seconds,
                           deterministic=self.deterministic,
                           speed=self.speed, precision=self.precision)  # type: ignore[arg-type]

    def _new_head(self, dim: int) -> torch.nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            head = self.build_head(dim)
        return head if self.init_scale is None else start_near_identity(head, self.init_scale)

    def loss(self, head: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, dict]:
        """Weighted sum of this recipe's constraint terms on one batch."""
        M, L = head(torch.cat([batch.s, batch.t]))  # one pass over (2B, d)
        with full_precision():  # only the head's products may run in bfloat16 (the trainer's)
            return self._weighted_terms(head, batch, M.float(), L.float())

    def _weighted_terms(self, head: torch.nn.Module, batch: Batch, M: torch.Tensor,
                        L: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """The loss on the head's outputs ``M``, ``L`` (2B, d) float32 (sources first)."""
        n = len(batch.s)
        # split, not M[:n] / M[n:]: its backward is one concatenation of the two halves'
        # gradients instead of two zero-filled (2B, d) tensors summed (same values)
        (s_M, t_M), (s_L, t_L) = M.split(n), L.split(n)
        views = BatchViews(
            s=batch.s, t=batch.t, s_M=s_M, s_L=s_L, t_M=t_M, t_L=t_L,
            sn=pick(batch.s, batch.s_neg), sn_M=pick(s_M, batch.s_neg),
            sn_L=pick(s_L, batch.s_neg), tn=pick(batch.t, batch.t_neg),
            tn_M=pick(t_M, batch.t_neg), tn_L=pick(t_L, batch.t_neg),
            neg_s=batch.s_valid, neg_t=batch.t_valid, s_neg=batch.s_neg, t_neg=batch.t_neg,
            s_lang=batch.s_lang, t_lang=batch.t_lang,
        )
        needs = getattr(self, "_needs", None)
        if needs is None:  # weights set by hand (tests): derive the needs once
            self._needs = needs = needs_of(self._weights)
        if "lid" in needs:  # DREAM: the head's language classifier on l
            logits = head.lid(L)  # (2B, K)
            views.s_lid, views.t_lid = logits[:n], logits[n:]
        if "adv" in needs:  # MEAT: the discriminator on m (its own weights move elsewhere)
            logits = self.discriminator_(M)  # (2B, K)
            views.s_adv, views.t_adv = logits[:n], logits[n:]
        return weighted_loss(views, self._weights)

    def _prepare(self) -> None:
        """Check the recipe's weights and note which optional batch views they need."""
        self._weights = check_weights(self.term_weights())
        self._needs = needs_of(self._weights)

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages, tgt_lang: Languages,
            *, checkpoint_dir: str | Path | None = None,
            on_epoch_end: Callable[[dict], None] | None = None,
            validate: Callable[[Disentangler], float] | None = None) -> "NeuralDisentangler":
        """Train on ``n`` pairs ``src (n, d)``, ``tgt (n, d)``; ``on_epoch_end(record)`` is
        called after every epoch with the trainer's per-epoch record. ``validate(model)``
        scores a fitted model on validation data (higher is better): with ``mirror=True`` it
        chooses between the two arms (:mod:`.orientation`), and it is required then."""
        src, tgt = np.asarray(src, np.float32), np.asarray(tgt, np.float32)
        if src.shape != tgt.shape or src.ndim != 2:
            raise ShapeError(f"src and tgt must be (n, d) arrays of equal shape; got {src.shape} "
                             f"and {tgt.shape}")
        s_lang = as_language_array(src_lang, len(src))
        t_lang = as_language_array(tgt_lang, len(tgt))
        self.languages_ = sorted(set(s_lang.tolist()) | set(t_lang.tolist()))
        held = None
        if self.reference_check is not None:  # pairs the fit never sees, to check it on
            rows, kept_out = holdout_split(s_lang, t_lang, self.reference_check, self.seed)
            held = (src[kept_out], tgt[kept_out], s_lang[kept_out], t_lang[kept_out])
            src, tgt, s_lang, t_lang = src[rows], tgt[rows], s_lang[rows], t_lang[rows]
        lang_id = {lang: i for i, lang in enumerate(self.languages_)}
        s_ids = np.array([lang_id[x] for x in s_lang], dtype=np.int64)
        t_ids = np.array([lang_id[x] for x in t_lang], dtype=np.int64)
        self.centering_ = None
        if self.center == "language":
            self.centering_ = MeanCentering(self.unknown_language).fit(src, tgt, s_lang, t_lang)
            src = src - self.centering_.language(src, s_lang)  # (n, d) centred
            tgt = tgt - self.centering_.language(tgt, t_lang)
        self._prepare()
        if self.mirror:  # fail before training: no bias to mirror, or nothing to choose by
            check_mirror(self._new_head(src.shape[1]), validate)

        def train_arm(start, folder, arm):
            return self._train_head(src, tgt, s_ids, t_ids, start, folder, arm, on_epoch_end)

        self.head_, self.history_ = train_arm(None, checkpoint_dir, "trained")
        self.dim_ = int(src.shape[1])
        self.orientation_ = (orient(self, train_arm, validate, checkpoint_dir)
                             if self.mirror else None)
        self.reference_check_ = (None if held is None or len(held[0]) < 4
                                 else check_against_reference(self, *held))
        return self

    def _train_head(self, src: np.ndarray, tgt: np.ndarray, s_ids: np.ndarray,
                    t_ids: np.ndarray, bias_start: np.ndarray | None,
                    checkpoint_dir: str | Path | None, arm: str,
                    on_epoch_end: Callable[[dict], None] | None
                    ) -> tuple[torch.nn.Module, Any]:
        """One fit of a fresh head (its meaning bias started at ``bias_start`` when given)
        on the prepared pairs; ``(head, history)``."""
        torch.manual_seed(self.seed)
        head = self._new_head(src.shape[1])
        if bias_start is not None:
            start_bias(head, bias_start)
        self.head_ = head  # the arm in training (an adversary's loss reads it: MEAT)
        adversary = self._new_adversary(src.shape[1])
        extra = {"method": self.method, "params": self.get_params(),
                 **({} if arm == "trained" else {"arm": arm})}
        history = train(head, lambda b: self.loss(head, b), src, tgt, s_ids, t_ids,
                        self._config_for(len(src)), checkpoint_dir=checkpoint_dir,
                        on_epoch_end=on_epoch_end, fingerprint_extra=extra, adversary=adversary)
        return head, history

    def _config_for(self, n_pairs: int) -> TrainConfig:
        """:attr:`train_config`, its batch made smaller where an epoch of ``n_pairs`` would
        have fewer than ``min_epoch_steps`` steps. Why (issue 46): early stopping looks once
        an epoch, and with 2,000 pairs in batches of 512 an epoch is 4 steps; the default
        recipe then stopped at epoch 1, its head still the 0.9 x identity start plus four
        Adam steps of noise, and its language part kept a tenth of the input's meaning
        (48% of Tatoeba translations found by it on de,fr,ru,zh x 500 pairs)."""
        config = self.train_config
        if self.min_epoch_steps is None:
            return config
        n_train = int(n_pairs * (1 - self.val_fraction))
        batch = max(2, min(config.batch_size, n_train // self.min_epoch_steps))
        return dataclasses.replace(config, batch_size=batch)

    def _new_adversary(self, dim: int) -> Adversary | None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 7919)
            module = self.build_adversary(dim)
        if module is None:
            return None
        self.discriminator_ = module
        return Adversary(module, self.adversary_loss)

    # --- inference -----------------------------------------------------------
    @torch.no_grad()
    def _parts(self, X: np.ndarray, languages: Languages,
               block: int = 65536) -> tuple[np.ndarray, np.ndarray]:
        """``(m, l)``, each ``(n, d) float32``, of embeddings ``X (n, d)``."""
        X = self._check(X)
        means = None
        if getattr(self, "centering_", None) is not None:
            self.centering_.unknown_language = self.unknown_language  # one policy, the model's
            means = self.centering_.language(X, languages)  # (n, d) mu of each row
            X = X - means
        m_out = np.empty_like(X)
        l_out = np.empty_like(X)
        for start in range(0, len(X), block):
            m, lang = self.head_(torch.from_numpy(X[start : start + block]))
            m_out[start : start + block], l_out[start : start + block] = m.numpy(), lang.numpy()
        if means is not None:
            l_out += means
        return m_out, l_out

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        return self._parts(X, languages)[0]

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        return self._parts(X, languages)[1]

    @resolving
    def views(self, X: np.ndarray, language: str) -> dict[str, np.ndarray]:
        m, lang = self._parts(X, language)
        return {"meaning": m, "language": lang}

    def meaning_map(self) -> MeaningMap:
        """``m = head(e)``, or ``m = head(e - mu_lang)`` (one route per language) when
        centred; the head's ``meaning`` module as affine layers."""
        d = self._export_dim()
        head = getattr(self.head_, "meaning", None)
        if head is None:
            raise ConfigError(f"{self.name}'s head has no 'meaning' layer to export")
        layers = torch_layers(head)
        if self.centering_ is None:
            return single_route(self.name, d, layers)
        routes, notes = centering_routes(self.centering_.languages_, self.centering_.means_, d)
        return MeaningMap(self.name, d, {k: v + layers for k, v in routes.items()}, True, notes)

    # --- persistence ---------------------------------------------------------
    def _state(self) -> dict[str, np.ndarray]:
        state = {k: v.detach().numpy() for k, v in self.head_.state_dict().items()}
        if getattr(self, "centering_", None) is not None:
            state["centering.means"] = self.centering_.means_.astype(np.float32)
        return state

    def _extra_config(self) -> dict[str, Any]:
        hist = getattr(self, "history_", None)
        summary = None
        if hist is not None:
            summary = {"best_epoch": hist.best_epoch, "epochs": len(hist.epochs),
                       "steps": hist.steps, "stop_reason": hist.stop_reason,
                       "budget_bound": hist.budget_bound, "stopped_early": hist.stopped_early,
                       "train_pairs": hist.train_pairs, "val_pairs": hist.val_pairs,
                       "best_val_loss": min((e["val_loss"] for e in hist.epochs), default=None)}
        extra = {"languages": self.languages_, "training": summary}
        for key in ("orientation", "reference_check"):
            if getattr(self, key + "_", None) is not None:
                extra[key] = getattr(self, key + "_")
        centering = getattr(self, "centering_", None)
        if centering is not None and centering.languages_ != self.languages_:
            extra["centering_languages"] = centering.languages_  # calibrated languages
        return extra

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        if getattr(self, "centering_", None) is None:
            super()._calibrate(X, code)
        self.centering_._calibrate(X, code)

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.languages_ = list(extra.get("languages", []))
        self.orientation_ = extra.get("orientation")
        self.reference_check_ = extra.get("reference_check")
        state = dict(state)
        self.centering_ = self._centering_from(state.pop("centering.means", None),
                                               extra.get("centering_languages"))
        head = self.build_head(self.dim_)
        try:
            head.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()},
                                 strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f"saved weights do not fit a {self.method} head of dimension "
                                  f"{self.dim_}: {exc}") from None
        head.eval()
        self.head_ = head

    def _centering_from(self, means: np.ndarray | None, languages: list[str] | None = None
                        ) -> MeanCentering | None:
        if (means is None) != (self.center == "none"):
            raise CheckpointError(f"center={self.center!r} but the saved weights "
                                  f"{'lack' if means is None else 'have'} 'centering.means'; "
                                  "the config and weights are from different models")
        if means is None:
            return None
        centering = MeanCentering(self.unknown_language)
        centering.dim_ = self.dim_
        centering._set_state({"means": means}, {"languages": languages or self.languages_})
        return centering


class TwoHeadRecipe(NeuralDisentangler):
    """Base of the recipes on two independent heads ``m = MLP_m(e)``, ``l = MLP_l(e)``
    (DREAM, MEAT, ORACLE): ``hidden = 0`` makes each head one linear layer."""

    #: whether the head carries a language classifier on ``l`` (DREAM)
    language_classifier: ClassVar[bool] = False

    def __init__(self, lr: float = 1e-4, batch_size: int = 512, max_epochs: int | None = None,
                 patience: int = 5, val_fraction: float = 0.1, seed: int = 0,
                 negatives: str = "paper", hidden: int = 0, *, max_steps: int | None = None,
                 time_budget_seconds: float | None = None, oracle_variant: str | None = None,
                 oracle_weight: float = 1.0, center: str = "none",
                 unknown_language: str = "global", deterministic: bool = True,
                 speed: str = "auto", precision: str = "auto",
                 init_scale: float | None = None, mirror: bool = False,
                 reference_check: float | None = None,
                 min_epoch_steps: int | None = None) -> None:
        super().__init__(lr=lr, batch_size=batch_size, max_epochs=max_epochs, patience=patience,
                         val_fraction=val_fraction, seed=seed, negatives=negatives,
                         max_steps=max_steps, time_budget_seconds=time_budget_seconds,
                         oracle_variant=oracle_variant, oracle_weight=oracle_weight,
                         center=center, unknown_language=unknown_language,
                         deterministic=deterministic, speed=speed, precision=precision,
                         init_scale=init_scale, mirror=mirror,
                         reference_check=reference_check, min_epoch_steps=min_epoch_steps)
        self.hidden = hidden

    def build_head(self, dim: int) -> torch.nn.Module:
        classes = len(self.languages_) if self.language_classifier else 0
        return TwoHeads(dim, hidden=self.hidden, n_languages=classes)
