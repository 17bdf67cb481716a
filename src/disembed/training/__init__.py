"""The one training loop, its settings, in-batch negatives and checkpoints."""

from .config import TrainConfig
from .negatives import same_language_negatives
from .trainer import Batch, TrainHistory, train

__all__ = ["Batch", "TrainConfig", "TrainHistory", "same_language_negatives", "train"]
