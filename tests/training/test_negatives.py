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
