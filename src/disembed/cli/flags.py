"""How every verb's parser behaves: help with defaults and an example, plain text, strict flags.

* :class:`VerbParser` is the parser class of every verb (and of ``data``'s actions): its
  help shows each flag's default, its description is plain text (the module docstrings'
  reStructuredText markup removed), and an unknown flag is answered with the verb's own
  usage and the closest flag it has, not the top-level usage.
* :func:`examples` is a verb's epilog: its help ends with commands that parse (a test runs
  each through the parser).
* :func:`add_deprecated` keeps an old flag name working (hidden from help) and records it,
  so :func:`warn_deprecated` can say which name replaces it once logging is set up.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import re
from typing import Any, Sequence

logger = logging.getLogger(__name__)

#: every old flag name still accepted, by verb: {verb: {old: new}}
DEPRECATED: dict[str, dict[str, str]] = {}
_RECORD = "deprecated_flags"


def plain(doc: str | None) -> str | None:
    """A module docstring as help text: ``x`` and :role:`~a.b.x` become 'x', ``::`` a colon."""
    if not doc:
        return doc
    text = re.sub(r":[a-z]+:`~?(?:[\w.]*\.)?([^`<>]+?)`", r"'\1'", doc)
    text = re.sub(r"``([^`]+)``", r"'\1'", text)
    return re.sub(r"(\S)::\n", r"\1:\n", text).replace(" ::\n", "\n")


class DefaultsFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; every flag that takes a value shows its default
    (unless its help already says it; a ``None`` default must be described in the help)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS) or not (
                action.option_strings and action.nargs != 0):
            return text
        value = action.default
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        return f"{text} (default: {value})".replace("%", "%%")


class VerbParser(argparse.ArgumentParser):
    """The parser of one verb (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = DefaultsFormatter  # raw description, defaults shown
        kwargs["description"] = plain(kwargs.get("description"))
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:  # a verb takes no more than it declares: say so with its own usage
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._closest(extras)}")
        return namespace, extras

    def _closest(self, extras: Sequence[str]) -> str:
        flags = [f for f in self._option_string_actions if f.startswith("--")]
        for extra in extras:
            if extra.startswith("-"):
                match = difflib.get_close_matches(extra.split("=", 1)[0], flags, n=1)
                if match:
                    return f" (did you mean {match[0]}?)"
        return ""


def examples(*commands: str) -> str:
    """A verb's epilog: the commands, one a line, under ``example:``."""
    return "example:\n" + "\n".join(f"  {c}" for c in commands)


class _Deprecated(argparse.Action):
    """Stores like the flag it stands for and records ``(old, new)`` on the namespace."""

    def __init__(self, option_strings, dest, new: str, inner: str = "store", **kwargs):
        self.new, self.inner = new, inner
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.inner == "extend":
            before = getattr(namespace, self.dest, None)
            if before is None or before is parser.get_default(self.dest):
                before = []  # the default is replaced, not extended
            values = [*before, *values]
        setattr(namespace, self.dest, values)
        recorded = getattr(namespace, _RECORD, None) or []
        setattr(namespace, _RECORD, [*recorded, (option_string, self.new)])


def add_deprecated(parser: argparse.ArgumentParser, verb: str, old: str, new: str, *,
                   dest: str, type=None, extend: bool = False) -> None:
    """Accept ``old`` as a hidden alias of ``new`` (same ``dest``), recorded for a warning."""
    DEPRECATED.setdefault(verb, {})[old] = new
    parser.add_argument(old, dest=dest, type=type, action=_Deprecated, new=new,
                        inner="extend" if extend else "store", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def warn_deprecated(args: argparse.Namespace) -> None:
    for old, new in getattr(args, _RECORD, None) or []:
        logger.warning("%s is deprecated and will be removed; use %s", old, new)


class ExtendCsv(argparse.Action):
    """A flag given several times and/or with comma-separated values: one flat list
    (``--encoder a --encoder b,c`` -> ``[a, b, c]``); the default is not extended."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        before = [] if before is None or before is self.default else list(before)
        setattr(namespace, self.dest, [*before, *values])
