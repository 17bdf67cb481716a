"""The service's routes, each a module-level function of the request (:mod:`.app` lists
them; :func:`add_routes` registers them).

A route finds what it serves on the app's state (``request.app.state``: the service, the
micro-batcher, the limits, the token counter, the options, the metrics), so a request can
be followed from its route to its vectors function by function:
:func:`embeddings` -> :func:`~.intake.read_json` -> :func:`~.requests.parse_embeddings`
-> :func:`~.tokens.encode_within_limits` (-> the micro-batcher -> the encoder)
-> :meth:`~.service.EmbeddingService.text_view` (the one text path, one identifier pass)
-> :func:`embedding_data`
(:func:`~.responses.unit_rows` unless ``normalize`` is false) -> the JSON response.

``/v1/embeddings`` answers unit-length vectors by default, as OpenAI's embeddings are (a
dot-product store then ranks by cosine); ``"normalize": false`` gives the view as the
model computes it, the vector the library's ``SavedModel.meaning`` returns. Normalising is
a post-step on that vector, never a different vector.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any

import numpy as np
from starlette.requests import Request  # FastAPI reads the routes' annotations
from starlette.responses import PlainTextResponse, Response

from ..hardware import current_settings
from ..version import __version__
from . import schemas, tei
from .intake import read_json
from .requests import EmbeddingsRequest, Limits, parse_embeddings, parse_pairs
from .responses import finite_float32, json_response, unit_rows, vector_floats
from .service import EmbeddingService
from .tokens import encode_within_limits


def _usage(counts: list[int]) -> dict[str, int]:
    """OpenAI's ``usage``: the encoder's tokens (words for an encoder without a tokenizer)."""
    return {"prompt_tokens": sum(counts), "total_tokens": sum(counts)}


def _encoded(vec: np.ndarray, fmt: str) -> Any:
    if fmt == "base64":
        return base64.b64encode(finite_float32(vec).astype("<f4").tobytes()).decode("ascii")
    return vector_floats(vec)


def embedding_data(req: EmbeddingsRequest, out, reports_language: bool) -> list[dict]:
    """OpenAI's ``data``: one item per text, unit length unless the request said
    ``normalize: false``, with the language each text counted as and its probability
    (``reports_language``; ``out``: the text path's answer, vectors and reported languages
    from one identifier pass)."""
    vectors = unit_rows(out.vectors) if req.normalize else out.vectors
    data = [{"object": "embedding", "index": i, "embedding": _encoded(v, req.encoding_format)}
            for i, v in enumerate(vectors)]
    if reports_language:
        for item, code, p, guessed in zip(data, out.languages, out.probabilities,
                                          out.predicted, strict=True):
            item.update(language=code, language_probability=p, language_predicted=guessed)
    return data


async def embeddings(request: Request) -> Response:
    """``POST /v1/embeddings``: OpenAI's request and response (:mod:`.app`)."""
    state = request.app.state
    service, limits = state.service, state.limits
    req = parse_embeddings(await read_json(request, limits), service, limits)
    request.state.inputs = len(req.texts)
    truncate = state.options.auto_truncate if req.truncate is None else req.truncate
    seen, counts, raw = await encode_within_limits(state.batcher, state.tokens, req.texts,
                                                   truncate, "input")
    out = service.text_view(seen, raw, req.view, req.languages)
    reports = service.needs_language and req.view != "raw"
    return json_response({"object": "list", "model": req.model, "usage": _usage(counts),
                          "data": embedding_data(req, out, reports)})


async def _paired(request: Request, names: tuple[str, str]):
    """Both sides of the pairs in one micro-batched encode, then the cosines of their views."""
    state = request.app.state
    service, limits = state.service, state.limits
    req = parse_pairs(await read_json(request, limits), service, limits, names=names)
    request.state.inputs = len(req.a)
    seen, counts, raw = await encode_within_limits(state.batcher, state.tokens, req.a + req.b,
                                                   state.options.auto_truncate, "pairs")
    n = len(req.a)
    return req, service.cosines(seen[:n], seen[n:], raw[:n], raw[n:], req.a_languages,
                                req.b_languages, req.view), counts


async def similarity(request: Request) -> Response:
    """``POST /v1/similarity``: the cosine of the meaning parts of each pair."""
    req, cos, counts = await _paired(request, ("text1", "text2"))
    return json_response({"object": "list", "model": req.model, "usage": _usage(counts),
                          "data": [{"object": "similarity", "index": i, "similarity": float(c)}
                                   for i, c in enumerate(cos)]})


