"""Every recipe's loss against its paper's equations, recomputed with numpy, row by row."""

import numpy as np
import pytest
import torch

from disembed.methods import make_method
from disembed.training.trainer import Batch

B, D = 6, 4
SN = [1, 0, 3, 2, 5, 4]  # same-language partner of each source row (languages below)
TN = [2, 3, 4, 5, 0, 1]
S_LANG = [0, 0, 1, 1, 2, 2]
T_LANG = [3, 3, 3, 3, 3, 3]
K = 4


def cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def log_softmax(z):
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


@pytest.fixture
def data():
    rng = np.random.default_rng(11)
    return {"s": rng.standard_normal((B, D)), "t": rng.standard_normal((B, D)),
            "Wm": rng.standard_normal((D, D)), "bm": rng.standard_normal(D),
            "Wl": rng.standard_normal((D, D)), "bl": rng.standard_normal(D),
            "Wc": rng.standard_normal((K, D)), "bc": rng.standard_normal(K)}


def batch(data, s_lang=S_LANG, t_lang=T_LANG):
    f = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    return Batch(f(data["s"]), f(data["t"]), torch.tensor(s_lang), torch.tensor(t_lang),
                 torch.tensor(SN), torch.tensor(TN), torch.ones(B), torch.ones(B))


def two_head_model(name, data, **params):
    """``name`` with its two linear heads (and classifier / discriminator) set to ``data``."""
    model = make_method(name, **params)
    model.languages_ = [f"l{i}" for i in range(K)]
    model._prepare()
    head = model.build_head(D)
    with torch.no_grad():
        for layer, w, b in ((head.meaning, "Wm", "bm"), (head.language, "Wl", "bl")):
            layer.weight.copy_(torch.tensor(data[w])), layer.bias.copy_(torch.tensor(data[b]))
        classifier = head.lid if head.lid is not None else model.build_adversary(D)
        if classifier is not None:
            classifier.weight.copy_(torch.tensor(data["Wc"]))
            classifier.bias.copy_(torch.tensor(data["bc"]))
            model.discriminator_ = classifier
    model.head_ = head
    return model, head


def parts(data):
    m = lambda e: data["Wm"] @ e + data["bm"]  # noqa: E731
    l = lambda e: data["Wl"] @ e + data["bl"]  # noqa: E731, E741
    s, t = data["s"], data["t"]
    return s, t, [m(x) for x in s], [l(x) for x in s], [m(x) for x in t], [l(x) for x in t]


def dream_reference(data):
    s, t, sM, sL, tM, tL = parts(data)
    L_R = (np.mean([(sM[i] + sL[i] - s[i]) ** 2 for i in range(B)])
           + np.mean([(tM[i] + tL[i] - t[i]) ** 2 for i in range(B)]))
    L_S = np.mean([(1 - cos(sM[i], tM[i])) + max(0, cos(sM[i], sM[SN[i]]))
                   + max(0, cos(tM[i], tM[TN[i]])) for i in range(B)])
    L_L = np.mean([(1 - cos(sL[i], sL[SN[i]])) + (1 - cos(tL[i], tL[TN[i]])) for i in range(B)])
    lid = lambda x: data["Wc"] @ x + data["bc"]  # noqa: E731
    L_LID = np.mean([-log_softmax(lid(sL[i]))[S_LANG[i]] - log_softmax(lid(tL[i]))[T_LANG[i]]
                     for i in range(B)])
    return L_R + L_S + L_L + L_LID


def meat_reference(data):
    s, t, sM, sL, tM, tL = parts(data)
    D_ = lambda x: data["Wc"] @ x + data["bc"]  # noqa: E731
    total = 0.0
    for i in range(B):
        total += ((1 - cos(s[i], sM[i] + sL[i])) + (1 - cos(t[i], tM[i] + tL[i]))
                  + (1 - cos(s[i], tM[i] + sL[i])) + (1 - cos(t[i], sM[i] + tL[i]))
                  + max(0, cos(sL[i], tL[i]))
                  - log_softmax(D_(sM[i])).mean() - log_softmax(D_(tM[i])).mean())
    return total / B


def oracle_paper_reference(data, s_lang=S_LANG, t_lang=T_LANG):
    _, _, sM, sL, tM, tL = parts(data)
    ic = 0.0
    for L, lang in ((sL, s_lang), (tL, t_lang)):
        same = [(i, j) for i in range(B) for j in range(B) if i != j and lang[i] == lang[j]]
        ic += np.mean([1 - cos(L[i], L[j]) for i, j in same]) if same else 0.0
    is_ = np.mean([max(0, cos(sM[i], sL[i])) + max(0, cos(tM[i], tL[i])) for i in range(B)])
    return ic + is_


def oracle_official_new_reference(data):
    _, _, _, sL, _, tL = parts(data)
    ic = np.mean([2 - cos(sL[i], sL[j]) - cos(tL[i], tL[j]) for i in range(B) for j in range(B)])
    return ic + np.mean([max(0, cos(sL[i], tL[i])) for i in range(B)])


