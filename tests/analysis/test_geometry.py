"""Alignment and uniformity on configurations with known values; the per-epoch recorder."""

import numpy as np
import pytest

from disembed.analysis.geometry import GeometryRecorder, alignment, geometry, uniformity
from disembed.exceptions import ShapeError
from disembed.methods import make_method


def test_alignment_known_values():
    x = np.eye(3)
    assert alignment(x, x) == pytest.approx(0.0)
    assert alignment(x, -x) == pytest.approx(4.0)  # antipodal: ||2u||^2
    assert alignment(x, np.roll(x, 1, axis=0)) == pytest.approx(2.0)  # orthogonal
    assert alignment(3 * x, x) == pytest.approx(0.0)  # scale-free: rows are normalised
    assert alignment(x, np.roll(x, 1, axis=0), alpha=1) == pytest.approx(np.sqrt(2))


def test_uniformity_known_values():
    collapsed = np.ones((5, 4))
    assert uniformity(collapsed) == pytest.approx(0.0)  # the worst value
    antipodal = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert uniformity(antipodal) == pytest.approx(-8.0)  # -t * 4 with t = 2
    simplex = np.eye(4)  # every pair at squared distance 2
    assert uniformity(simplex, t=3) == pytest.approx(-6.0)


def test_uniformity_matches_brute_force():
    x = np.random.default_rng(0).standard_normal((7, 3))
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    vals = [np.exp(-2 * np.sum((u[i] - u[j]) ** 2)) for i in range(7) for j in range(i + 1, 7)]
    assert uniformity(x) == pytest.approx(np.log(np.mean(vals)))


def test_shape_errors():
    with pytest.raises(ShapeError):
        alignment(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ShapeError):
        uniformity(np.ones((1, 2)))


def test_recorder_records_every_epoch(toy_pairs):
    src, tgt, src_lang = toy_pairs
    model = make_method("seed", max_epochs=3, patience=10, batch_size=64)
    recorder = GeometryRecorder(model, src[:50], tgt[:50], src_lang[:50], "en")
    model.fit(src, tgt, src_lang, "en", on_epoch_end=recorder)
    assert [r["epoch"] for r in recorder.records] == [1, 2, 3]
    assert set(recorder.records[0]) == {"epoch", "meaning", "language"}
    final = geometry(model.meaning(src[:50], "de"), model.meaning(tgt[:50], "en"))
    assert set(final) == {"alignment", "uniformity"}
    # the head keeps training after a measurement: later epochs differ from the first
    assert recorder.records[0]["meaning"] != recorder.records[-1]["meaning"]
