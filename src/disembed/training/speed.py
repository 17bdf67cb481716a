"""How each training step runs: eager or compiled, float32 or bfloat16 head products.

Three settings of :class:`~.config.TrainConfig` decide it:

* ``deterministic`` (default ``True``): the reference path, eager float32, whatever the
  other two say when they are ``"auto"`` (asking for ``"compiled"`` or ``"bfloat16"`` with
  it is an error). A seeded run then gives the same bits every time, and a resumed run
  the same bits as an uninterrupted one.
* ``speed``: ``"eager"``; ``"compiled"`` (``torch.compile`` of the recipe's loss, forward
  and backward: dozens of small (B, d) elementwise ops fused into a few loops); or
  ``"auto"``: eager first, and where the run is long enough to repay a compile the
  loss is compiled and kept only if its steps measure at least
  :data:`MIN_MEASURED_SPEEDUP` x faster than the eager ones, on this machine, in this run.
* ``precision``: ``"float32"``; ``"bfloat16"`` (the head's products under
  ``torch.autocast``; the loss terms, the optimiser and the weights stay float32); or
  ``"auto"``: bfloat16 where the hardware probe measured bfloat16 products faster than
  float32 (:attr:`disembed.hardware.Capabilities.bf16_faster`), else float32.

Off the deterministic path Adam also uses its fused kernel (one pass over the weights).
Only full-size training batches take the compiled path (its graph is specialised to
the batch size); the last partial batch runs eager (in the chosen precision), and
validation eager float32, so validation losses are comparable across paths. What ran,
why, and the measured step times are recorded in the run's history
(:meth:`StepRunner.to_dict`).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from ..exceptions import ConfigError
from ..hardware import probe
from .batches import Batch, LossFn
from .config import TrainConfig

logger = logging.getLogger(__name__)

#: a cold ``torch.compile`` of a recipe's loss took 21-24 s on a 2-core AVX2 machine at
#: load 6 (2.5-6 s with inductor's on-disk cache warm); "auto" assumes the cold cost
EXPECTED_COMPILE_SECONDS = 30.0
#: the speed-up "auto" assumes when asking whether a compile could pay for itself
#: (compiled SEED steps measured 1.4-1.6x eager at d=384, batch 512)
EXPECTED_COMPILE_SPEEDUP = 1.5
#: "auto" keeps the compiled loss only when its steps measure at least this much faster
MIN_MEASURED_SPEEDUP = 1.1
#: timed full-size steps each way in "auto" (after one untimed warm-up step each)
CALIBRATION_STEPS = 4


def full_precision() -> AbstractContextManager:
    """Code under this runs in float32 even inside the trainer's bfloat16 autocast: a
    recipe's loss wraps everything but its head in it (only the head's products may run
    in bfloat16)."""
    return torch.autocast("cpu", enabled=False)


@dataclass
class _Calibration:
    """Step times measured by "auto" (seconds) and where it stands."""

    phase: str = "eager"  # "eager" -> "compiled" -> "done"
    eager: list[float] = field(default_factory=list)
    compiled: list[float] = field(default_factory=list)
    warmed: set[str] = field(default_factory=set)


class StepRunner:
    """Runs the training steps of one run on the path ``config`` asks for (module doc).

    Args:
        loss_fn: the recipe's ``Batch -> (loss, terms)``.
        config: the run's settings (``speed``, ``precision``, ``deterministic``,
            ``batch_size`` and the budgets).
        planned_steps: the fewest optimiser steps this run will take from now (what a
            compile must pay for); ``math.inf`` when unknown.
        clock: seconds, monotonic (``time.perf_counter``; tests pass a fake one).
        compiler: ``torch.compile``-like ``fn -> compiled fn`` (tests pass a fake one).
    """

    def __init__(self, loss_fn: LossFn, config: TrainConfig, *, planned_steps: float = math.inf,
                 clock: Callable[[], float] = time.perf_counter,
                 compiler: Callable[[LossFn], LossFn] | None = None) -> None:
        self.loss_fn, self.config, self.planned_steps = loss_fn, config, planned_steps
        self.clock = clock
        self.compiler = compiler or _default_compiler
        self.compiled_fn: LossFn | None = None
        self.compile_seconds: float | None = None
        self.calibration = _Calibration()
        self.steps = 0
        self.precision, self.bf16_faster, self.precision_reason = _choose_precision(config)
        self.speed, self.speed_reason = _initial_speed(config)
        logger.info("training steps: %s", self.reason)

    # --- what the trainer calls ------------------------------------------------
    @contextmanager
    def step(self, batch_rows: int) -> Iterator[LossFn]:
        """Around one whole training step (adversary, forward, backward, optimiser):
        yields the loss function to call, under the chosen precision, and times the step."""
        path = self._path_for(batch_rows)
        fn = self._compiled() if path == "compiled" else self.loss_fn
        started = self.clock()
        with self._precision_context():
            yield fn
        seconds = self.clock() - started
        self.steps += 1
        if batch_rows == self.config.batch_size:
            self._observe(path, seconds)

    @property
    def reason(self) -> str:
        """Why the steps run the way they do (with the measurements "auto" made)."""
        return f"{self.speed_reason}; {self.precision_reason}"

    @property
    def label(self) -> str:
        """``"<speed>/<precision>"`` of the full-size steps now, e.g. ``"compiled/float32"``."""
        return f"{self._path_for(self.config.batch_size)}/{self.precision}"

    def to_dict(self) -> dict[str, Any]:
        """What ran and why, for the run's history (times in seconds, ``None`` if unmeasured)."""
        cal = self.calibration
        return {"speed": "eager" if self.speed == "auto" else self.speed,
                "precision": self.precision,
                "requested": {"speed": self.config.speed, "precision": self.config.precision,
                              "deterministic": self.config.deterministic},
                "reason": self.reason, "bf16_faster": self.bf16_faster,
                "compile_seconds": _round(self.compile_seconds),
                "eager_step_seconds": _round(_median(cal.eager)),
                "compiled_step_seconds": _round(_median(cal.compiled)),
                "fused_adam": bool(fused_adam(self.config)),
                "threads": torch.get_num_threads()}

    # --- internals ------------------------------------------------------------
    def _path_for(self, batch_rows: int) -> str:
        if batch_rows != self.config.batch_size:
            return "eager"  # the compiled graph is specialised to the full batch size
        if self.speed == "auto":
            return "compiled" if self.calibration.phase == "compiled" else "eager"
        return self.speed

    def _precision_context(self) -> AbstractContextManager:
        if self.precision == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return nullcontext()

    def _compiled(self) -> LossFn:
        if self.compiled_fn is None:
            self.compiled_fn = _Compiling(self)
        return self.compiled_fn

    def _observe(self, path: str, seconds: float) -> None:
        """Feed the calibration of "auto" one full-size step time."""
        cal = self.calibration
        if self.speed != "auto" or cal.phase == "done":
            return
        if path not in cal.warmed:  # the first step of a path: warm-up (or compile)
            cal.warmed.add(path)
            return
        times = cal.eager if path == "eager" else cal.compiled
        times.append(seconds)
        if len(times) >= CALIBRATION_STEPS:
            self._decide() if path == "compiled" else self._consider_compiling()

    def _consider_compiling(self) -> None:
        eager = _median(self.calibration.eager)
        remaining = max(self.planned_steps - self.steps, 0)
        seconds = remaining * eager  # the eager time left at least, within any time budget
        if self.config.time_budget_seconds is not None:
            seconds = min(seconds, self.config.time_budget_seconds)
        saving = seconds * (1 - 1 / EXPECTED_COMPILE_SPEEDUP)
        if saving < EXPECTED_COMPILE_SECONDS:
            self._settle("eager", f"speed='auto': eager ({eager * 1e3:.1f} ms/step); the "
                                  f"~{seconds:.0f} s of steps left would save ~{saving:.0f} s "
                                  f"compiled, less than a compile (~"
                                  f"{EXPECTED_COMPILE_SECONDS:.0f} s)")
        else:
            self.calibration.phase = "compiled"

    def _decide(self) -> None:
        eager, compiled = _median(self.calibration.eager), _median(self.calibration.compiled)
        ratio = eager / compiled
        measured = (f"eager {eager * 1e3:.1f} ms/step, compiled {compiled * 1e3:.1f} ms/step "
                    f"({ratio:.2f}x; compile {self.compile_seconds:.1f} s)")
        if ratio >= MIN_MEASURED_SPEEDUP:
            self._settle("compiled", f"speed='auto': compiled, measured {measured}")
        else:
            self._settle("eager", f"speed='auto': eager, compiled not faster enough: {measured}")

    def _settle(self, speed: str, reason: str) -> None:
        self.speed, self.speed_reason, self.calibration.phase = speed, reason, "done"
        logger.info("training steps: %s", self.reason)

    def _compile_failed(self, exc: Exception) -> None:
        if self.config.speed == "compiled":
            raise ConfigError(f"speed='compiled': torch.compile of the loss failed ({exc!r}); "
                              "it needs a working C++ compiler (gcc/clang) on CPU. Install one "
                              "or train with speed='eager' (or 'auto')") from exc
        logger.warning("torch.compile of the loss failed (%r); training eager", exc)
        self._settle("eager", f"speed='auto': eager, torch.compile failed ({type(exc).__name__})")


