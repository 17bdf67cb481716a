"""Export a trained model (base encoder + meaning part) as a sentence-transformers folder.

>>> export_model("models/seed-e5", "exported/seed-e5")            # doctest: +SKIP
>>> from sentence_transformers import SentenceTransformer          # no disembed needed
>>> SentenceTransformer("exported/seed-e5").encode(["Guten Morgen!"])   # doctest: +SKIP

The folder is ``SentenceTransformer(folder)``-loadable with only sentence-transformers
installed, returns the meaning part (not re-normalised: compare with cosine), and
carries a model card (``README.md``) and ``disembed_export.json`` (method, parameters,
encoder identity, routes). A language-dependent method (its ``uses_language``) with a
language identifier exports as one module that identifies each text's language itself
(:mod:`.exported_module`, shipped as ``disembed_meaning.py``: load with
``trust_remote_code=True``; ``encode(texts, language="de")`` says it); one without (an
older model) as a ``Router`` that needs ``task="de"``. The folder is built beside
``out_dir`` and renamed into place, so an interrupted export leaves no half-written model.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.languages import normalize_language, to_iso3, valid_language_subtags
from ..exceptions import ConfigError, DisembedError, require
from ..methods import MeaningMap
from ..saved_model import SavedModel
from ..util import routing_rule
from ..util.files import (
    atomic_write_text,
    plain_permissions,
    remove_stale_temps,
    replace_folder,
)
from ..util.jsonsafe import dumps_json
from ..util.manifest import check_replaceable, write_manifest
from ..util.overlap import Endpoint, check_outputs
from .model_card import model_card, read_scores
from .st_pipeline import (
    REMOTE_MODULE_FILE,
    REMOTE_MODULE_REF,
    REMOTE_RULE_FILE,
    REMOTE_TRANSFORMER_FILE,
    REMOTE_TRANSFORMER_REF,
    base_pipeline,
    identifying_module,
    meaning_modules,
)

logger = logging.getLogger(__name__)

EXPORT_INFO = "disembed_export.json"


@dataclass
class ExportResult:
    """Where the export went and what it holds."""

    path: Path
    method: str
    by_language: bool
    routes: list[str]
    dim: int
    identifies_language: bool = False  # the folder's own module identifies the language


E5_PROMPTS = {"query": "query: ", "document": "passage: "}


def export_prompts(prefix: str) -> tuple[dict[str, str], str | None]:
    """The export's ``prompts`` and ``default_prompt_name``, as sentence-transformers expects.

    ``encode`` applies the default prompt (the prefix the model was trained with), so it
    reproduces disembed's meaning vectors; ``encode_document`` picks the ``document`` prompt
    and ``encode_query`` the ``query`` prompt. For e5 these are e5's own ``passage: `` and
    ``query: `` prefixes (the meaning head is applied to either side); any other encoder has
    one prefix, used for both.
    """
    if not prefix:
        return {}, None
    side = prefix.strip().rstrip(":").lower()
    if prefix in E5_PROMPTS.values():
        return dict(E5_PROMPTS), "query" if side == "query" else "document"
    return {"query": prefix, "document": prefix}, "document"


def export_model(model_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                 scores: str | os.PathLike | None = None, overwrite: bool = False
                 ) -> ExportResult:
    """Write ``out_dir``: the model's base encoder + meaning part as a sentence-transformers model.

    Args:
        model_dir: a folder written by ``disembed train`` / ``bench`` (config.json +
            model.safetensors with the encoder identity in its metadata).
        out_dir: the folder to create.
        scores: a result JSON (``disembed evaluate --out``, ``bench``'s result.json) whose
            scores go into the model card; default: ``model_dir/../result.json`` if present.
        overwrite: replace an existing ``out_dir``.
    """
    st = require("sentence_transformers", "st", "disembed export")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise ConfigError(f"{out_dir} already exists; choose another --out or pass --overwrite")
    check_outputs([Endpoint("--out", out_dir, "replaced-dir")],
                  [Endpoint("--model", model_dir, "dir")]
                  + ([Endpoint("--scores", scores)] if scores else []))
    if overwrite:
        check_replaceable(out_dir)
    saved = SavedModel.load(model_dir)
    model, identity = saved.disentangler, saved.require_identity()
    mmap = model.meaning_map()
    # a link is written through: its target folder is replaced, the link stays a link
    target = Path(os.path.realpath(out_dir)) if out_dir.is_symlink() else out_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target.parent, target.name)  # of exports killed before they ended
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-",
                                 dir=target.parent))
    try:
        base = base_pipeline(identity, work)
        identifier = model.language_identifier if mmap.by_language else None
        precision = export_precision(base, identifier is not None)
        st_model = _st_model(st, model, mmap, base, identifier, precision)
        folder = work / "model"
        st_model.save(str(folder), create_model_card=False)
        record_precision(folder, precision)
        if identifier is not None:
            _ship_module(folder)
        info = {**_export_info(saved, mmap, base.notes + mmap.notes
                               + precision_notes(base.dtype, precision)),
                "base_model": base.base_model, "license": base.license,
                "precision": precision}
        atomic_write_text(folder / EXPORT_INFO, dumps_json(info) + "\n")
        card = model_card(info, base.description, read_scores(model_dir, scores))
        atomic_write_text(folder / "README.md", card)
        write_manifest(folder, "disembed export")
        plain_permissions(folder)  # safetensors writes 0600 where the rest is 0644
        replace_folder(folder, target)  # the old export ends in the work folder
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("exported %s (%s) to %s", model.name, model_dir, out_dir)
    return ExportResult(out_dir, model.name, mmap.by_language, sorted(mmap.routes),
                        mmap.out_dim, identifier is not None)


def _st_model(st, model, mmap, base, identifier, precision: str):
    """The export's modules: the base (its transformer alone where the head pools in
    ``precision``), then the routed head with the identifier, or the plain meaning part."""
    prompts, default_prompt = export_prompts(base.prefix)
    pooled_by_head = precision != "float32"
    body = base.modules[:1] if pooled_by_head else base.modules
    head = ([identifying_module(mmap, identifier, _aliases(mmap.routes), model.unseen_route(),
                                "mean" if pooled_by_head else "")]
            if identifier is not None else meaning_modules(mmap))
    return st.SentenceTransformer(modules=[*body, *head], device="cpu", prompts=prompts,
                                  default_prompt_name=default_prompt)


def export_precision(base, routed: bool) -> str:
    """The precision the export's transformer runs in: the encoder's (``bfloat16`` where the
    model was trained on e5-small in bfloat16) when the export's own head pools the token
    embeddings in float32, as the library does (a routed head over a mean-pooled base);
    float32 otherwise, where sentence-transformers would round the pooled vector to
    bfloat16 before a ``Dense`` head."""
    return base.dtype if routed and base.mean_pooled else "float32"


def precision_notes(encoder_dtype: str, precision: str) -> list[str]:
    if precision != "float32":
        return [f"the model was trained on an encoder computing in {precision}, and the "
                f"export loads its transformer in {precision} (sentence_bert_config.json's "
                "model_kwargs; model_kwargs={'dtype': torch.float32} overrides it): fast where "
                "the CPU has native bfloat16, slow where it has not; the head pools the token "
                "embeddings in float32, as disembed does"]
    if encoder_dtype != "float32":
        return [f"the model was trained on an encoder computing in {encoder_dtype}; this "
                "export computes in float32 (a plain Dense head after sentence-transformers' "
                "pooling); model_kwargs={'dtype': torch.bfloat16} runs it faster where "
                "bfloat16 is native, at some cost in agreement with disembed"]
    return []


def record_precision(folder: Path, dtype: str) -> None:
    """Tell sentence-transformers to load the transformer in ``dtype``: its module config's
    ``model_kwargs`` (read by ``SentenceTransformer(folder)``), so the export computes in the
    precision the library computed the model's training vectors in."""
    if dtype == "float32":
        return
    entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    for entry in entries:
        if entry["type"].endswith(".Transformer"):
            path = folder / entry["path"] / "sentence_bert_config.json"
            config = json.loads(path.read_text(encoding="utf-8"))
            config.setdefault("model_kwargs", {})["dtype"] = dtype
            atomic_write_text(path, json.dumps(config, indent=2) + "\n")


