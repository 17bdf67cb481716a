"""Every recipe declares what its hyperparameters accept, and every entry point checks it."""

import pytest

from disembed.exceptions import ConfigError
from disembed.experiment import BenchConfig, check_method_grids, check_method_params
from disembed.experiment.tune import TuneConfig
from disembed.methods import METHODS, make_method, method_class, tuning_grid
from disembed.util.constraints import SEED, Boolean, Interval, Options, check_grid, describe


def test_intervals_options_and_booleans():
    positive = Interval(float, 0, None, closed="neither")
    assert positive.accepts(1e-4) and positive.accepts(3)
    assert not positive.accepts(0) and not positive.accepts(float("nan"))
    assert not positive.accepts(float("inf")) and not positive.accepts("fast")
    assert not positive.accepts(True)
    rank = Interval(int, 1, None)
    assert rank.accepts(1) and not rank.accepts(0) and not rank.accepts(1.0)
    assert describe([rank, None]) == "an integer in [1, inf) or None"
    assert SEED.accepts(2**64 - 1) and not SEED.accepts(2**64) and not SEED.accepts(-1)
    assert Options("a", "b").accepts("a") and not Options("a", "b").accepts("c")
    assert not Options(1).accepts(True)
    assert Boolean().accepts(False) and not Boolean().accepts(0)


@pytest.mark.parametrize("name", METHODS.names())
def test_every_declared_constraint_names_a_real_hyperparameter(name):
    cls = method_class(name)
    assert set(cls._parameter_constraints) - set(cls.param_names()) <= {"hidden"}
    cls.check_params(make_method(name).get_params())  # the defaults meet the declaration


@pytest.mark.parametrize("method, params, fragment", [
    ("seed", {"lr": "fast"}, "lr must be a finite number in (0, inf); got 'fast'"),
    ("seed", {"lr": 0}, "lr must be"),
    ("seed", {"batch_size": 1.5}, "batch_size must be an integer"),
    ("seed", {"lrr": 1e-3}, "Did you mean 'lr'"),
    ("seed", {"seed": 2**70}, "seed must be an integer in [0, 18446744073709551615]"),
    ("lir", {"rank": -3}, "rank must be an integer in [1, inf)"),
    ("lsar", {"rank": "8"}, "rank must be an integer in [1, inf) or None"),
    ("linear-map", {"solver": "svd"}, "solver must be one of 'lstsq'"),
    ("mean-centering", {"unknown_language": "drop"}, "unknown_language must be"),
    ("oracle", {"oracle_variant": None}, "oracle_variant must be one of"),
    ("dream", {"deterministic": "yes"}, "deterministic must be true or false"),
])
def test_make_method_checks_every_value(method, params, fragment):
    with pytest.raises(ConfigError) as err:
        make_method(method, **params)
    assert fragment in str(err.value)


def test_a_params_file_is_checked_for_every_method_it_names():
    with pytest.raises(ConfigError, match="Did you mean 'seed'"):
        check_method_params({"sed": {"lr": 0.1}})
    with pytest.raises(ConfigError, match="lir: rank must be"):  # lir need not be run
        check_method_params({"seed": {"lr": 0.1}, "lir": {"rank": 0}})
    with pytest.raises(ConfigError, match="must be a mapping"):
        check_method_params({"seed": 0.1})
    check_method_params({"seed": {"lr": 0.1}, "lir": {"rank": 2}})


def test_bench_config_checks_methods_it_does_not_run():
    with pytest.raises(ConfigError, match="lir: rank must be"):
        BenchConfig(encoders=["hash:8"], methods=["baseline"],
                    method_params={"lir": {"rank": -1}})


@pytest.mark.parametrize("grid, fragment", [
    ({"seed": {"lr": []}}, "'lr' is an empty list"),
    ({"seed": {"lr": 0.1}}, "'lr' must be a list of values to try"),
    ({"seed": {"lr": ["fast"]}}, "lr must be a finite number"),
    ({"seed": [0.1]}, "must be a mapping"),
    ({"sed": {"lr": [0.1]}}, "Did you mean 'seed'"),
    ({"lir": {"lr": [0.1]}}, "lir takes no 'lr'"),
])
def test_a_grid_is_checked_before_tuning(grid, fragment):
    with pytest.raises(ConfigError) as err:
        check_method_grids(grid)
    assert fragment in str(err.value)
    with pytest.raises(ConfigError):
        TuneConfig(encoder="hash:8", methods=["baseline"], grids=grid)


def test_the_default_grids_meet_their_declarations():
    for method in METHODS.names():
        cls = method_class(method)
        check_grid(method, tuning_grid(method), cls.param_names(), cls._parameter_constraints)