def loss_of(model, head, b):
    loss, _ = model.loss(head, b)
    return loss.item()


def test_dream_matches_its_equations(data):
    model, head = two_head_model("dream", data)
    assert loss_of(model, head, batch(data)) == pytest.approx(dream_reference(data), rel=1e-5)


def test_meat_generator_and_discriminator_losses(data):
    model, head = two_head_model("meat", data)
    b = batch(data)
    assert loss_of(model, head, b) == pytest.approx(meat_reference(data), rel=1e-5)
    _, _, sM, _, tM, _ = parts(data)
    D_ = lambda x: data["Wc"] @ x + data["bc"]  # noqa: E731
    ref = np.mean([-log_softmax(D_(sM[i]))[S_LANG[i]] - log_softmax(D_(tM[i]))[T_LANG[i]]
                   for i in range(B)])
    disc_loss = model.adversary_loss(b)
    assert disc_loss.item() == pytest.approx(ref, rel=1e-5)
    disc_loss.backward()  # the discriminator's loss must not move the heads
    assert all(p.grad is None for p in head.parameters())


def test_oracle_paper_form_masks_languages(data):
    model, head = two_head_model("oracle", data)
    assert loss_of(model, head, batch(data)) == pytest.approx(oracle_paper_reference(data),
                                                              rel=1e-5)
    mixed_t = [0, 1, 0, 1, 2, 2]  # a batch mixing target languages
    assert loss_of(model, head, batch(data, t_lang=mixed_t)) == pytest.approx(
        oracle_paper_reference(data, t_lang=mixed_t), rel=1e-5)


def test_oracle_clustering_by_hand():
    from disembed.methods.constraints import language_cluster

    class V:  # only what the term reads
        s_lang, t_lang = torch.tensor([0, 0, 1]), torch.tensor([0, 1, 2])
        units = {"s_L": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])}
        units["t_L"] = units["s_L"]

        def need(self, *names):
            return [getattr(self, n) for n in names]

        def unit(self, name):
            return self.units[name]

    # s: rows 0 and 1 share a language and are orthogonal -> mean(1 - 0) = 1; row 2 is alone.
    # t: no two rows share a language -> no pair, 0. (The official form would give
    # mean over all 9 pairs of 1 - cos = (0+1+0 + 1+0+1 + 0+1+0) / 9 = 4/9 per side.)
    assert language_cluster(V()).item() == pytest.approx(1.0)


def test_oracle_official_variant_and_composition(data):
    model, head = two_head_model("oracle", data, oracle_variant="official-new")
    assert loss_of(model, head, batch(data)) == pytest.approx(
        oracle_official_new_reference(data), rel=1e-5)
    model, head = two_head_model("oracle+meat", data, oracle_weight=0.5)
    expected = meat_reference(data) + 0.5 * oracle_paper_reference(data)
    assert loss_of(model, head, batch(data)) == pytest.approx(expected, rel=1e-5)
    model, head = two_head_model("oracle+dream", data)
    expected = dream_reference(data) + oracle_paper_reference(data)
    assert loss_of(model, head, batch(data)) == pytest.approx(expected, rel=1e-5)


def seed_head_parts(W, b, s, t):
    sM, tM = [W @ x + b for x in s], [W @ x + b for x in t]
    return sM, [s[i] - sM[i] for i in range(B)], tM, [t[i] - tM[i] for i in range(B)]


def intra_inter_reference(W, b, s, t):
    """Nonomura et al.: L_mean + L_lang (intra) and L_cross + L_sep (inter)."""
    xM, xL, yM, yL = seed_head_parts(W, b, s, t)
    intra = inter = 0.0
    for i in range(B):
        j, k = SN[i], TN[i]
        intra += (2 * (1 - cos(xM[i], yM[i])) + max(0, cos(xM[i], xM[j]))
                  + max(0, cos(yM[i], yM[k])) + (1 - cos(xL[i], xL[j])) + (1 - cos(yL[i], yL[k])))
        inter += (4 - cos(s[i], yM[i] + xL[i]) - cos(t[i], xM[i] + yL[i])
                  - cos(s[i], xM[i] + xL[j]) - cos(t[i], yM[i] + yL[k])
                  + max(0, cos(xM[i], xL[i])) + max(0, cos(yM[i], yL[i])))
    return intra / B, inter / B


@pytest.mark.parametrize("name", ["intra", "inter", "both"])
def test_intra_inter_both_match_their_equations(name, data):
    model = make_method(name)
    model._prepare()
    head = model.build_head(D)
    with torch.no_grad():
        head.meaning.weight.copy_(torch.tensor(data["Wm"]))
        head.meaning.bias.copy_(torch.tensor(data["bm"]))
    intra, inter = intra_inter_reference(data["Wm"], data["bm"], data["s"], data["t"])
    expected = {"intra": intra, "inter": inter, "both": intra + inter}[name]
    assert loss_of(model, head, batch(data)) == pytest.approx(expected, rel=1e-5)
    if name == "both":
        assert model.term_weights() == make_method("seed").term_weights()
