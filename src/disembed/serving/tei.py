"""The text-embeddings-inference (TEI) route: ``POST /embed`` (and ``POST /``, TEI's alias).

TEI's request and response, so that a TEI client (``huggingface_hub.InferenceClient
.feature_extraction``, LangChain's and LlamaIndex's TEI classes) can switch to disembed:

* request ``{"inputs": str | [str], "normalize": bool = true, "truncate": bool = false,
  "truncation_direction": "right", "prompt_name": null, "dimensions": null}``, plus
  disembed's optional ``language`` (a code, or one per input) and ``model`` (a served id);
* response ``[[float, ...], ...]``: one vector per input, the meaning part, L2-normalised
  unless ``normalize`` is false (then the vector the library's ``SavedModel.meaning``
  gives; the same post-step as ``/v1/embeddings``, :func:`.responses.unit_rows`);
* errors ``{"error": message, "error_type": "validation" | "overloaded" | "backend"}``.

``truncate`` cuts a text to the longest prefix of at most ``--max-input-tokens`` tokens
(else the encoder's window); without it a longer text is refused (413). The model's prefix
is part of the model, so ``prompt_name`` other than null is refused; only right-side
truncation exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request  # FastAPI reads the route's annotation

from .intake import read_json
from .requests import (
    EmbeddingsRequest,
    Limits,
    flag,
    parse_language,
    parse_texts,
    short,
    view_of_body,
)
from .responses import json_response, unit_rows, vector_floats
from .service import EmbeddingService, ServiceError
from .tokens import encode_within_limits


@dataclass
class TEIRequest:
    request: EmbeddingsRequest
    normalize: bool
    truncate: bool | None


def parse_tei(body: Any, service: EmbeddingService, limits: Limits) -> TEIRequest:
    """Check a TEI ``/embed`` body (see the module docstring)."""
    if not isinstance(body, dict):
        raise ServiceError(f"the request body must be a JSON object; got {type(body).__name__}")
    if "inputs" not in body:
        raise ServiceError("'inputs' is required: a string or a list of strings",
                           param="inputs")
    texts = parse_texts(body["inputs"], "inputs", limits)
    normalize = flag(body, "normalize")
    truncate = flag(body, "truncate")
    direction = body.get("truncation_direction")
    if direction is not None and str(direction).lower() != "right":
        raise ServiceError(f"'truncation_direction' {short(direction)} is not supported: texts "
                           "are cut on the right (their end); send \"right\" or leave it out",
                           param="truncation_direction")
    if body.get("prompt_name") is not None:
        raise ServiceError("'prompt_name' is not supported: the prefix the model was trained "
                           "with is part of the model; leave it out", param="prompt_name")
    fmt = body.get("encoding_format")
    if fmt not in (None, "float"):
        raise ServiceError(f"'encoding_format' {short(fmt)} is not supported on /embed (floats "
                           "only); use /v1/embeddings for base64", param="encoding_format")
    model, view = view_of_body(body, service)
    dims = body.get("dimensions")
    size = service.view_dim(view)
    if dims is not None and (isinstance(dims, bool) or dims != size):
        raise ServiceError(f"'dimensions' = {short(dims)} is not supported: the {view} view has "
                           f"exactly {size} dimensions; leave it out or send {size}",
                           param="dimensions")
    languages = service.languages_for(len(texts), parse_language(body.get("language"), "language"),
                                 "language")
    return TEIRequest(EmbeddingsRequest(texts, view, "float", languages, model),
                      True if normalize is None else normalize, truncate)


async def embed(request: Request):
    """``POST /embed`` and ``POST /``: the meaning part of each input (unit length unless
    ``normalize`` is false), as TEI answers. The app's state holds what it serves."""
    state = request.app.state
    service, limits, options = state.service, state.limits, state.options
    req = parse_tei(await read_json(request, limits), service, limits)
    request.state.inputs = len(req.request.texts)
    truncate = options.auto_truncate if req.truncate is None else req.truncate
    seen, counts, raw = await encode_within_limits(state.batcher, state.tokens,
                                                   req.request.texts, truncate, "inputs")
    request.state.tokens = sum(counts)
    vectors = service.text_view(seen, raw, req.request.view, req.request.languages).vectors
    return json_response(vector_floats(unit_rows(vectors) if req.normalize else vectors))
