"""Analyses that show *why* one method wins: leakage, code-switching, geometry and
significance. Pure measurements over embeddings, models and scores; the experiment layer
(:mod:`disembed.experiment.analyse`) runs them and the reports render them.
"""

from __future__ import annotations

from .codeswitch import CodeSwitchTask, code_switch, load_dictionary
from .geometry import GeometryRecorder, alignment, geometry, projection_panels, uniformity
from .items import attach_items, compare_bench, compare_to_reference, save_items
from .leakage import ProbeResult, language_id_probe
from .significance import (
    Comparison,
    PairedTest,
    SeedTest,
    compare_all,
    compare_scores,
    compare_seeds,
    holm,
    paired_bootstrap,
    paired_permutation,
    seed_bootstrap,
)

__all__ = ["CodeSwitchTask", "Comparison", "GeometryRecorder", "PairedTest", "ProbeResult",
           "SeedTest", "alignment", "attach_items", "code_switch", "compare_all",
           "compare_bench", "compare_to_reference", "compare_scores", "compare_seeds",
           "geometry", "holm", "language_id_probe", "load_dictionary", "paired_bootstrap",
           "paired_permutation", "projection_panels", "save_items", "seed_bootstrap",
           "uniformity"]