class _Compiling:
    """The compiled loss; its first call compiles (timed) and falls back if that fails."""

    def __init__(self, runner: StepRunner) -> None:
        self.runner = runner
        self.fn: LossFn | None = None

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        runner = self.runner
        if self.fn is not None:
            return self.fn(batch)
        started = runner.clock()
        try:
            fn = runner.compiler(runner.loss_fn)
            out = fn(batch)
        except Exception as exc:  # noqa: BLE001 - any backend failure: no compiler, no support
            runner._compile_failed(exc)
            runner.compiled_fn = runner.loss_fn  # type: ignore[assignment]
            return runner.loss_fn(batch)
        runner.compile_seconds = runner.clock() - started
        logger.info("compiled the training loss in %.1f s", runner.compile_seconds)
        self.fn = fn
        return out


def _default_compiler(fn: LossFn) -> LossFn:
    # every fitted model adds a guard set to the same code objects (NeuralDisentangler.loss);
    # torch's default of 8 would silently fall back to eager in a process training many
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, 64)
    return torch.compile(fn, dynamic=False)


def _choose_precision(config: TrainConfig) -> tuple[str, bool | None, str]:
    """``(precision, probe's bf16_faster or None if not asked, why)``."""
    if config.precision == "float32" or config.deterministic:
        why = "deterministic" if config.deterministic else "asked"
        return "float32", None, f"float32 ({why})"
    faster = probe().bf16_faster
    if config.precision == "bfloat16":
        if not faster:
            logger.warning("precision='bfloat16' on a CPU where bfloat16 products measured "
                           "slower than float32 (emulated): expect slower training")
        return "bfloat16", faster, "bfloat16 head products (asked)"
    if faster:
        return "bfloat16", True, "bfloat16 head products (probe: bfloat16 faster here)"
    return "float32", False, "float32 (probe: bfloat16 not faster here)"


def _initial_speed(config: TrainConfig) -> tuple[str, str]:
    if config.deterministic:
        return "eager", "eager (deterministic)"
    if config.speed == "auto":
        return "auto", "speed='auto': calibrating eager steps"
    return config.speed, f"{config.speed} (asked)"


def fused_adam(config: TrainConfig) -> bool | None:
    """Adam's fused kernel off the deterministic path (``None``: torch's default, the
    reference); it rounds a few ulps apart from the default one."""
    return None if config.deterministic else True


def planned_steps(config: TrainConfig, steps_per_epoch: int, steps_done: int) -> float:
    """The fewest optimiser steps the run still takes: ``max_epochs`` epochs, or the
    ``patience + 1`` epochs early stopping needs at least; capped by ``max_steps``. A time
    budget is not a count: it is left to the measurement."""
    epochs = config.max_epochs if config.max_epochs is not None else config.patience + 1
    total = epochs * steps_per_epoch
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    return max(total - steps_done, 0)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
