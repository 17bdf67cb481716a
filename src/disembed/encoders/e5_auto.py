"""``e5-small``: the fastest backend of the bundled weights that passes the parity bar here.

The candidates and what was measured (docs/fast_encoder.md, docs/benchmarks.md):

=====================  ==============================  =================================
backend                AVX512-BF16 / AMX cores          AVX2-only cores
=====================  ==============================  =================================
C engine (reference)   82-106 sentences/s               47.8 (2 threads), 29.9 (1)
torch float32          135-137 (1.3-1.6x C)             82.0 (1.7x), 46.0 (1.5x)
torch bfloat16         389-441 (3.7-5.4x C)             ~1/4 of float32 (emulated)
=====================  ==============================  =================================

Parity bar (against the C engine): median cosine >= 0.9999, minimum >= 0.9998 (asserted
by the default tests) and downstream scores within 0.005. float32 gives median 0.99992,
bfloat16 0.9999 (both measured on 2,000 sentences in 16 languages); downstream
differences 0.0002-0.0005 (float32).

So the choice is made by the hardware probe: torch bfloat16 where bfloat16 products
measure faster than float32 (:attr:`~disembed.hardware.Capabilities.bf16_faster`),
torch float32 elsewhere (faster than the C engine on both kinds of CPU measured).
The chosen backend and dtype are part of the encoder identity, so embedding caches
never mix backends; ``e5-small-c`` and ``e5-small-torch`` stay explicit choices.
"""

from __future__ import annotations

import logging
from typing import Any

from ..hardware import Capabilities, probe
from .e5_torch import E5TorchEncoder

logger = logging.getLogger(__name__)


def fastest_dtype(caps: Capabilities | None = None) -> str:
    """``"bfloat16"`` where the probe measures bfloat16 faster than float32, else ``"float32"``."""
    caps = caps or probe()
    return "bfloat16" if caps.bf16_faster else "float32"


def load_fastest_e5(caps: Capabilities | None = None, **options: Any) -> E5TorchEncoder:
    """The ``e5-small`` encoder for this machine; an explicit ``dtype`` option wins. Which
    precision it runs in is logged; a model trained on it records that precision and is
    always opened in it (:mod:`disembed.saved_model`), whatever the probe says later."""
    asked = options.pop("dtype", None)
    dtype = asked or fastest_dtype(caps)
    logger.info("e5-small: torch %s backend (%s; a model trained on it records this "
                "precision and is always opened in it)", dtype,
                "asked for" if asked else "chosen by the hardware probe")
    return E5TorchEncoder(dtype=dtype, **options)
