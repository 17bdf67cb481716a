"""SEED's loss against the paper's equations, computed independently with numpy loops."""

import numpy as np
import pytest
import torch

from disembed.methods import Seed
from disembed.methods.heads import LinearResidualHead
from disembed.training.trainer import Batch


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def paper_seed_loss(W, b, s, t, sn_idx, tn_idx):
    """L = L_M + L_L + L_C exactly as written in the paper, one row at a time."""
    total = 0.0
    for i in range(len(s)):
        sM, tM = W @ s[i] + b, W @ t[i] + b
        sL, tL = s[i] - sM, t[i] - tM
        snM, tnM = W @ s[sn_idx[i]] + b, W @ t[tn_idx[i]] + b
        snL, tnL = s[sn_idx[i]] - snM, t[tn_idx[i]] - tnM
        L_M = 2 * (1 - _cos(sM, tM)) + max(0, _cos(sM, snM)) + max(0, _cos(tM, tnM))
        L_L = (1 - _cos(sL, snL)) + (1 - _cos(tL, tnL))
        L_C = (max(0, _cos(sM, sL)) + max(0, _cos(tM, tL))
               + 2 - _cos(s[i], sM + snL) - _cos(t[i], tM + tnL)
               + 2 - _cos(s[i], tM + sL) - _cos(t[i], sM + tL))
        total += L_M + L_L + L_C
    return total / len(s)


def _batch(s, t, sn, tn):
    n = len(s)
    return Batch(torch.tensor(s, dtype=torch.float32), torch.tensor(t, dtype=torch.float32),
                 torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.long),
                 torch.tensor(sn), torch.tensor(tn), torch.ones(n), torch.ones(n))


def _seed_with_head(W, b):
    model = Seed()
    from disembed.methods.constraints import check_weights

    model._weights = check_weights(model.term_weights())
    head = LinearResidualHead(W.shape[0])
    with torch.no_grad():
        head.meaning.weight.copy_(torch.tensor(W, dtype=torch.float32))
        head.meaning.bias.copy_(torch.tensor(b, dtype=torch.float32))
    return model, head


def test_hand_computed_degenerate_batch_is_four():
    # every vector equal, W = I/2: m = l = e/2. L_M = 0 + 1 + 1, L_L = 0, L_C = 1 + 1 + 0 + 0.
    e = np.array([[1.0, 0.0], [1.0, 0.0]])
    model, head = _seed_with_head(0.5 * np.eye(2), np.zeros(2))
    loss, terms = model.loss(head, _batch(e, e, [1, 0], [1, 0]))
    assert loss.item() == pytest.approx(4.0, abs=1e-6)
    assert terms["language_pull"].item() == pytest.approx(0.0, abs=1e-6)
    assert terms["negative_meaning_push"].item() == pytest.approx(2.0, abs=1e-6)


def test_loss_matches_paper_equations_on_random_batch():
    rng = np.random.default_rng(3)
    B, d = 5, 4
    W, b = rng.standard_normal((d, d)), rng.standard_normal(d)
    s, t = rng.standard_normal((B, d)), rng.standard_normal((B, d))
    sn, tn = [1, 2, 3, 4, 0], [4, 0, 1, 2, 3]
    model, head = _seed_with_head(W, b)
    loss, terms = model.loss(head, _batch(s, t, sn, tn))
    assert loss.item() == pytest.approx(paper_seed_loss(W, b, s, t, sn, tn), rel=1e-5)
    assert set(terms) == set(model.term_weights())


def test_rows_without_negative_are_left_out_of_negative_terms():
    rng = np.random.default_rng(4)
    s, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    model, head = _seed_with_head(rng.standard_normal((4, 4)), np.zeros(4))
    full = _batch(s, t, [1, 0, 0], [1, 0, 0])
    full.s_valid = torch.tensor([1.0, 1.0, 0.0])
    full.t_valid = torch.tensor([1.0, 1.0, 0.0])
    _, masked = model.loss(head, full)
    _, first_two = model.loss(head, _batch(s[:2], t[:2], [1, 0], [1, 0]))
    for name in ("negative_meaning_push", "language_pull", "cross_reconstruction_language"):
        assert masked[name].item() == pytest.approx(first_two[name].item(), rel=1e-5)
