"""Every flag of ``disembed serve`` has a ``DISEMBED_*`` variable, generated from the parser.

The test walks the serve parser, so a new flag is covered the day it is added. Bugs
feared: a flag without a variable, a variable read but typed differently from its flag, a
variable that beats the typed flag, a bad value that starts a service anyway, a key from
the environment written into a run's provenance.
"""

from __future__ import annotations

import argparse

import pytest

from disembed.cli import build_parser, main
from disembed.cli.env import env_actions, env_name, with_environment

#: a valid value for each flag whose default does not make one
VALUES = {"model": "models/x", "encoder": "hash:8", "served_model_name": "name",
          "api_key": "secret-key", "cors_origins": "http://a,http://b",
          "max_input_tokens": "32", "data_dir": "/tmp/data", "cache_dir": "/tmp/cache",
          "host": "127.0.0.2"}


def _verbs(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _serve():
    return _verbs(build_parser()).choices["serve"]


def _value(action) -> str:
    if action.nargs == 0:
        return "1"
    if action.dest in VALUES:
        return VALUES[action.dest]
    assert isinstance(action.default, (int, float)), (
        f"give test_serve_env.VALUES a value for {action.dest}")
    return str(action.default + 1)  # not the default: an ignored variable would show


SERVE_FLAGS = env_actions(_serve())


def test_every_serve_flag_has_a_variable_named_after_it():
    names = {env_name(a) for a in SERVE_FLAGS}
    assert len(names) == len(SERVE_FLAGS) >= 20
    assert {"DISEMBED_PORT", "DISEMBED_MAX_BATCH_TOKENS", "DISEMBED_MAX_CONCURRENT_REQUESTS",
            "DISEMBED_API_KEY", "DISEMBED_AUTO_TRUNCATE", "DISEMBED_NO_CACHE"} <= names
    text = _serve().format_help()
    assert all(f"[env {n}]" in text.replace("\n", " ").replace("  ", " ") or n in text
               for n in names)


@pytest.mark.parametrize("action", SERVE_FLAGS, ids=lambda a: env_name(a))
def test_a_variable_sets_what_its_flag_sets(action):
    value = _value(action)
    other = ["--model", "m"] if action.dest == "encoder" else ["--encoder", "hash:8"]
    if action.dest in ("model", "encoder"):
        other = []
    parser = build_parser()
    by_env = parser.parse_args(with_environment(_verbs(parser), ["serve", *other],
                                                {env_name(action): value}))
    typed = [action.option_strings[-1]] + ([] if action.nargs == 0 else [value])
    by_flag = build_parser().parse_args(["serve", *other, *typed])
    assert getattr(by_env, action.dest) == getattr(by_flag, action.dest)
    assert getattr(by_env, action.dest) != action.default  # the variable was read


def test_the_typed_flag_wins_and_switches_read_words():
    parser = build_parser()
    env = {"DISEMBED_PORT": "9000", "DISEMBED_NO_CACHE": "false", "DISEMBED_ENCODER": "hash:4",
           "DISEMBED_AUTO_TRUNCATE": "yes"}
    args = parser.parse_args(with_environment(_verbs(parser),
                                              ["serve", "--port", "9100", "--model", "m"], env))
    assert args.port == 9100 and args.no_cache is False and args.auto_truncate is True
    assert args.model == "m" and args.encoder is None  # --model typed: DISEMBED_ENCODER silent


@pytest.mark.parametrize("env, words", [
    ({"DISEMBED_PORT": "eighty"}, "DISEMBED_PORT='eighty' is not a valid --port"),
    ({"DISEMBED_NO_CACHE": "maybe"}, "DISEMBED_NO_CACHE='maybe': expected one of"),
    ({"DISEMBED_MAX_INPUT_TOKENS": "4"}, "expected at least 16 tokens"),
])
def test_a_bad_value_stops_before_anything_starts(env, words, monkeypatch, capsys):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--encoder", "hash:8"])
    assert stop.value.code == 2 and words in capsys.readouterr().err


def test_other_verbs_read_no_variables_and_the_key_stays_out_of_provenance(monkeypatch):
    import disembed.cli as cli
    import disembed.cli.serve as serve_cli

    parser = build_parser()
    assert with_environment(_verbs(parser), ["mine", "a", "b"], {"DISEMBED_K": "9"}) == \
        ["mine", "a", "b"]
    recorded, started = [], {}
    monkeypatch.setattr(cli, "record_command", recorded.append)
    monkeypatch.setattr(serve_cli, "run_server", lambda app, *a, **k: started.update(app=app))
    monkeypatch.setenv("DISEMBED_API_KEY", "top-secret")
    monkeypatch.setenv("DISEMBED_MAX_CONCURRENT_REQUESTS", "5")
    assert main(["serve", "--encoder", "hash:8", "--no-cache"]) == 0
    assert started["app"].state.options.api_key == "top-secret"
    assert started["app"].state.options.max_concurrent_requests == 5
    assert "top-secret" not in " ".join(recorded[0])
