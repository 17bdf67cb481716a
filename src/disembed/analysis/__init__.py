"""Analyses that show *why* one method wins: leakage, code-switching, geometry,
significance, dimensionality, and a report with figures.

>>> from disembed.analysis import AnalysisConfig, run_analyses
>>> run_analyses(AnalysisConfig(encoder="use-m3", methods=["baseline", "seed"]))  # doctest: +SKIP
"""

from __future__ import annotations

from .codeswitch import CodeSwitchTask, code_switch, load_dictionary
from .geometry import GeometryRecorder, alignment, geometry, uniformity
from .items import attach_items, compare_bench, save_items
from .leakage import ProbeResult, language_id_probe
from .runner import ANALYSES, AnalysisConfig, run_analyses
from .significance import (
                           Comparison,
                           PairedTest,
                           compare_all,
                           compare_scores,
                           paired_bootstrap,
                           paired_permutation,
)
from .truncation import TruncatedEncoder, truncate, truncation_sweep

__all__ = ["ANALYSES", "AnalysisConfig", "CodeSwitchTask", "Comparison", "GeometryRecorder",
           "PairedTest", "ProbeResult", "TruncatedEncoder", "alignment", "attach_items",
           "code_switch", "compare_bench",
           "compare_all", "compare_scores", "geometry", "language_id_probe", "load_dictionary",
           "paired_bootstrap", "paired_permutation", "run_analyses", "save_items", "truncate",
           "truncation_sweep", "uniformity"]
