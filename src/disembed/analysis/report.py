"""The analyses' results in one object: significance, JSON, figures and ``analysis.md``."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import _json_safe
from ..util.files import atomic_write_bytes
from .significance import compare_all, paired_bootstrap, paired_permutation, task_items

logger = logging.getLogger(__name__)


@dataclass
class AnalysisReport:
    config: dict
    encoder: dict
    encoder_spec: str
    runs: list  # ModelRun
    sample: Any  # PairSample
    lid: tuple[list[str], list[str]]
    training: dict | None = None
    comparisons: list = field(default_factory=list)
    codeswitch_tests: dict = field(default_factory=dict)  # label -> {"bootstrap", "permutation"}
    truncation: list[dict] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)  # name -> file name
    seconds: float = float("nan")

    def compute_significance(self, n_resamples: int = 2000, seed: int = 0) -> None:
        """Every pairwise method comparison, and original vs code-switched per model."""
        if "significance" not in self.config.get("analyses", ["significance"]):
            return
        self.comparisons = compare_all({r.label: r.scores for r in self.runs},
                                       n_resamples=n_resamples, seed=seed)
        for run in self.runs:
            if run.codeswitch is None:
                continue
            subsets = run.codeswitch.subsets()
            orig = [s for s in subsets if not s.endswith("+cs")]
            cs = [s + "+cs" for s in orig if s + "+cs" in subsets]
            a, strata, _ = task_items(run.codeswitch, "meaning", [s[:-3] for s in cs])
            b, _, _ = task_items(run.codeswitch, "meaning", cs)
            options = {"strata": strata, "n_resamples": n_resamples, "seed": seed}
            self.codeswitch_tests[run.label] = {"bootstrap": paired_bootstrap(a, b, **options),
                                                "permutation": paired_permutation(a, b, **options)}

    # --- numbers for tables and plots -------------------------------------------------------
    def main(self, run, task: str, view: str) -> float:
        for s in run.scores:
            if s.task == task and view in s.views():
                return s.main_score(view)
        return float("nan")

    def to_dict(self) -> dict:
        runs = []
        for r in self.runs:
            runs.append({
                "label": r.label, "method": r.method, "params": r.model.get_params(),
                "scores": [s.to_dict() for s in r.scores],
                "codeswitch": r.codeswitch.to_dict() if r.codeswitch else None,
                "codeswitch_stats": r.codeswitch_stats,
                "probe": {k: v.to_dict() for k, v in r.probe.items()},
                "geometry": r.geometry, "trajectory": r.trajectory,
                "fit_seconds": getattr(r.model, "fit_seconds_", None)})
        return _json_safe({
            "config": self.config, "encoder": self.encoder, "encoder_spec": self.encoder_spec,
            "training": self.training, "sample_pairs": len(self.sample),
            "probe_sentences": len(self.lid[0]), "runs": runs,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "codeswitch_tests": {k: {n: vars(t) for n, t in v.items()}
                                 for k, v in self.codeswitch_tests.items()},
            "truncation": self.truncation, "figures": self.figures, "seconds": self.seconds})

    # --- output -----------------------------------------------------------------------------
    def write(self, out: Path, *, plots: bool = True) -> Path:
        """``analysis.json``, the PNGs (if ``plots`` and matplotlib is installed), ``analysis.md``
        and ``analysis.html`` (the same, standalone)."""
        from ..reports.analysis_report import markdown_to_html, render_analysis

        out.mkdir(parents=True, exist_ok=True)
        if plots:
            try:
                self.figures = self.make_figures(out)
            except ImportError as exc:
                logger.warning("no figures: %s", exc)
        atomic_write_bytes(out / "analysis.json",
                           [json.dumps(self.to_dict(), indent=2, default=str).encode()])
        text = render_analysis(self)
        atomic_write_bytes(out / "analysis.md", [text.encode()])
        atomic_write_bytes(out / "analysis.html", [markdown_to_html(text).encode()])
        logger.info("analysis report: %s", out / "analysis.md")
        return out / "analysis.md"

    def make_figures(self, out: Path) -> dict[str, str]:
        from ..reports import analysis_plots as ap

        figs: dict[str, str] = {}
        for i, run in enumerate(self.runs):
            if run.sample_views:
                name = f"projection-{i}-{_slug(run.label)}.png"
                ap.plot_projection(run.sample_views, self.sample.src_lang, out / name,
                                   title=f"{run.label}: PCA of {len(self.sample)} Tatoeba "
                                   f"sentences ({self.encoder_spec})")
                figs[f"projection:{run.label}"] = name
        panels = _tradeoff_panels(self)
        if panels:
            ap.plot_tradeoff(panels, out / "tradeoff.png",
                             ylabel="Tatoeba retrieval accuracy of the meaning part x100")
            figs["tradeoff"] = "tradeoff.png"
        if any(r.geometry for r in self.runs):
            ap.plot_geometry({r.label: r.trajectory for r in self.runs},
                             {r.label: r.geometry for r in self.runs}, out / "geometry.png")
            figs["geometry"] = "geometry.png"
        cs = [(r.label, r.codeswitch.get("meaning", "avg:original", "acc_mean"),
               r.codeswitch.get("meaning", "avg:code-switched", "acc_mean"))
              for r in self.runs if r.codeswitch is not None]
        if cs:
            ap.plot_paired_bars(cs, out / "codeswitch.png", names=("original", "code-switched"),
                                ylabel="Tatoeba retrieval accuracy x100 (meaning part)",
                                title="code-switching robustness")
            figs["codeswitch"] = "codeswitch.png"
        if self.truncation:
            for task in dict.fromkeys(r["task"] for r in self.truncation):
                rows = [r for r in self.truncation if r["task"] == task and
                        not math.isnan(r["meaning"])]
                ap.plot_lines(rows, "k", "meaning", "method", out / f"truncation-{task}.png",
                              xlabel="first k dimensions kept", logx=True,
                              ylabel=f"{task} {rows[0]['metric']} x100 (meaning part)",
                              title=f"{task}: meaning score vs embedding dimensions")
                figs[f"truncation:{task}"] = f"truncation-{task}.png"
        return figs


def _tradeoff_panels(report) -> list[dict]:
        """Meaning accuracy vs (a) the LID probe on meaning, (b) retrieval on the language part."""
        panels = []
        probed = [r for r in report.runs if "meaning" in r.probe]
        if probed:
            panels.append({"points": [(r.label, r.probe["meaning"].accuracy,
                                       report.main(r, "tatoeba", "meaning")) for r in probed],
                           "chance": probed[0].probe["meaning"].chance,
                           "xlabel": "language-ID probe accuracy on the meaning part x100\n"
                                     "(language left in meaning; lower is better)"})
        lang = [(r.label, report.main(r, "tatoeba", "language"), report.main(r, "tatoeba", "meaning"))
                for r in report.runs]
        if any(not math.isnan(x) for _, x, _ in lang):
            panels.append({"points": lang, "chance": None,
                           "xlabel": "Tatoeba retrieval accuracy of the language part x100\n"
                                     "(meaning left in language; lower is better)"})
        return panels


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:40]


__all__ = ["AnalysisReport"]
