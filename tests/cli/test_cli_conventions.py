"""Every verb's parser follows the same conventions, checked over the whole command line.

The audit walks every verb (and ``data``'s actions) and fails on a new inconsistency:

* one name per concept: a flag name means one thing (one ``dest``, one set of choices) in
  every verb; the concepts below have one canonical flag; every evaluating verb takes
  ``--max-eval-items`` and ``--max-items``; no visible flag is a deprecated name;
* every flag has help, and every flag that takes a value shows its default;
* no reStructuredText markup in any help;
* every verb's help ends with an example, and each example parses;
* an unknown flag is answered with the verb's own usage.
"""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from disembed.cli import build_parser, main
from disembed.cli.flags import DEPRECATED, VerbParser

#: concept (the parsed ``dest``) -> its one flag, in every verb that has the concept
CANONICAL = {
    "encoder": "--encoder",
    "max_eval_items": "--max-eval-items",
    "input_format": "--input-format",
    "seed": "--seed",
    "languages": "--languages",
    "pairs_per_language": "--pairs-per-language",
    "tasks": "--tasks",
    "methods": "--methods",
    "model": "--model",
    "out": "--out",
    "src_lang": "--src-lang",
    "tgt_lang": "--tgt-lang",
    "batch_size": "--batch-size",
    "n_resamples": "--n-resamples",
    "holdout": "--holdout",
}
#: verbs that score test sets: each takes the subsample size under both names
EVALUATING = {"prepare", "evaluate", "bench", "scale", "analyse"}
#: reStructuredText that must not reach a terminal
RST = re.compile(r"``|:(func|class|mod|meth|data|attr):`|::\n")


