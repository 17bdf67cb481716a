"""The text-embeddings-inference (TEI) route: ``POST /embed`` (and ``POST /``, TEI's alias).

TEI's request and response, so that a TEI client (``huggingface_hub.InferenceClient
.feature_extraction``, LangChain's and LlamaIndex's TEI classes) can switch to disembed:

* request ``{"inputs": str | [str], "normalize": bool = true, "truncate": bool = false,
  "truncation_direction": "right", "prompt_name": null, "dimensions": null}``, plus
  disembed's optional ``language`` (a code, or one per input) and ``model`` (a served id);
* response ``[[float, ...], ...]``: one vector per input, the meaning part (L2-normalised
  unless ``normalize`` is false);
* errors ``{"error": message, "error_type": "validation" | "overloaded" | "backend"}``.

``truncate`` cuts a text to the longest prefix of at most ``--max-input-tokens`` tokens
(else the encoder's window); without it a longer text is refused (413). The model's prefix
is part of the model, so ``prompt_name`` other than null is refused; only right-side
truncation exists.
"""

# no ``from __future__ import annotations``: FastAPI reads the handler's annotation
# (``fastapi.Request``) when the route is defined.
from dataclasses import dataclass
from typing import Any

import numpy as np

from .requests import EmbeddingsRequest, Limits, parse_language, parse_texts, view_of_body
from .responses import json_response, vector_floats
from .service import EmbeddingService, ServiceError
from .tokens import TokenCounter, encode_within_limits

#: the TEI paths (errors there take TEI's shape)
TEI_PATHS = ("/embed", "/")


@dataclass
class TEIRequest:
    request: EmbeddingsRequest
    normalize: bool
    truncate: bool | None


def _flag(body: dict, name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise ServiceError(f"'{name}' must be true or false; got {value!r}", param=name)
    return value


def parse_tei(body: Any, service: EmbeddingService, limits: Limits) -> TEIRequest:
    """Check a TEI ``/embed`` body (see the module docstring)."""
    if not isinstance(body, dict):
        raise ServiceError(f"the request body must be a JSON object; got {type(body).__name__}")
    if "inputs" not in body:
        raise ServiceError("'inputs' is required: a string or a list of strings",
                           param="inputs")
    texts = parse_texts(body["inputs"], "inputs", limits)
    normalize = _flag(body, "normalize")
    truncate = _flag(body, "truncate")
    direction = body.get("truncation_direction")
    if direction is not None and str(direction).lower() != "right":
        raise ServiceError(f"'truncation_direction' {direction!r} is not supported: texts are "
                           "cut on the right (their end); send \"right\" or leave it out",
                           param="truncation_direction")
    if body.get("prompt_name") is not None:
        raise ServiceError("'prompt_name' is not supported: the prefix the model was trained "
                           "with is part of the model; leave it out", param="prompt_name")
    fmt = body.get("encoding_format")
    if fmt not in (None, "float"):
        raise ServiceError(f"'encoding_format' {fmt!r} is not supported on /embed (floats "
                           "only); use /v1/embeddings for base64", param="encoding_format")
    model, view = view_of_body(body, service)
    dims = body.get("dimensions")
    size = service.view_dim(view)
    if dims is not None and dims != size:
        raise ServiceError(f"'dimensions' = {dims!r} is not supported: the {view} view has "
                           f"exactly {size} dimensions; leave it out or send {size}",
                           param="dimensions")
    languages = service.languages_for(len(texts), parse_language(body.get("language"), "language"),
                                 "language")
    return TEIRequest(EmbeddingsRequest(texts, view, "float", languages, model),
                      True if normalize is None else normalize, truncate)


def tei_error(status: int) -> str:
    """TEI's ``error_type`` for an HTTP status."""
    return {429: "overloaded", 503: "unhealthy"}.get(status, "validation" if status < 500
                                                     else "backend")


def tei_body(status: int, message: str) -> dict:
    """TEI's error body."""
    return {"error": message, "error_type": tei_error(status)}


def add_tei_routes(app, Request, service: EmbeddingService, batcher, limits: Limits,
                   counter: TokenCounter, auto_truncate: bool, read_json) -> None:
    """``POST /embed`` and ``POST /`` (see the module docstring)."""

    async def embed(request: Request):
        req = parse_tei(await read_json(request, limits), service, limits)
        request.state.inputs = len(req.request.texts)
        truncate = auto_truncate if req.truncate is None else req.truncate
        seen, counts, raw = await encode_within_limits(batcher, counter, req.request.texts,
                                                    truncate, "inputs")
        request.state.tokens = sum(counts)
        vectors = service.text_view(seen, raw, req.request.view, req.request.languages).vectors
        if req.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return json_response(vector_floats(vectors))

    app.post("/embed")(embed)
    app.post("/", include_in_schema=False)(embed)  # TEI's alias (InferenceClient posts here)
