"""Argument values no parser type catches: an empty path or spec (``--model ""`` once
scored raw vectors without a word, since an empty path is the working folder), and one
column named for both sides (``--src-col src --tgt-col src`` scored every sentence against
itself)."""

from __future__ import annotations

import argparse

from ..exceptions import ConfigError

#: options whose empty value is never meant: a path, a spec, a language
_NOT_EMPTY = ("model", "out", "run_dir", "cache_dir", "data_dir", "encoder", "pairs",
              "bench", "src_lang", "tgt_lang", "scores")


def check_values(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` for the values in the module docstring."""
    for name in _NOT_EMPTY:
        values = getattr(args, name, None)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and not value.strip():
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} is empty ({value!r}); give a value or leave "
                                  f"{flag} out for its default (an unset shell variable?)")
    src, tgt = getattr(args, "src_col", None), getattr(args, "tgt_col", None)
    if isinstance(src, str) and src and src == tgt:
        raise ConfigError(f"--src-col and --tgt-col are both {src!r}: every sentence would "
                          "be paired with itself; name the two columns of the pair")


__all__ = ["check_values"]
