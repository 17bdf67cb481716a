import numpy as np

from disembed.util.dedup import distinct


def test_distinct_maps_every_line_back_to_its_text():
    texts = ["a", "b", "a", "c", "b", "a"]
    d = distinct(texts)
    assert d.texts == ["a", "b", "c"]
    assert d.inverse.tolist() == [0, 1, 0, 2, 1, 0]
    assert d.first.tolist() == [0, 1, 3]
    assert d.duplicates == 3
    assert list(np.asarray(d.texts)[d.inverse]) == texts
    assert d.expand(np.array([10, 20, 30])).tolist() == [10, 20, 10, 30, 20, 10]


def test_unicode_forms_and_control_characters_are_one_text():
    nfc, nfd = "Vi\u1ec7t", "Vie\u0323\u0302t"
    d = distinct([nfc, nfd, "a\x00b", "a b", "A b"])
    assert d.inverse.tolist() == [0, 0, 1, 1, 2]  # case is kept: another text


def test_empty_input():
    d = distinct([])
    assert d.texts == [] and d.inverse.shape == (0,) and d.duplicates == 0
