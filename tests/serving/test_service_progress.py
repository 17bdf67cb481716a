"""The service never draws progress bars, whatever the log level (issue 18, point 6)."""

from __future__ import annotations

import logging

from disembed.encoders import HashEncoder
from disembed.encoders.cached import CachedEncoder
from disembed.methods import make_method
from disembed.serving.service import EmbeddingService


def test_encoding_inside_the_service_draws_no_bar_though_bars_are_on(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.setenv("DISEMBED_PROGRESS", "1")
    logging.getLogger("disembed").setLevel(logging.INFO)
    try:
        encoder = CachedEncoder(HashEncoder(16), tmp_path)
        service = EmbeddingService(encoder, make_method("baseline"))
        service.encode([f"request text {i}" for i in range(50)])
        err = capsys.readouterr().err
        assert "sent/s" not in err and "%|" not in err
        encoder.fill(["outside the service"], desc="outside")  # bars are on elsewhere
        assert "outside" in capsys.readouterr().err
    finally:
        logging.getLogger("disembed").setLevel(logging.NOTSET)