def _leaves(parser=None, path=()):
    """``(("verb",) or ("data", "download"), parser)`` for every parser that runs a handler."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and path:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, (*path, name))


LEAVES = list(_leaves())
IDS = [" ".join(p) for p, _ in LEAVES]


def _visible(parser):
    return [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def _options(parser):
    return [a for a in _visible(parser) if a.option_strings]


def test_the_walk_sees_every_verb():
    names = {p[0] for p, _ in LEAVES}
    assert {"bench", "mine", "search", "score", "serve", "data"} <= names
    assert ("data", "download") in [p for p, _ in LEAVES]
    assert all(isinstance(parser, VerbParser) for _, parser in LEAVES)


def test_a_flag_name_means_one_thing_in_every_verb():
    meaning: dict[str, set] = {}
    for _path, parser in LEAVES:
        for action in _options(parser):
            choices = tuple(action.choices) if action.choices else None
            for flag in action.option_strings:
                meaning.setdefault(flag, set()).add((action.dest, choices))
    different = {flag: sorted(map(str, m)) for flag, m in meaning.items() if len(m) > 1}
    assert not different, f"one flag name, several meanings: {different}"


@pytest.mark.parametrize("path, parser", LEAVES, ids=IDS)
def test_each_concept_has_its_one_flag(path, parser):
    for action in _options(parser):
        want = CANONICAL.get(action.dest)
        if want:
            assert want in action.option_strings, (
                f"{' '.join(path)}: {action.option_strings} sets {action.dest}, whose flag is "
                f"{want} in every verb")
    visible = {f for a in _options(parser) for f in a.option_strings}
    deprecated = set(DEPRECATED.get(path[0], {}))
    assert not visible & deprecated, f"{' '.join(path)} shows deprecated {visible & deprecated}"
    if path[0] in EVALUATING:
        assert {"--max-eval-items", "--max-items"} <= visible, f"{path[0]} lacks --max-items"


def _help_of(parser, action) -> str:
    return parser._get_formatter()._expand_help(action) if action.help else ""


@pytest.mark.parametrize("path, parser", LEAVES, ids=IDS)
def test_every_flag_has_help_and_shows_its_default(path, parser):
    missing, no_default = [], []
    for action in _visible(parser):
        text = _help_of(parser, action)
        name = "/".join(action.option_strings) or action.dest
        if not text.strip():
            missing.append(name)
        elif action.option_strings and action.nargs != 0 and not action.required \
                and "default" not in text:
            no_default.append(name)
    assert not missing, f"{' '.join(path)}: no help for {missing}"
    assert not no_default, f"{' '.join(path)}: no default shown for {no_default}"


@pytest.mark.parametrize("path, parser", LEAVES, ids=IDS)
def test_help_is_plain_text(path, parser):
    found = RST.findall(parser.format_help())
    assert not found, f"{' '.join(path)} --help shows reStructuredText markup"


def _without_types(parser):
    """Flags and arity only: file arguments need not exist for an example to parse."""
    for action in parser._actions:
        action.type = None
        for child in getattr(action, "choices", None) or {}:
            if isinstance(action, argparse._SubParsersAction):
                _without_types(action.choices[child])


@pytest.mark.parametrize("path, parser", LEAVES, ids=IDS)
def test_every_verb_help_ends_with_an_example_that_parses(path, parser):
    text = parser.format_help().rstrip()
    assert "\nexample:\n" in text, f"{' '.join(path)} --help has no example"
    commands = text.rsplit("\nexample:\n", 1)[1].splitlines()
    assert commands and all(c.startswith("  disembed ") for c in commands), commands
    check = build_parser()
    _without_types(check)
    for command in commands:
        words = shlex.split(command)[1:]
        args = check.parse_args(words)  # an unknown or renamed flag fails here
        assert args.verb == path[0]


def _required(parser, tmp_path) -> list[str]:
    """Values for every required argument, so that only the unknown flag is wrong."""
    (tmp_path / "in.txt").write_text("Hallo.\n", encoding="utf-8")
    (tmp_path / "model").mkdir(exist_ok=True)
    values = {"--out": str(tmp_path / "out.npy"), "--model": str(tmp_path / "model"),
              "--language": "ja"}
    words = []
    for action in parser._actions:
        if not action.option_strings and action.nargs not in ("*", "?", argparse.PARSER):
            words.append(str(tmp_path / "in.txt"))
        elif action.required and action.option_strings:
            words += [action.option_strings[0], values[action.option_strings[0]]]
    for group in parser._mutually_exclusive_groups:
        if group.required:
            flag = group._group_actions[0].option_strings[0]
            words += [flag, values[flag]]
    return words


@pytest.mark.parametrize("path, parser", LEAVES, ids=IDS)
def test_an_unknown_flag_prints_the_verbs_usage(path, parser, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main([*path, *_required(parser, tmp_path), "--no-such-flag"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: disembed {' '.join(path)} "), err[:120]
    assert f"disembed {' '.join(path)}: error: unrecognized arguments: --no-such-flag" in err


def test_a_near_miss_is_answered_with_the_flag_meant(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--max-itmes", "20"])
    assert "did you mean --max-items?" in capsys.readouterr().err


@pytest.mark.parametrize("verb, old, new, value, dest, expected", [
    ("bench", "--encoders", "--encoder", "e5-small,use-m3", "encoder", ["e5-small", "use-m3"]),
    ("prepare", "--encoders", "--encoder", "use-m3", "encoder", ["use-m3"]),
    ("mine", "--format", "--input-format", "tsv", "input_format", "tsv"),
    ("search", "--format", "--input-format", "text", "input_format", "text"),
])
def test_deprecated_names_still_work_and_say_what_replaces_them(verb, old, new, value, dest,
                                                                  expected, caplog):
    check = build_parser()
    _without_types(check)
    positional = {"mine": ["a", "b", "--out", "o"], "search": ["a", "b", "--out", "o"]}
    args = check.parse_args([verb, *positional.get(verb, []), old, value])
    if isinstance(expected, list):
        args = build_parser().parse_args([verb, old, value])
    assert getattr(args, dest) == expected
    from disembed.cli.flags import warn_deprecated

    with caplog.at_level("WARNING", logger="disembed"):
        warn_deprecated(args)
    assert f"{old} is deprecated and will be removed; use {new}" in caplog.text
    assert DEPRECATED[verb][old] == new


def test_encoder_is_repeatable_and_comma_separated_and_replaces_the_default():
    parse = build_parser().parse_args
    assert parse(["bench"]).encoder == ["e5-small"]
    assert parse(["bench", "--encoder", "use-m3"]).encoder == ["use-m3"]
    assert parse(["bench", "--encoder", "use-m3", "--encoder", "hash:8,e5-small"]).encoder == \
        ["use-m3", "hash:8", "e5-small"]
    assert parse(["bench", "--encoders", "use-m3", "--encoder", "hash:8"]).encoder == \
        ["use-m3", "hash:8"]
