"""The service's request and response bodies as pydantic models, for the OpenAPI document.

The handlers validate requests themselves (:mod:`.requests`: OpenAI-shaped errors that
say what was wrong and how to fix it); these models only describe the bodies in
``/openapi.json`` and ``/docs``.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, Field

Languages = Optional[Union[str, list[Optional[str]]]]


class EmbeddingsBody(BaseModel):
    input: Union[str, list[str]] = Field(description="a text, or a list of texts")
    model: Optional[str] = Field(None, description="a served model id (GET /v1/models): NAME "
                                 "for the meaning part, NAME:language, NAME:raw; the bare view "
                                 "names meaning/language/raw are accepted too")
    view: Optional[Literal["meaning", "language", "raw"]] = Field(
        None, description="the view to return; overrides the model id's view")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="base64: little-endian float32")
    dimensions: Optional[int] = Field(None, description="omit, or the view's own size")
    language: Languages = Field(None, description="a language code for every text, or one per "
                                "text (null entries predicted); omit to let the model tell, "
                                "among the languages that write each text's script; "
                                "und-Hani: predicted among those that write Han")


class PairsBody(BaseModel):
    pairs: list[list[str]] = Field(description="[[text1, text2], ...]")
    languages: Optional[Union[list[str], list[list[str]]]] = Field(
        None, description="[lang1, lang2] for every pair, or one such list per pair")
    model: Optional[str] = None
    view: Optional[Literal["meaning", "language", "raw"]] = None


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: Union[list[float], str]
    language: Optional[str] = Field(None, description="the language used for this text")
    language_predicted: Optional[bool] = Field(None, description="whether it was predicted")


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    model: str
    data: list[Embedding]
    usage: Usage


class Similarity(BaseModel):
    object: Literal["similarity"] = "similarity"
    index: int
    similarity: float


class SimilarityResponse(BaseModel):
    object: Literal["list"] = "list"
    model: str
    data: list[Similarity]
    usage: Usage


class QEScore(BaseModel):
    object: Literal["qe_score"] = "qe_score"
    index: int
    score: float


class QEResponse(BaseModel):
    object: Literal["list"] = "list"
    model: str
    metric: str
    data: list[QEScore]
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    view: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: Optional[str] = None
    code: int


class ErrorBody(BaseModel):
    error: ErrorDetail


def request_body(model: type[BaseModel]) -> dict:
    """``openapi_extra`` documenting ``model`` as the JSON request body."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": model.model_json_schema(ref_template="#/components/schemas/{model}")}}}}


ERRORS = {status: {"model": ErrorBody, "description": what} for status, what in (
    (400, "malformed request"), (401, "missing or wrong API key"),
    (404, "model not served here"), (413, "request over the size limits"),
    (503, "the service's own resources failed (the reason is in the message)"))}
