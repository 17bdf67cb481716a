"""libgomp's spin for disembed's command line: an idle OpenMP thread spins 10,000 rounds, not
300,000. ``import disembed`` from your own Python changes no environment variable; only the
command line (``disembed ...``, ``python -m disembed``) sets ``GOMP_SPINCOUNT``.

torch's OpenMP runtime on Linux (libgomp) reads ``GOMP_SPINCOUNT`` once, when torch loads it.
By default a team's thread spins about 300,000 rounds (~5 ms on a 2-core AMD EPYC) after
every parallel region before it sleeps. Inside one forward pass the gaps between ops are
microseconds, which 10,000 rounds cover: e5-small encoding batches of 8 on 2 threads took 3.29
ms a sentence with 10,000 and 3.40 with the default. Where other work follows a call, as a
service's event loop answers the requests of every batch, the default spin keeps a core
busy for nothing: at 8 clients x 1 text on 2 cores the service answered ~200 sentences/s with
10,000 against ~150-170 with the default (docs/ecosystem.md, issue 35).

Where it happens: torch loads while ``disembed/__init__`` runs, before the command line's
``main`` could set anything, so ``disembed/__init__`` calls :func:`spin_for_the_command_line`
first; it acts only in a process started as disembed's command line (:func:`is_command_line`,
from ``sys.orig_argv``), and never when torch is already loaded (too late to matter) or
``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is set (yours wins). A library user who wants the
short spin sets ``GOMP_SPINCOUNT=10000`` before starting Python. ``APPLIED`` says whether
it set the spin.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

#: spin rounds of an idle libgomp thread before it sleeps
SPIN_COUNT = "10000"
#: the modules ``python -m`` runs as disembed's command line
COMMAND_MODULES = ("disembed", "disembed.cli")

APPLIED = False


def is_command_line(argv: Sequence[str]) -> bool:
    """Whether a process started with ``argv`` (``sys.orig_argv``: the interpreter's own
    arguments) is disembed's command line: the ``disembed`` script, or ``python -m
    disembed`` / ``python -m disembed.cli``."""
    args = list(argv)
    if "-m" in args[:-1]:
        return args[args.index("-m") + 1] in COMMAND_MODULES
    scripts = [a for a in args[1:] if not a.startswith("-")]
    return bool(scripts) and os.path.basename(scripts[0]) == "disembed"


def spin_for_the_command_line() -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` in disembed's command line process, before
    torch loads (see the module docstring); returns whether it did."""
    global APPLIED
    APPLIED = (is_command_line(getattr(sys, "orig_argv", sys.argv))
               and "torch" not in sys.modules and not os.environ.get("GOMP_SPINCOUNT")
               and not os.environ.get("OMP_WAIT_POLICY"))
    if APPLIED:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return APPLIED
