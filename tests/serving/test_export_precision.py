"""An e5-small model trained in bfloat16 exports so that sentence-transformers loads its
transformer in bfloat16, and its vectors stay within the parity bar of the library's.

Bugs feared: the precision not recorded (the export then runs float32: 2-4x slower where
bf16 is native), recorded but not read by sentence-transformers, a head that breaks on
bf16 input (a Dense layer) or drifts past the bar, a float32 model exported as bf16.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from fresh_st import cosines, encode_in_fresh_process  # noqa: E402

from disembed import load_encoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving import export_model  # noqa: E402

BAR = 0.9999  # the export parity bar (tests/serving/test_export_e5.py)
DE = ["Guten Morgen.", "Wie geht es dir?", "Ich lese ein Buch.", "Das Wetter ist schön.",
      "Wo ist der Bahnhof?", "Ich habe Hunger.", "Der Hund schläft.", "Wir gehen nach Hause.",
      "Das ist mein Bruder.", "Sie trinkt Kaffee.", "Es regnet heute.", "Er spielt Gitarre."]
EN = ["Good morning.", "How are you?", "I am reading a book.", "The weather is nice.",
      "Where is the station?", "I am hungry.", "The dog is sleeping.", "We are going home.",
      "This is my brother.", "She drinks coffee.", "It is raining today.", "He plays guitar."]
PROBE = ["Ein kleines Haus am See.", "A small house by the lake.", "Danke schön!",
         "The train leaves at noon.", "Morgen fahren wir nach Berlin."]


@functools.cache
def _encoder(dtype):
    """e5-small in ``dtype``, loaded once per test process."""
    return load_encoder("e5-small-torch", dtype=dtype)


def _export(tmp_path, name, params, dtype):
    enc = _encoder(dtype)
    model = make_method(name, **params).fit(enc.encode(DE * 4), enc.encode(EN * 4), "de", "en")
    model.save(tmp_path / f"{name}-{dtype}", metadata={"encoder": enc.identity.to_dict()})
    out = export_model(tmp_path / f"{name}-{dtype}", tmp_path / f"{name}-{dtype}-st").path
    return enc, model, out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``exported(name, params, dtype)``: :func:`_export` once per module for each recipe
    and precision (the tests only read the folders)."""
    root, made = tmp_path_factory.mktemp("exports"), {}

    def get(name, params, dtype):
        if (name, dtype) not in made:
            made[name, dtype] = _export(root, name, params, dtype)
        return made[name, dtype]
    return get


def _recorded(folder) -> str | None:
    config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
    return config.get("model_kwargs", {}).get("dtype")


# the default suite keeps one routed export (shared with the tokens-alone test below); the
# trained head's routed export and the dense-head pair (~10 s of CPU each) run with -m slow
@pytest.mark.parametrize("name, params", [
    ("mean-centering", {}),
    pytest.param("seed-centered", {"max_epochs": 2, "seed": 0}, marks=pytest.mark.slow)])
def test_a_bf16_routed_model_exports_in_bf16_and_matches_the_library(tmp_path, exported, name,
                                                                     params):
    """The default recipe's kind of export (language-routed): the transformer in bf16, the
    head pooling its token embeddings in float32 as the library does."""
    enc, model, out = exported(name, params, "bfloat16")
    assert _recorded(out) == "bfloat16"
    info = json.loads((out / "disembed_export.json").read_text(encoding="utf-8"))
    assert info["precision"] == "bfloat16"
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    assert str(st[0].model.dtype) == "torch.bfloat16"  # read by plain sentence-transformers
    assert len(st) == 2  # transformer, then the head (which pools)
    got = encode_in_fresh_process([{"dir": str(out), "texts": PROBE, "trust": True}],
                                  tmp_path)[0]
    want = model.meaning(enc.encode(PROBE), None)
    assert cosines(got, want).min() >= BAR


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_dense_head_export_stays_float32(tmp_path, dtype):
    """sentence-transformers' Pooling would round a bf16 pooled vector before a Dense head:
    such an export computes in float32, equal to the library within the bar."""
    enc, model, out = _export(tmp_path, "seed", {"max_epochs": 2, "seed": 0}, dtype)
    assert _recorded(out) is None
    from sentence_transformers import SentenceTransformer

    assert str(SentenceTransformer(str(out), device="cpu")[0].model.dtype) == "torch.float32"
    got = encode_in_fresh_process([{"dir": str(out), "texts": PROBE}], tmp_path)[0]
    assert cosines(got, model.meaning(enc.encode(PROBE), None)).min() >= BAR


def test_a_routed_export_runs_its_tokens_alone_and_keeps_their_vectors(exported):
    """``encode`` sorts by characters and pads a batch to its longest row; the export's
    transformer runs every layer's matmuls on the batch's tokens alone. Bugs feared: the
    padded forward still run (the matmuls then see every padded cell), rows written back to
    the wrong text, a row's vector depending on its batch (bf16 attention over a padded
    width: 0.99982 for the plain transformer)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.transformer import Transformer

    enc, model, out = exported("mean-centering", {}, "bfloat16")
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    assert type(st[0]).__name__ == "PackedTransformer"
    long = [" ".join(EN[i:] + EN[:i]) for i in range(0, 12, 2)]
    texts = [t for pair in zip(DE[:6] + EN[:6], long + long[::-1], strict=True) for t in pair]
    features = st.preprocess(texts, prompt="passage: ")
    rows_seen = []
    dense = st[0].model.encoder.layer[0].intermediate.dense
    hook = dense.register_forward_hook(lambda m, args, y: rows_seen.append(args[0].shape[0]))
    with torch.inference_mode():
        got = st[0](dict(features))["token_embeddings"].float()
        hook.remove()
        plain = Transformer.forward(st[0], dict(features))["token_embeddings"].float()
    mask = features["attention_mask"].bool()
    assert rows_seen == [int(mask.sum())] < [mask.numel()]  # tokens only, one pass
    pooled = [(x * mask[..., None]).sum(1) for x in (got, plain)]
    assert torch.nn.functional.cosine_similarity(*pooled).min() >= BAR
    batched = st.encode(texts)
    alone = np.vstack([st.encode([t]) for t in texts])
    assert cosines(batched, alone).min() >= 0.9999999
    # the same computation as the library's (tokens alone, attention per length, HF's order
    # of the embedding sums): the library's vectors, to float32 rounding
    agree = cosines(batched, model.meaning(enc.encode(texts), None))
    assert agree.min() >= 0.99999
