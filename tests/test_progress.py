"""Library calls show a bar on long work without any logging set up, and it switches off.

The bug feared: bars tied to the log level (a library user who never configures logging
saw none), or a switch that does not reach the bar.
"""

from __future__ import annotations

import io
import logging

import pytest

import disembed
from disembed import progress
from disembed.encoders import HashEncoder
from disembed.encoders.cached import CachedEncoder
from disembed.exceptions import ConfigError


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def fresh(monkeypatch):
    """No process setting, logging as a library user has it (WARNING, nothing configured)."""
    monkeypatch.setattr(progress, "_process_setting", None)
    monkeypatch.setattr(logging.getLogger("disembed"), "level", logging.WARNING)
    yield


def _encode_many(tmp_path, monkeypatch):
    err = _Terminal()
    monkeypatch.setattr("sys.stderr", err)
    CachedEncoder(HashEncoder(8), tmp_path).fill([f"text {i}" for i in range(40)],
                                                 desc="encode test")
    return err.getvalue()


def test_a_terminal_gets_a_bar_at_the_default_log_level(tmp_path, monkeypatch, fresh):
    monkeypatch.delenv("DISEMBED_PROGRESS", raising=False)
    assert "encode test: 100%" in _encode_many(tmp_path, monkeypatch)


def test_auto_is_off_when_stderr_is_not_a_terminal(monkeypatch, fresh):
    monkeypatch.setenv("DISEMBED_PROGRESS", "auto")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not progress.progress_enabled()
    monkeypatch.setattr("sys.stderr", _Terminal())
    assert progress.progress_enabled()


@pytest.mark.parametrize("value, shown", [("1", True), ("0", False)])
def test_the_environment_variable_wins_over_the_terminal_rule(monkeypatch, fresh, value,
                                                               shown):
    monkeypatch.setenv("DISEMBED_PROGRESS", value)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    assert progress.progress_enabled() is shown


def test_set_progress_wins_over_the_environment_and_none_gives_it_back(tmp_path, monkeypatch,
                                                                        fresh):
    monkeypatch.setenv("DISEMBED_PROGRESS", "1")
    disembed.set_progress(False)
    assert _encode_many(tmp_path, monkeypatch) == ""
    disembed.set_progress(None)
    assert progress.progress_enabled()
    with pytest.raises(ConfigError, match="True, False or None"):
        disembed.set_progress("yes")


def test_an_unknown_value_is_named_and_auto_is_used(monkeypatch, fresh, caplog):
    monkeypatch.setenv("DISEMBED_PROGRESS", "sometimes")
    monkeypatch.setattr("sys.stderr", _Terminal())
    with caplog.at_level(logging.WARNING, logger="disembed"):
        assert progress.progress_enabled()
    assert "DISEMBED_PROGRESS='sometimes'" in caplog.text
