"""The one training loop, its settings, in-batch negatives and checkpoints."""

from .config import TrainConfig
from .negatives import same_language_negatives
from .trainer import Adversary, Batch, TrainHistory, train

__all__ = ["Adversary", "Batch", "TrainConfig", "TrainHistory", "same_language_negatives", "train"]
