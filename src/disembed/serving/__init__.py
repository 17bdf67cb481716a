"""Meaning embeddings where users already work: a sentence-transformers export and an
HTTP service (layer: beside mining; imports methods, encoders, evaluation, data, util).

FastAPI, uvicorn and sentence-transformers are optional: ``pip install "disembed[serve]"``
/ ``"disembed[st]"``.
"""

from __future__ import annotations

from .export import ExportResult, export_model, read_export_info
from .meaning_map import Affine, MeaningMap, apply_map, meaning_map

__all__ = ["Affine", "ExportResult", "MeaningMap", "apply_map", "export_model", "meaning_map",
           "read_export_info"]
