"""libgomp's spin, set before torch loads: an idle OpenMP thread spins 10,000 rounds, not 300,000.

torch's OpenMP runtime on Linux (libgomp) reads ``GOMP_SPINCOUNT`` once, when torch loads it.
By default a team's thread spins about 300,000 rounds (~5 ms on a 2-core AMD EPYC) after
every parallel region before it sleeps. Inside one forward pass the gaps between ops are
microseconds, which 10,000 rounds cover: e5-small encoding batches of 8 on 2 threads took 3.29
ms a sentence with 10,000 and 3.40 with the default. Where other work follows a call, as a
service's event loop answers the requests of every batch, the default spin keeps a core
busy for nothing: at 8 clients x 1 text on 2 cores the service answered ~200 sentences/s with
10,000 against ~150-170 with the default (docs/ecosystem.md, issue 35).

``disembed/__init__`` imports this module before anything that loads torch. It sets nothing
when torch is already loaded (too late to matter) or when ``GOMP_SPINCOUNT`` or
``OMP_WAIT_POLICY`` is set (yours wins). ``APPLIED`` says whether it set the spin.
"""

from __future__ import annotations

import os
import sys

#: spin rounds of an idle libgomp thread before it sleeps
SPIN_COUNT = "10000"

APPLIED = ("torch" not in sys.modules and not os.environ.get("GOMP_SPINCOUNT")
           and not os.environ.get("OMP_WAIT_POLICY"))
if APPLIED:
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
