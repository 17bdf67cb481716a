"""The model card (README.md) of an exported model: what it is, how it was made, how to load it."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Mapping

from ..evaluation import TASKS, average_members
from ..evaluation.task_scores import TaskScores
from ..exceptions import ConfigError

logger = logging.getLogger(__name__)


def read_scores(model_dir: Path, scores: str | os.PathLike | None) -> list[TaskScores]:
    """Task scores from ``scores`` (a result JSON), else ``model_dir/../result.json`` if any."""
    path = Path(scores) if scores else model_dir.parent / "result.json"
    if not path.is_file():
        if scores:
            raise ConfigError(f"--scores {path} does not exist")
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [TaskScores.from_dict(s) for s in data.get("scores", [])]
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("no scores in the model card: %s is not a result file (%s)", path, exc)
        return []


def averaged(scores: TaskScores) -> str:
    """What the main score of ``scores`` averages, in words: ``"mean over 2 languages: de,
    zh"`` (never a set's name for fewer of its members)."""
    members = average_members(scores)
    kind = TASKS.get(scores.task).metadata.subset_kind if scores.task in TASKS else "subset"
    if not members:
        row = next((r for r in scores.averages if r.subset == scores.main_subset), None)
        return f"mean over {row.n} {kind}s" if row else scores.main_subset
    return f"mean over {len(members)} {kind}{'s' if len(members) > 1 else ''}: " + \
        ", ".join(members)


def _eval_result(s: TaskScores, value: float) -> Any:
    from huggingface_hub import EvalResult

    meta = TASKS.get(s.task).metadata
    metric = meta.metric_names[s.main_metric]
    return EvalResult(
        task_type=meta.hub_task, dataset_type=meta.dataset.path if meta.dataset else meta.name,
        dataset_name=meta.label or meta.name, dataset_split=meta.eval_splits[0],
        dataset_revision=meta.dataset.revision if meta.dataset else None,
        metric_type=metric.hub, metric_value=round(100 * value, 2),
        metric_name=f"{metric.text} x100, meaning part, {averaged(s)}",
        dataset_args=s.protocol())


def eval_results(scores: list[TaskScores]) -> list:
    """The scores as ``huggingface_hub.EvalResult`` entries of the card's model-index: the
    Hub data set id, the metric's standard type, a name that says what was averaged."""
    out = []
    for s in scores:
        value = s.get("meaning", s.main_subset, s.main_metric)
        if math.isfinite(value) and s.task in TASKS:  # the Hub refuses NaN and .inf
            out.append(_eval_result(s, value))
    return out


def _scores_table(scores: list[TaskScores]) -> str:
    if not scores:
        return ("No scores were recorded with this model. Evaluate it with `disembed evaluate "
                "--model MODEL_DIR --out result.json`, then export with `--scores result.json`.")
    lines = ["| task | metric | averaged | meaning | language | items |",
             "|---|---|---|---|---|---|"]
    for s in scores:
        cells = []
        for view in ("meaning", "language"):
            value = s.get(view, s.main_subset, s.main_metric)
            cells.append("" if value != value else f"{100 * value:.1f}")
        lines.append(f"| {s.task} | {s.main_metric} | {averaged(s)} | {cells[0]} | {cells[1]} "
                     f"| {s.protocol_text()} |")
    return "\n".join(lines) + ("\n\n(x100; the language part should score low on these tasks. "
                               "A sample's score is noisier than the published protocol's, "
                               "`--max-eval-items all`.)")


def card_metadata(info: Mapping[str, Any], scores: list[TaskScores]) -> str:
    """The card's YAML front matter, as the Hugging Face Hub validates it: ``datasets:`` the
    Hub ids of the data sets scored (and trained on, where the training data names one)."""
    from huggingface_hub import ModelCardData

    base, license_ = info.get("base_model"), info.get("license") or "other"
    languages = list(dict.fromkeys([*info.get("languages", []), "en"]))
    datasets = list(dict.fromkeys(TASKS.get(s.task).metadata.dataset.path for s in scores
                                  if s.task in TASKS and TASKS.get(s.task).metadata.dataset))
    data = ModelCardData(
        base_model=base, language=[*languages, "multilingual"], license=license_,
        library_name="sentence-transformers", pipeline_tag="sentence-similarity",
        tags=["sentence-transformers", "sentence-similarity", "feature-extraction", "disembed",
              f"disembed-{info['method']}"],
        datasets=datasets or None, model_name=f"{info['method']} meaning embeddings",
        eval_results=eval_results(scores) or None)
    return data.to_yaml()