def _aliases(routes) -> dict[str, str]:
    """Every other spelling of a route's language that disembed reads as it (``deu``,
    ``ger``, ``deu_latn``; ``iw`` for ``he``): each real language's code normalised as
    :func:`~disembed.data.languages.normalize_language` does, kept where it lands on a
    route."""
    out = {}
    for code in valid_language_subtags():
        try:
            canonical = normalize_language(code)
        except DisembedError:
            continue
        if canonical in routes and code != canonical:
            out[code] = canonical
    for code in routes:
        try:
            iso3 = to_iso3(code)
        except DisembedError:
            continue
        out.update({iso3: code, f"{iso3}_latn": code})
    return {k: v for k, v in out.items() if k not in routes}


def _ship_module(folder: Path) -> None:
    """Copy the routed head (:mod:`.exported_module`), its transformer
    (:mod:`.packed_transformer`) and disembed's routing rule
    (:mod:`disembed.util.routing_rule`, the very file the library runs) into ``folder``, and
    point ``modules.json`` at them: the export loads with ``trust_remote_code=True``
    already, so running on tokens alone costs its users nothing."""
    here = Path(__file__).parent
    shutil.copyfile(here / "exported_module.py", folder / REMOTE_MODULE_FILE)
    shutil.copyfile(here / "packed_transformer.py", folder / REMOTE_TRANSFORMER_FILE)
    shutil.copyfile(Path(routing_rule.__file__), folder / REMOTE_RULE_FILE)
    entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    for entry in entries:
        if entry["type"].endswith(".LanguageRoutedMeaning"):
            entry["type"] = REMOTE_MODULE_REF
        elif entry["type"].endswith(".Transformer"):
            entry["type"] = REMOTE_TRANSFORMER_REF
    atomic_write_text(folder / "modules.json", json.dumps(entries, indent=2) + "\n")


def _export_info(saved: SavedModel, mmap: MeaningMap, notes: list[str]) -> dict[str, Any]:
    model, meta = saved.disentangler, saved.metadata
    return {"format": "disembed-sentence-transformers-export/1", "method": model.name,
            "recipe": model.method, "papers": model.papers(), "params": model.get_params(),
            "encoder": saved.require_identity().to_dict(),
            "encoder_spec": meta.encoder_spec, "dim": mmap.out_dim,
            "by_language": mmap.by_language,
            "routes": sorted(mmap.routes) if mmap.by_language else [],
            "languages": model.known_languages(),
            "identifies_language": bool(mmap.by_language
                                        and model.language_identifier is not None),
            "training": meta.training, "notes": notes}


def read_export_info(folder: str | os.PathLike) -> dict[str, Any]:
    """The ``disembed_export.json`` of an exported folder."""
    path = Path(folder) / EXPORT_INFO
    if not path.is_file():
        raise ConfigError(f"{folder} is not a disembed export ({EXPORT_INFO} is missing)")
    return json.loads(path.read_text(encoding="utf-8"))
