"""One constraint declaration per config field: the ``__post_init__`` check, the argparse
type and these bad-value tests all come from it (``disembed.util.fields``)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from disembed.cli.common import items_or_all, pairs_or_all
from disembed.evaluation import EvalOptions
from disembed.exceptions import ConfigError
from disembed.experiment import TrainingData, Workspace
from disembed.experiment.tune import TuneConfig
from disembed.util.fields import arg_type, bad_values, declared

CONFIGS = [EvalOptions, TrainingData, Workspace, TuneConfig]
CASES = [(cls, name, value) for cls in CONFIGS for name, constraints in declared(cls).items()
         for value in bad_values(constraints)]


def test_every_config_declares_its_checked_fields():
    for cls in CONFIGS:
        fields = {f.name for f in dataclasses.fields(cls)}
        assert declared(cls) and {n.split(".")[0] for n in declared(cls)} <= fields, cls


def _make(cls, name, value):
    """``cls`` with field ``name`` (``"data.holdout_per_language"``: a held config's) set."""
    if "." not in name:
        return cls(**{name: value})
    held, inner = name.split(".")
    default = getattr(cls(), held)
    return cls(**{held: dataclasses.replace(default, **{inner: value})})


@pytest.mark.parametrize("cls,name,value", CASES,
                         ids=[f"{c.__name__}.{n}={v!r}" for c, n, v in CASES])
def test_a_bad_value_is_refused_when_the_config_is_made(cls, name, value):
    with pytest.raises(ConfigError, match=f"{name.split('.')[-1]} must be"):
        _make(cls, name, value)


@pytest.mark.parametrize("cls,name", [(c, n) for c in CONFIGS for n in declared(c)])
def test_the_argument_type_refuses_what_the_config_refuses(cls, name):
    parse = arg_type(cls, name)
    for value in bad_values(declared(cls)[name]):
        if value is None or isinstance(value, bool):
            continue  # not spellable on a command line
        with pytest.raises(argparse.ArgumentTypeError, match="expected"):
            parse(str(value))


def test_the_argument_types_parse_what_the_config_accepts():
    assert pairs_or_all("all") is None and pairs_or_all("20") == 20
    assert items_or_all("2") == 2 and items_or_all("ALL") is None
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number of pairs per "
                                                         "language >= 20 or 'all', got '19'"):
        pairs_or_all("19")
    assert arg_type(Workspace, "cache_dtype")("float16") == "float16"
    assert Workspace(batch_size=8, cache_dtype="float16").batch_size == 8
