"""Validation of the service's JSON requests (plain Python: no web framework needed).

Every check raises :class:`~disembed.serving.service.ServiceError` with the HTTP status
to answer: 400 for malformed input (wrong types, empty strings, unknown view, text that is
not valid Unicode), 404 for a ``model`` this service does not serve, 413 for requests over
the :class:`Limits`. Token-id inputs (OpenAI's ``[[int, ...]]`` form) are refused with a
message saying so: the encoders' tokenizers differ, so ids cannot be decoded faithfully.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..util.text import is_blank, lone_surrogate
from .service import EmbeddingService, ServiceError

ENCODING_FORMATS = ("float", "base64")
#: the longest ``model`` or ``view`` a request may name, and the longest language code
MAX_ID_CHARS = 256
MAX_CODE_CHARS = 64


@dataclass(frozen=True)
class Limits:
    """Request size limits."""

    max_inputs: int = 256  # texts (or pairs) per request
    max_chars: int = 8192  # characters per text
    max_total_chars: int = 200_000  # characters per request
    max_body_bytes: int = 4 << 20
    body_timeout: float = 30.0  # seconds for the whole body to arrive (a slow sender: 408)
    #: bodies one client address may be sending at once (beyond: 429; 0: no limit)
    max_client_body_reads: int = 32


#: the most characters of a client's value an error message repeats
ECHO = 60


def short(value: Any, keep: int = ECHO) -> str:
    """``repr(value)``, cut to its first ``keep`` characters: an error names what was sent
    without echoing megabytes of it back."""
    text = repr(value)
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


@dataclass
class EmbeddingsRequest:
    texts: list[str]
    view: str
    encoding_format: str
    #: one normalised code per text, ``None`` where none was sent (the text path then tags
    #: the text with its script), :meth:`~.service.EmbeddingService.languages_for`
    languages: list[str | None]
    model: str = ""
    #: cut texts over the token limit (``True``), refuse them (``False``), or the server's
    #: default (``None``: ``--auto-truncate``)
    truncate: bool | None = None
    #: unit-length vectors (OpenAI's and TEI's default), or the view as the model computes it
    normalize: bool = True


@dataclass
class PairsRequest:
    a: list[str]
    b: list[str]
    a_languages: list[str | None]  # one tag per text, as EmbeddingsRequest.languages
    b_languages: list[str | None]
    view: str
    model: str = ""


def _token_ids(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and (all(isinstance(v, int) for v in value)
                 or all(isinstance(v, list) and all(isinstance(x, int) for x in v)
                        for v in value)))


def parse_texts(value: Any, param: str, limits: Limits, *, allow_single: bool = True
                ) -> list[str]:
    """A request's texts (a string or a non-empty list of strings), checked."""
    if _token_ids(value):
        raise ServiceError(f"'{param}' holds token ids; this service embeds text only (its "
                           "encoders' tokenizers differ, so ids are not decoded): send the "
                           "strings themselves", param=param)
    if allow_single and isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ServiceError(f"'{param}' must be a non-empty string or list of strings; got "
                           f"{type(value).__name__ if value != [] else 'an empty list'}",
                           param=param)
    if len(value) > limits.max_inputs:
        raise ServiceError(f"'{param}' has {len(value)} items; at most {limits.max_inputs} per "
                           "request (split it into several requests)", 413, param)
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise ServiceError(f"'{param}[{i}]' is {type(text).__name__}; expected a string "
                               "(token arrays are not supported)", param=param)
        if is_blank(text):
            raise ServiceError(f"'{param}[{i}]' is empty, whitespace or invisible characters "
                               "only", param=param)
        at = lone_surrogate(text)
        if at >= 0:
            raise ServiceError(f"'{param}[{i}]' holds a lone surrogate (U+{ord(text[at]):04X}) "
                               f"at character {at}: not valid Unicode text; send well-formed "
                               "UTF-8, or escape characters outside the BMP as surrogate pairs",
                               param=param)
        if len(text) > limits.max_chars:
            raise ServiceError(f"'{param}[{i}]' has {len(text)} characters; at most "
                               f"{limits.max_chars}", 413, param)
    total = sum(map(len, value))
    if total > limits.max_total_chars:
        raise ServiceError(f"the request holds {total} characters; at most "
                           f"{limits.max_total_chars}", 413, param)
    return value


def view_of_body(body: dict, service: EmbeddingService) -> tuple[str, str]:
    """``(model id, view)`` from the body's ``model`` and ``view`` fields."""
    model, view = body.get("model"), body.get("view")
    for name, value in (("model", model), ("view", view)):
        if value is not None and not isinstance(value, str):
            raise ServiceError(f"'{name}' must be a string; got {type(value).__name__}",
                               param=name)
        if isinstance(value, str) and len(value) > MAX_ID_CHARS:
            raise ServiceError(f"'{name}' {short(value)} is not served here: a served id has "
                               f"at most {MAX_ID_CHARS} characters (GET /v1/models)",
                               404 if name == "model" else 400, name)
    return service.view_of(model, view)


