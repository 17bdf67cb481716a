"""The one training loop, its settings, in-batch negatives and checkpoints."""

from .batches import Adversary, Batch
from .config import SAFETY_MAX_EPOCHS, STOP_REASONS, TrainConfig
from .negatives import same_language_negatives
from .speed import StepRunner, full_precision
from .state import TrainHistory, TrainState
from .trainer import train

__all__ = ["SAFETY_MAX_EPOCHS", "STOP_REASONS", "Adversary", "Batch", "TrainConfig",
           "StepRunner", "TrainHistory", "TrainState", "full_precision",
           "same_language_negatives", "train"]
