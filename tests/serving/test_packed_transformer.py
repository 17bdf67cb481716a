"""The export's transformer runs a BERT / XLM-R encoder on its batch's tokens alone
(``disembed_meaning.packed_hidden_states``), and must give what the Hugging Face model gives.

Bugs feared: the fused query/key/value in the wrong order, a row's tokens written back to
another row, XLM-R's position offset (padding index + 1) or the token types dropped, the
attention of one row seeing another row's tokens or its padding, a row's vector depending on
the other rows of its batch, and the fast path taken where it does not apply (training, a
gradient, another architecture), where the plain forward must run.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
transformers = pytest.importorskip("transformers")

from disembed.serving import packed_transformer as exported_module  # noqa: E402

_packable = exported_module._packable
attention_groups = exported_module.attention_groups
packed_hidden_states = exported_module.packed_hidden_states


def _model(kind: str):
    torch.manual_seed(0)
    common = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=40, pad_token_id=1)
    if kind == "bert":
        return transformers.BertModel(transformers.BertConfig(**common, type_vocab_size=2)).eval()
    return transformers.XLMRobertaModel(transformers.XLMRobertaConfig(**common)).eval()


def _batch(lengths, seed=0):
    """Right-padded ids (pad id 1) of the given lengths, and their mask."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), 1, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(3, 50, (n,), generator=g)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    return ids, mask


@pytest.mark.parametrize("kind", ["bert", "xlm-roberta"])
def test_packed_hidden_states_are_the_models_own_on_every_token(kind):
    model = _model(kind)
    ids, mask = _batch([7, 3, 12, 3, 9, 12, 2])
    types = (torch.arange(ids.shape[1])[None, :] > 4).long().expand_as(ids).contiguous() \
        if kind == "bert" else None
    with torch.inference_mode():
        assert _packable(model)
        want = model(input_ids=ids, attention_mask=mask.long(),
                     token_type_ids=types).last_hidden_state
        got = packed_hidden_states(model, ids, mask, types)
    assert got.shape == want.shape
    assert torch.allclose(got[mask], want[mask], atol=2e-5)
    assert not got[~mask].any()  # padding comes back zero


def test_a_rows_hidden_states_do_not_depend_on_its_batch_in_bfloat16():
    """bf16 attention over a padded width sums in another order (0.99982 where a short row
    shares a pass with a long one); rows of one length per attention pass give the row
    exactly what it gets alone."""
    model = _model("xlm-roberta").to(torch.bfloat16)
    lengths = [12, 3, 7, 3, 11, 5, 2, 7]
    ids, mask = _batch(lengths, seed=3)
    with torch.inference_mode():
        batched = packed_hidden_states(model, ids, mask)
        for row, n in enumerate(lengths):
            alone = packed_hidden_states(model, ids[row:row + 1, :n], mask[row:row + 1, :n])
            assert torch.equal(batched[row, :n], alone[0]), row


def test_attention_groups_hold_each_token_once_in_texts_of_one_length():
    lengths = torch.tensor([5, 9, 5, 2, 9, 9, 1])
    groups = attention_groups(lengths)
    rows = sorted(r for index in groups for r in index.reshape(-1).tolist())
    assert rows == list(range(int(lengths.sum())))  # every packed token row, once
    starts = torch.cumsum(lengths, 0) - lengths
    for index in groups:  # each row of a group is one text's tokens, in order
        assert all(int(lengths[starts.tolist().index(int(r[0]))]) == index.shape[1]
                   and r.tolist() == list(range(int(r[0]), int(r[0]) + index.shape[1]))
                   for r in index)


def test_the_fast_path_is_only_taken_where_it_computes_the_same_thing():
    model = _model("bert")
    with torch.inference_mode():
        assert _packable(model)
    with torch.no_grad():
        assert _packable(model)
    assert not _packable(model)  # gradients on: the plain forward keeps the graph right
    with torch.no_grad():
        model.train()
        assert not _packable(model)  # dropout
        model.eval()
        model.config.output_hidden_states = True
        assert not _packable(model)  # every layer asked for
        model.config.output_hidden_states = False
        model.config.position_embedding_type = "relative_key"
        assert not _packable(model)
        model.config.position_embedding_type = "absolute"
        assert not _packable(torch.nn.Linear(2, 2))


def test_the_fused_projection_follows_the_weights():
    """The query/key/value concatenation is cached; a cast of the model must not leave a
    stale float32 copy behind."""
    model = _model("bert")
    ids, mask = _batch([4, 6])
    with torch.inference_mode():
        packed_hidden_states(model, ids, mask)
        model.to(torch.bfloat16)
        got = packed_hidden_states(model, ids, mask)
        want = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state
    assert got.dtype == torch.bfloat16
    agree = torch.nn.functional.cosine_similarity(got[mask].float(), want[mask].float())
    assert agree.min() > 0.999