def _code(value: Any) -> bool:
    """Whether ``value`` may be a language code (checked against the known ones later)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_CODE_CHARS


def parse_language(value: Any, param: str) -> str | list[str | None] | None:
    if value is None or _code(value):
        return value
    if isinstance(value, list) and all(v is None or _code(v) for v in value):
        return value
    raise ServiceError(f"'{param}' must be a language code such as \"de\" (at most "
                       f"{MAX_CODE_CHARS} characters), or a list with one code (or null: "
                       "predict it) per text", param=param)


def _object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ServiceError(f"the request body must be a JSON object; got {type(body).__name__}")
    return body


def parse_embeddings(body: Any, service: EmbeddingService, limits: Limits) -> EmbeddingsRequest:
    """``{"input": str | [str], "model": view, "encoding_format", "language": code | [code],
    "truncate": bool, "normalize": bool}``."""
    body = _object(body)
    if "input" not in body:
        raise ServiceError("'input' is required: a string or a list of strings", param="input")
    texts = parse_texts(body["input"], "input", limits)
    model, view = view_of_body(body, service)
    fmt = body.get("encoding_format")
    fmt = "float" if fmt is None else fmt  # "", 0 and false are no format: refused below
    if not isinstance(fmt, str) or fmt not in ENCODING_FORMATS:
        raise ServiceError(f"'encoding_format' must be one of {ENCODING_FORMATS} (or left "
                           f"out: float); got {short(fmt)}", param="encoding_format")
    dims = body.get("dimensions")
    size = service.view_dim(view)
    if dims is not None and (isinstance(dims, bool) or dims != size):
        raise ServiceError(f"'dimensions' = {short(dims)} is not supported: the {view} view has "
                           f"exactly {size} dimensions (truncating it would change cosines); "
                           f"leave 'dimensions' out or send {size}", param="dimensions")
    langs = service.languages_for(len(texts), parse_language(body.get("language"), "language"),
                                  "language")
    truncate, normalize = flag(body, "truncate"), flag(body, "normalize")
    return EmbeddingsRequest(texts, view, fmt, langs, model, truncate,
                             True if normalize is None else normalize)


def flag(body: dict, name: str) -> bool | None:
    """``body[name]`` as true, false, or ``None`` when absent (400 for anything else)."""
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise ServiceError(f"'{name}' must be true or false; got {short(value)}", param=name)
    return value


def parse_pairs(body: Any, service: EmbeddingService, limits: Limits, *,
                names: tuple[str, str] = ("text1", "text2")) -> PairsRequest:
    """``{"pairs": [[a, b], ...], "languages": [la, lb] | [[la, lb], ...], "model": view}``."""
    body = _object(body)
    pairs = body.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise ServiceError(f"'pairs' must be a non-empty list of [{names[0]}, {names[1]}] pairs",
                           param="pairs")
    if len(pairs) > limits.max_inputs:
        raise ServiceError(f"'pairs' has {len(pairs)} items; at most {limits.max_inputs} per "
                           "request", 413, "pairs")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ServiceError(f"'pairs[{i}]' must be a list of two strings [{names[0]}, "
                               f"{names[1]}]", param="pairs")
    a = parse_texts([p[0] for p in pairs], "pairs", limits, allow_single=False)
    b = parse_texts([p[1] for p in pairs], "pairs", limits, allow_single=False)
    if sum(map(len, a + b)) > limits.max_total_chars:
        raise ServiceError(f"the request holds {sum(map(len, a + b))} characters; at most "
                           f"{limits.max_total_chars}", 413, "pairs")
    la, lb = _pair_languages(body.get("languages"), len(pairs))
    model, view = view_of_body(body, service)
    return PairsRequest(a, b, service.languages_for(len(a), la, "languages"),
                        service.languages_for(len(b), lb, "languages"), view, model)


def _pair_languages(value: Any, n: int) -> tuple[Any, Any]:
    if value is None:
        return None, None
    if isinstance(value, list) and len(value) == 2 and all(_code(v) for v in value):
        return value[0], value[1]
    if isinstance(value, list) and len(value) == n and all(
            isinstance(v, list) and len(v) == 2 and all(_code(x) for x in v) for v in value):
        return [v[0] for v in value], [v[1] for v in value]
    raise ServiceError("'languages' must be [lang1, lang2] for every pair, or one such list "
                       "per pair", param="languages")
