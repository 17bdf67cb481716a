"""Filter a bitext with both parts of a split embedding: hard rules, each side's language
(the model's identifier, or langid), and a calibrated meaning score; streaming and
resumable. See docs/filtering.md."""

from .filter import FilterConfig, FilterReport, filter_bitext
from .language_check import CHECKS, LangidCheck, ModelLanguageCheck, make_check
from .rules import REASONS, RuleConfig, rule_reason
from .scoring import ChunkScores, PairScorer
from .thresholds import DEFAULT_EXPECTED, DEFAULT_THRESHOLD, ThresholdChoice, choose_threshold

__all__ = [
    "CHECKS", "ChunkScores", "DEFAULT_EXPECTED", "DEFAULT_THRESHOLD", "FilterConfig",
    "FilterReport", "LangidCheck", "ModelLanguageCheck", "PairScorer", "REASONS", "RuleConfig",
    "ThresholdChoice", "choose_threshold", "filter_bitext", "make_check", "rule_reason",
]
