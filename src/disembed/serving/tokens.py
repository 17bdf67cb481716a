"""Tokens per text, for the service's batch budget and its input limit (TEI's ``truncate``).

The encoder says how many tokens each text becomes when it has a tokenizer
(:meth:`~disembed.encoders.EncoderPlugin.token_counts`); otherwise the service counts
whitespace-separated words, and says so (``unit``). A text over the limit is refused, or,
when the request (or the server's ``--auto-truncate``) asks for it, cut to the longest
prefix that fits: the vector is then the vector of that prefix, the same in every batch.
"""

from __future__ import annotations

from typing import Sequence

from .service import ServiceError


class TokenCounter:
    """Counts and cuts texts by the encoder's tokens (or words, without a tokenizer).

    Args:
        encoder: the service's encoder (cached or not).
        max_input_tokens: the most tokens a text may have; ``None``: no limit (a long text
            is embedded whole, as the library does).
    """

    def __init__(self, encoder, max_input_tokens: int | None = None) -> None:
        count = getattr(encoder, "token_counts", None)
        probe = count(["a"]) if count is not None else None
        self._count = count if probe is not None else None
        self.unit = "tokens" if self._count is not None else "words"
        self.encoder_window = getattr(encoder, "max_input_tokens", None)
        self.max_input_tokens = max_input_tokens

    def counts(self, texts: Sequence[str]) -> list[int]:
        if self._count is not None:
            return [int(n) for n in self._count(list(texts))]
        return [max(len(t.split()), 1) for t in texts]

    @property
    def truncation_limit(self) -> int | None:
        """Where ``truncate`` cuts: the server's limit, else the encoder's own window."""
        return self.max_input_tokens or self.encoder_window

    def fit(self, texts: list[str], counts: list[int], truncate: bool, param: str
            ) -> tuple[list[str], list[int]]:
        """``texts`` within the limit: a longer text is cut (``truncate``) or refused (413)."""
        limit = self.truncation_limit if truncate else self.max_input_tokens
        if limit is None:
            return texts, counts
        out, sizes = list(texts), list(counts)
        for i, n in enumerate(counts):
            if n <= limit:
                continue
            if not truncate:
                raise ServiceError(
                    f"'{param}[{i}]' has {n} {self.unit}; at most {limit} per text: shorten "
                    "it, or send \"truncate\": true to embed its first "
                    f"{limit} {self.unit}", 413, param)
            out[i] = self.cut(texts[i], limit)
            sizes[i] = self.counts([out[i]])[0]
        return out, sizes

    def cut(self, text: str, limit: int) -> str:
        """The longest prefix of ``text`` (whole characters) of at most ``limit`` units."""
        if self._count is None:
            return " ".join(text.split()[:limit])
        lo, hi = 1, len(text)  # counts grow with the prefix: binary search on its length
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.counts([text[:mid]])[0] <= limit:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo].rstrip() or text[:lo]


async def encode_within_limits(batcher, counter: TokenCounter, texts: list[str],
                               truncate: bool, param: str):
    """``(texts as embedded, their token counts, raw embeddings)``: each text checked against
    the token limit (cut or refused, :meth:`TokenCounter.fit`), the batch charged its tokens."""
    texts, counts = counter.fit(texts, counter.counts(texts), truncate, param)
    return texts, counts, await batcher.encode(texts, tokens=sum(counts))