async def quality_estimation(request: Request) -> Response:
    """``POST /v1/qe``: the WMT20 QE task's score, cos(meaning(source), meaning(mt))."""
    req, cos, counts = await _paired(request, ("source", "translation"))
    return json_response({"object": "list", "model": req.model,
                          "metric": "cosine(source, translation)", "usage": _usage(counts),
                          "data": [{"object": "qe_score", "index": i, "score": float(c)}
                                   for i, c in enumerate(cos)]})


async def models(request: Request) -> dict:
    """``GET /v1/models``: one id per view (OpenAI's list)."""
    state = request.app.state
    return {"object": "list", "data": [
        {"id": mid, "object": "model", "created": state.started, "owned_by": "disembed",
         "view": view} for mid, view in state.service.model_ids.items()]}


def service_info(service: EmbeddingService, limits: Limits, options, started: int
                 ) -> dict[str, Any]:
    """``GET /info``: what is served and how (``options``: the app's ServeOptions)."""
    model = service.model
    return {"model_id": service.name, "model_ids": list(service.model_ids),
            "method": model.name, "recipe": model.method,
            "params": json.loads(json.dumps(model.get_params(), default=str)),
            "languages": model.known_languages(),
            "encoder": service.encoder.name,
            "encoder_identity": service.encoder.identity.to_dict(),
            "dim": service.encoder.dim, "views": service.views,
            "needs_language": service.needs_language, "limits": asdict(limits),
            "max_batch": options.max_batch, "batch_window_ms": 1000 * options.batch_window,
            "encode_workers": options.encode_workers,
            "auth": bool(options.api_key), "cors_origins": list(options.cors_origins),
            "version": __version__, "started": started,
            # text-embeddings-inference's names for its limits
            "model_dtype": dict(service.encoder.identity.extra).get(
                "dtype", "float32"),
            "max_concurrent_requests": options.max_concurrent_requests,
            "max_batch_tokens": options.max_batch_tokens,
            "max_batch_requests": options.max_batch,
            "max_client_batch_size": limits.max_inputs,
            "max_input_length": options.max_input_tokens, "auto_truncate": options.auto_truncate}


async def info(request: Request) -> dict:
    """``GET /info``: :func:`service_info` with the counters (batching, admission)."""
    state = request.app.state
    service, s, threads = state.service, state.batcher.stats, current_settings()
    return {**service_info(service, state.limits, state.options, state.started),
            "batching": {"requests": s.requests, "batches": s.batches, "texts": s.texts,
                         "encoded": s.encoded, "largest_batch": s.largest,
                         "largest_batch_tokens": s.largest_tokens,
                         "encoder_calls": service.counter.calls,
                         "encode_seconds": round(s.encode_seconds, 6)},
            "admission": {"in_flight": state.admission.active,
                          "peak": state.admission.peak,
                          "rejected": state.admission.rejected,
                          "bodies_arriving": sum(state.body_reads.reading.values()),
                          "bodies_refused": state.body_reads.refused},
            "token_unit": state.tokens.unit,
            "threads": threads.to_dict() if threads else None}


async def prometheus(request: Request) -> PlainTextResponse:
    """``GET /metrics``: Prometheus text (:mod:`.metrics`)."""
    return PlainTextResponse(request.app.state.metrics.render(),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


async def health() -> dict:
    """``GET /health`` (and ``HEAD``): alive, as TEI's; the configuration is in ``/info``."""
    return {"status": "ok"}


def add_routes(app) -> None:
    """Every route of the service on ``app`` (a FastAPI application)."""
    def post(path: str, endpoint, body, answer, **kw) -> None:
        app.add_api_route(path, endpoint, methods=["POST"], **kw,
                          openapi_extra=None if body is None else schemas.request_body(body),
                          responses=None if answer is None else {200: {"model": answer},
                                                                 **schemas.ERRORS})

    post("/v1/embeddings", embeddings, schemas.EmbeddingsBody, schemas.EmbeddingsResponse)
    post("/v1/similarity", similarity, schemas.PairsBody, schemas.SimilarityResponse)
    post("/v1/qe", quality_estimation, schemas.PairsBody, schemas.QEResponse)
    post("/embed", tei.embed, None, None)
    post("/", tei.embed, None, None, include_in_schema=False)  # TEI's alias (InferenceClient)
    app.add_api_route("/v1/models", models, methods=["GET"], response_model=schemas.ModelList)
    app.add_api_route("/info", info, methods=["GET"])
    app.add_api_route("/metrics", prometheus, methods=["GET"], response_class=PlainTextResponse)
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/health", health, methods=["HEAD"],  # load balancers probe with HEAD
                      include_in_schema=False)
