import pytest

pytest.importorskip("matplotlib", reason="matplotlib not installed: pip install 'disembed[plot]'")

from disembed.reports.plots import pyplot, save_png  # noqa: E402


def test_save_png_is_atomic_and_keeps_the_old_file_when_drawing_fails(tmp_path):
    plt = pyplot("a test")
    path = tmp_path / "out" / "fig.png"
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert save_png(fig, path) == path
    first = path.read_bytes()
    assert first.startswith(b"\x89PNG") and sorted(p.name for p in path.parent.iterdir()) == [
        "fig.png"]

    broken, _ = plt.subplots()

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    broken.savefig = fail
    with pytest.raises(RuntimeError, match="disk full"):
        save_png(broken, path)
    assert path.read_bytes() == first  # the previous figure is untouched
