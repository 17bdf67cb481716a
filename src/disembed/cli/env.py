"""Every flag of ``disembed serve`` as an environment variable, generated from its parser.

``--max-batch-tokens 8192`` can be given as ``DISEMBED_MAX_BATCH_TOKENS=8192``: the name is
``DISEMBED_`` and the flag's destination in capitals, so it follows the parser and no list
is kept by hand (a test walks the parser). A flag on the command line wins over its
variable. A switch takes ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``. A
bad value is refused before anything starts, naming the variable. Values are given to the
parser as if typed after the verb, so they are checked by the same types and choices; the
command recorded with a run's provenance is the one typed, so a secret in a variable (the
API key) stays out of it.
"""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Sequence

from ..exceptions import ConfigError

PREFIX = "DISEMBED_"
#: the verbs whose every flag has a variable
ENV_VERBS = ("serve",)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_name(action: argparse.Action) -> str:
    return PREFIX + action.dest.upper()


def env_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The flags that have a variable: every optional argument but ``--help``."""
    return [a for a in parser._actions if a.option_strings
            and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
            and a.help != argparse.SUPPRESS]


def document(parser: argparse.ArgumentParser) -> None:
    """Name each flag's variable in its help."""
    for action in env_actions(parser):
        action.help = f"{action.help or ''} [env {env_name(action)}]".strip()


def _switch(action: argparse.Action, name: str, value: str) -> list[str]:
    text = value.strip().lower()
    if text in _TRUE:
        on = True
    elif text in _FALSE:
        on = False
    else:
        raise ConfigError(f"{name}={value!r}: expected one of {', '.join(_TRUE + _FALSE)} (it "
                          f"sets the switch {action.option_strings[-1]})")
    if isinstance(action, argparse._CountAction):
        return [action.option_strings[0]] if on else []
    wanted = isinstance(action, argparse._StoreTrueAction)
    return [action.option_strings[-1]] if on == wanted else []


def from_environment(parser: argparse.ArgumentParser, argv: Sequence[str],
                     environ: Mapping[str, str] | None = None) -> list[str]:
    """Arguments for the flags set in the environment and not in ``argv`` (to put after
    the verb)."""
    environ = os.environ if environ is None else environ
    given = {a.split("=", 1)[0] for a in argv if a.startswith("-")}
    taken = set(given)  # a flag typed also silences the variables of its exclusive group
    for group in parser._mutually_exclusive_groups:
        flags = {f for a in group._group_actions for f in a.option_strings}
        if flags & given:
            taken |= flags
    out: list[str] = []
    for action in env_actions(parser):
        name = env_name(action)
        value = environ.get(name)
        if value is None or value == "" or taken & set(action.option_strings):
            continue
        if action.nargs == 0:
            out += _switch(action, name, value)
            continue
        if action.type is not None:
            try:
                action.type(value)
            except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
                raise ConfigError(f"{name}={value!r} is not a valid {action.option_strings[-1]}"
                                  f": {exc}") from None
        if action.choices is not None and value not in action.choices:
            raise ConfigError(f"{name}={value!r}: expected one of "
                              f"{', '.join(map(str, action.choices))}")
        out += [action.option_strings[-1], value]
    return out


def with_environment(verbs: argparse._SubParsersAction, argv: list[str],
                     environ: Mapping[str, str] | None = None) -> list[str]:
    """``argv`` with the variables of its verb's flags added after the verb (for the verbs
    of :data:`ENV_VERBS`); other verbs are left as they are."""
    if not argv or argv[0] not in ENV_VERBS:
        return argv
    return [argv[0], *from_environment(verbs.choices[argv[0]], argv[1:], environ), *argv[1:]]