def _training(training: Any) -> str:
    if not isinstance(training, Mapping):
        return "Not recorded."
    parts = []
    if training.get("source"):
        parts.append(f"pairs from `{training['source']}`")
    counts = training.get("counts") or {r.get("language"): r.get("used")
                                        for r in training.get("languages", [])
                                        if isinstance(r, Mapping)}
    if counts:
        parts.append(", ".join(f"{k}: {v}" for k, v in counts.items()) + " pairs")
    total = training.get("pairs") or training.get("total_pairs")
    if total:
        parts.append(f"{total} pairs in all")
    if training.get("eval_sets"):
        parts.append("pairs overlapping " + ", ".join(training["eval_sets"]) + " removed")
    return "; ".join(parts) or "```json\n" + json.dumps(training, indent=1)[:2000] + "\n```"


def _usage(info: Mapping[str, Any]) -> str:
    if info.get("identifies_language"):
        lang = next((r for r in info["routes"] if r != "global"), "de")
        return ('embeddings = model.encode(["Guten Morgen!", "Good morning!"])  # language '
                f'identified per text\nembeddings = model.encode(["..."], language="{lang}")'
                "  # or say it (ISO 639-1/3, de-DE, deu_Latn)")
    if info["by_language"]:
        lang = next((r for r in info["routes"] if r != "global"), "de")
        return (f'embeddings = model.encode(["..."], task="{lang}")  # the language of the '
                f"texts: one of {', '.join(info['routes'])}")
    return 'embeddings = model.encode(["Guten Morgen!", "Good morning!"])'


def _routing(info: Mapping[str, Any]) -> str:
    """What the card says about a meaning part that depends on the language."""
    if info.get("identifies_language"):
        return ("\nThe meaning part depends on the language, and the model identifies it "
                "itself, text by text, with the language identifier disembed fitted on the "
                "training embeddings: a text's meaning is the mixture of the languages' "
                "routes weighted by the identifier (continuous, never a hard choice), "
                "restricted to the training languages that write the text's script where "
                "one does, as disembed computes it; `language=` names the language instead "
                "(any real language's code; one the model never saw gets its fallback), and "
                "`language=\"und-Hani\"` the script alone. "
                "That step is this folder's own code, `disembed_meaning.py` (torch and "
                "sentence-transformers only): load the model with `trust_remote_code=True`.\n")
    return ("\nThe meaning part depends on the language: it is a `Router` with one route per "
            "language, so every call must say the language of its texts as the task "
            "(one language per call).\n" if info["by_language"] else "")


def model_card(info: Mapping[str, Any], base: str, scores: list[TaskScores]) -> str:
    """Markdown text of the model card."""
    enc = info["encoder"]
    params = "\n".join(f"- `{k}` = `{v}`" for k, v in sorted(info["params"].items())) or "- none"
    notes = "\n".join(f"- {n}" for n in info["notes"]) or "- none"
    routed = _routing(info)
    loader = ('SentenceTransformer("PATH/TO/THIS/FOLDER", trust_remote_code=True)'
              if info.get("identifies_language") else 'SentenceTransformer("PATH/TO/THIS/FOLDER")')
    papers = "\n".join(f"- {p}" for p in info.get("papers", [])) or "- disembed's own recipe"
    return f"""---
{card_metadata(info, scores)}
---

# {info['method']} meaning embeddings on {base}

The **language-agnostic meaning part** of a multilingual sentence embedding: the encoder
`{enc['model']}` ({enc['backend']}, {enc['dim']}-d, pooling `{enc['pooling']}`, prefix
`{enc['prefix']!r}`) followed by the meaning head of the disembed recipe
**`{info['method']}`**, as one sentence-transformers model. Output: {info['dim']}-d,
not re-normalised (compare with cosine; `encode(..., normalize_embeddings=True)` gives
unit-length vectors, as `disembed serve` answers by default). Exported by
[disembed](https://pypi.org/project/disembed/) `disembed export`.
{routed}
## Load it (no disembed needed)

```python
from sentence_transformers import SentenceTransformer

model = {loader}
{_usage(info)}
```

In disembed: `--encoder st:PATH/TO/THIS/FOLDER` (language-independent recipes only).

## Recipe

`{info['method']}`, after:

{papers}

Parameters:

{params}

Training languages: {', '.join(info['languages']) or 'not recorded'}.

## Training data

{_training(info.get('training'))}

## Scores

{_scores_table(scores)}

## Exactness and limits

{notes}
"""
