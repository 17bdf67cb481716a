"""The service's JSON bodies, written by orjson; unit-length rows; error bodies.

The standard library's encoder took 0.18 ms for one 384-d vector, a third of the event
loop's time a request at 8 clients x 1 text on 2 cores; orjson takes 0.015 ms and writes
each float as the same shortest round-trip decimal as ``repr``, so a client parses the
same numbers. FastAPI's ``jsonable_encoder`` is not used at all (it walks every float:
4 ms for one vector on a busy core).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exceptions import require

#: the longest error message sent (a longer one is cut in its middle: :func:`error_body`)
MAX_MESSAGE = 600
#: the text-embeddings-inference paths (:mod:`.tei`): errors there take TEI's shape
TEI_PATHS = ("/embed", "/")


def check_writer() -> None:
    """Raise with the install command where orjson is missing (at the service's start)."""
    require("orjson", "serve", "disembed serve")


def json_response(content: Any):
    """A ``200 application/json`` response of plain Python values (no numpy scalars)."""
    import orjson  # check_writer ran when the app was made
    from starlette.responses import Response

    return Response(orjson.dumps(content), media_type="application/json")


def finite_float32(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (one row or a matrix) as float32; an error on NaN or infinity, which JSON
    cannot write (orjson would write ``null``) and no client should get in base64 either."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ValueError("the encoder returned a vector with NaN or infinite values")
    return vectors


def vector_floats(vectors: np.ndarray) -> list:
    """:func:`finite_float32` of ``vectors`` as Python floats (nested lists for a matrix)."""
    return finite_float32(vectors).tolist()


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row of ``vectors`` scaled to unit length (a zero row stays zero), in float32: what
    OpenAI's embeddings and TEI's ``normalize`` give, so a dot-product store ranks by cosine.
    The direction is the model's; only the length changes."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


def tei_error(status: int) -> str:
    """TEI's ``error_type`` for an HTTP status."""
    return {429: "overloaded", 503: "unhealthy"}.get(status, "validation" if status < 500
                                                     else "backend")


def error_body(status: int, message: str, param: str | None = None,
               path: str | None = None) -> dict:
    """An error's JSON body: OpenAI's ``{"error": {"message", "type", "param", "code"}}``,
    or TEI's ``{"error", "error_type"}`` on a TEI path. A message is cut to
    :data:`MAX_MESSAGE` characters, keeping its start and its end (the hint): no error
    echoes a request's megabytes back (issue 48)."""
    if len(message) > MAX_MESSAGE:
        half = MAX_MESSAGE // 2
        message = f"{message[:half]} [... {len(message) - 2 * half} characters cut ...] " \
                  f"{message[-half:]}"
    if path in TEI_PATHS:
        return {"error": message, "error_type": tei_error(status)}
    kind = ("authentication_error" if status == 401 else "invalid_request_error"
            if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
