import torch

from disembed.training import same_language_negatives


def test_negatives_share_language_and_are_never_self():
    langs = torch.tensor([0, 1, 0, 1, 2, 0, 2, 1])
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        idx, valid = same_language_negatives(langs, gen)
        assert valid.all()
        assert (langs[idx] == langs).all()
        assert (idx != torch.arange(len(langs))).all()


def test_lonely_rows_are_masked_or_point_to_themselves():
    langs = torch.tensor([0, 0, 1])
    idx, valid = same_language_negatives(langs, torch.Generator().manual_seed(0))
    assert valid.tolist() == [True, True, False]
    idx, valid = same_language_negatives(langs, torch.Generator().manual_seed(0), fallback="self")
    assert idx[2].item() == 2


def test_negatives_are_seeded_and_cover_all_partners():
    langs = torch.zeros(6, dtype=torch.long)
    a, _ = same_language_negatives(langs, torch.Generator().manual_seed(7))
    b, _ = same_language_negatives(langs, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    gen = torch.Generator().manual_seed(1)
    seen = {same_language_negatives(langs, gen)[0][0].item() for _ in range(200)}
    assert seen == {1, 2, 3, 4, 5}


def test_each_side_draws_negatives_in_its_own_language():
    """Issue 32: source negatives share the source row's language, target negatives the
    target row's, also when the two sides' languages vary independently (en<->de, fr<->zh
    pairs in one batch)."""
    import torch

    from disembed.training.batches import make_batch

    n = 40
    s_lang = torch.tensor([0, 0, 1, 1] * (n // 4))  # de, de, zh, zh, ...
    t_lang = torch.tensor([2, 3, 2, 3] * (n // 4))  # en, fr, en, fr, ...
    x = torch.randn(n, 4)
    for seed in range(5):
        batch = make_batch(x, x, s_lang, t_lang, torch.arange(n),
                           torch.Generator().manual_seed(seed), "mask")
        assert bool(batch.s_valid.all()) and bool(batch.t_valid.all())
        assert torch.equal(s_lang[batch.s_neg], s_lang) and torch.equal(t_lang[batch.t_neg],
                                                                         t_lang)
        assert not bool((batch.s_neg == torch.arange(n)).any())
        assert not bool((batch.t_neg == torch.arange(n)).any())
