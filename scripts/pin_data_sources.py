"""Write src/disembed/data/catalog.json: every downloadable data file, its sources and pins.

Needs a git clone of each pinned repository (the commits below must be in it):

    python scripts/pin_data_sources.py --mirrors DIR [--compare ../shared/data]

``DIR/<owner>+<name>/repo`` (or ``DIR/<owner>+<name>``) is a clone of github.com/<owner>/<name>.
Each source's SHA-256 and size are computed from the git object at the pinned commit
(the exact bytes raw.githubusercontent.com serves for that commit and path). Each output
file is built from those bytes with disembed.data.builders, and its SHA-256 is pinned
too. With ``--compare`` every output is compared with the file of the same path in an
existing data directory and the script fails unless all are byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from disembed.data.builders import build, refs_of

RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
LASER = ("facebookresearch/LASER", "74bc6ae7ffb7cba670fe0f428d0ede9f666fb821")
STS_EVAL = ("eduardofv/sts_eval", "b4cd273eb2c6cc0de34ebeffebd12ebf155ecff6")
MSE_AMR = ("jcyk/MSE-AMR", "a6e7396af98ffd2faef21c691140ded26a811696")
MLQE_PE = ("sheffieldnlp/mlqe-pe", "2a670a1140416cf80507b5a829659383c878feb8")
MULTI30K = ("multi30k/dataset", "a3d2e0d26b56f3846f66a952536ffed4e401d05a")
FLORES = ("facebookresearch/flores", "3f26fb0757fdb89f98dfdfe6d2fc07a40fcb8592")
QE_PAIRS = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "ru-en", "si-en")
QE21_ZERO_SHOT = ("en-cs", "en-ja", "km-en", "ps-en")
BUCC_LANGS = ("de", "fr", "zh")


class Mirrors:
    def __init__(self, root: Path) -> None:
        self.root = root

    def git_dir(self, repo: str) -> Path:
        base = self.root / repo.replace("/", "+")
        return base / "repo" if (base / "repo").exists() else base

    def git(self, repo: str, *args: str) -> bytes:
        return subprocess.run(["git", "-C", str(self.git_dir(repo)), *args],
                              capture_output=True, check=True).stdout

    def ls(self, repo: str, commit: str, folder: str) -> list[str]:
        return self.git(repo, "ls-tree", "-r", "--name-only", commit, folder).decode().split()

    def blob(self, repo: str, commit: str, path: str) -> bytes:
        return self.git(repo, "cat-file", "blob", f"{commit}:{path}")


class SetBuilder:
    """Collects one set's sources and outputs."""

    def __init__(self, mirrors: Mirrors, name: str, **info: str) -> None:
        self.mirrors, self.name, self.info = mirrors, name, info
        self.sources: dict[str, dict] = {}
        self.blobs: dict[str, bytes] = {}
        self.files: dict[str, dict] = {}
        self.built: dict[str, bytes] = {}

    def source(self, where: tuple[str, str], path: str) -> str:
        repo, commit = where
        sid = path.rsplit("/", 1)[-1]
        if sid in self.sources and self.sources[sid]["path"] != path:
            sid = path.replace("/", "_")
        data = self.mirrors.blob(repo, commit, path)
        self.blobs[sid] = data
        self.sources[sid] = {"url": RAW.format(repo=repo, commit=commit, path=path),
                             "repo": repo, "commit": commit, "path": path,
                             "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                             "pin": "upstream"}
        return sid

    def output(self, path: str, spec: dict) -> None:
        self.files[path] = {"build": spec}

    def finish(self, workdir: Path) -> dict:
        for sid, data in self.blobs.items():
            (workdir / sid).write_bytes(data)
        paths = {sid: workdir / sid for sid in self.blobs}
        for path, entry in self.files.items():
            missing = refs_of(entry["build"]) - set(paths)
            if missing:
                raise SystemExit(f"{self.name}/{path}: unknown sources {missing}")
            data = build(entry["build"], paths)
            entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
            self.built[path] = data
        return {**self.info, "sources": self.sources, "files": self.files}


def tatoeba(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "tatoeba", folder="tatoeba", licence="CC-BY 2.0 FR (Tatoeba)",
                   description="Tatoeba retrieval test, LASER v1: 112 languages x English",
                   reference="facebookresearch/LASER @ 74bc6ae, data/tatoeba/v1")
    for path in m.ls(*LASER, "data/tatoeba/v1/"):
        name = path.rsplit("/", 1)[-1]
        target = "README.LASER.md" if name == "README.md" else name
        s.output(f"tatoeba/{target}", {"kind": "copy", "source": s.source(LASER, path)})
    return s


STS_TRACKS = {"ar-ar": "track1.ar-ar", "en-ar": "track2.ar-en", "es-es": "track3.es-es",
              "es-en": "track4a.es-en", "en-es_wmt": "track4b.es-en", "en-en": "track5.en-en",
              "en-tr": "track6.tr-en"}
STS_EXTENDED = {"en-de": "de-en", "fr-en": "fr-en", "it-en": "it-en", "nl-en": "nl-en"}


def sts17(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "sts17", folder="sts17", licence="CC-BY-SA 4.0",
                   description="SemEval-2017 STS task 1 test + the extended cross-lingual files",
                   reference="eduardofv/sts_eval @ b4cd273 (official zips); "
                             "jcyk/MSE-AMR @ a6e7396 (extended)")
    inputs = s.source(STS_EVAL, "data/sources/Sts2017.eval.v1.1.zip")
    gold = s.source(STS_EVAL, "data/sources/Sts2017.gs.zip")
    for name, track in STS_TRACKS.items():
        s.output(f"sts17/{name}.tsv", {
            "kind": "sts",
            "input": {"source": inputs, "member": f"STS2017.eval.v1.1/STS.input.{track}.txt"},
            "gold": {"source": gold, "member": f"STS2017.gs/STS.gs.{track}.txt"}})
    for name, pair in STS_EXTENDED.items():
        sid = s.source(MSE_AMR, f"STS/STS17-test/STS.input.extended.{pair}.txt")
        s.output(f"sts17/{name}.tsv", {"kind": "sts", "input": {"source": sid}, "gold": None})
    s.output("sts17/LICENSE.STS2017.txt",
             {"kind": "copy", "source": s.source(MSE_AMR, "STS/STS17-test/LICENSE.txt")})
    s.output("sts17/Readme_extended.txt",
             {"kind": "copy", "source": s.source(MSE_AMR, "STS/STS17-test/Readme_extended.txt")})
    return s


def _qe_common(s: SetBuilder) -> None:
    s.output("wmt20_mlqe/LICENSE.CC0", {"kind": "copy", "source": s.source(MLQE_PE, "LICENSE")})
    s.output("wmt20_mlqe/README-data.md", {"kind": "copy", "source": s.source(
        MLQE_PE, "data/direct-assessments/README-data.md")})


def wmt20_qe(m: Mirrors, splits: tuple[str, ...], name: str) -> SetBuilder:
    s = SetBuilder(m, name, folder="wmt20_mlqe", licence="CC0",
                   description=f"WMT20 QE task 1 (direct assessment), {'+'.join(splits)}",
                   reference="sheffieldnlp/mlqe-pe @ 2a670a1 (the test archives are "
                             "byte-identical to facebookresearch/mlqe @ 49510b1's)")
    for split in splits:
        for lp in QE_PAIRS:
            sid = s.source(MLQE_PE, f"data/direct-assessments/{split}/{lp}-{split}.tar.gz")
            folder = lp if split == "test" else f"{lp}-{split}"
            tag = "test20" if split == "test" else split
            member = f"{folder}/{tag}.{lp.replace('-', '')}.df.short.tsv"
            s.output(f"wmt20_mlqe/{split}/{lp}.tsv",
                     {"kind": "member", "source": sid, "member": member})
    _qe_common(s)
    return s


def wmt21_qe(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "wmt21-qe", folder="wmt20_mlqe/test21", licence="CC0",
                   description="WMT21 QE test (DA) with gold z_mean, incl. zero-shot pairs",
                   reference="sheffieldnlp/mlqe-pe @ 2a670a1, data/test21 + test21_goldlabels")
    for lp in QE_PAIRS + QE21_ZERO_SHOT:
        sub = "zero-shot/" if lp in QE21_ZERO_SHOT else ""
        text = s.source(MLQE_PE, f"data/test21/{sub}{lp}-test21.tar.gz")
        gold = s.source(MLQE_PE, f"data/test21_goldlabels/{sub}{lp}-test21.tar.gz")
        d = f"{lp}-test21"
        s.output(f"wmt20_mlqe/test21/{lp}.tsv", {
            "kind": "columns", "index": True, "header": ["index", "original", "translation",
                                                         "z_mean"],
            "columns": [{"source": text, "member": f"{d}/test21.src"},
                        {"source": text, "member": f"{d}/test21.mt"},
                        {"source": gold, "member": f"{d}/goldlabels/test21.da"}]})
    return s


def bucc(m: Mirrors) -> tuple[SetBuilder, SetBuilder]:
    pools = SetBuilder(m, "bucc2018", folder="bucc2018", licence="BUCC terms (research)",
                       description="BUCC 2018 sample split: de/fr/zh-en sentence pools + gold",
                       reference="jcyk/MSE-AMR @ a6e7396, bucc/downloaded")
    gold = SetBuilder(m, "parallel-bucc-gold", folder="parallel/bucc2018_sample_gold",
                      licence="BUCC terms (research)",
                      description="the BUCC sample gold pairs as text (never train on them "
                                  "when evaluating mining on bucc2018)",
                      reference="built from jcyk/MSE-AMR @ a6e7396, bucc/downloaded")
    for lang in BUCC_LANGS:
        path = f"bucc/downloaded/bucc2018-{lang}-en.sample-gold.tar.bz2"
        a, b = pools.source(MSE_AMR, path), gold.source(MSE_AMR, path)
        for ext in (lang, "en", "gold"):
            member = f"bucc2018/{lang}-en/{lang}-en.sample.{ext}"
            pools.output(member, {"kind": "member", "source": a, "member": member})
        ref = f"bucc2018/{lang}-en/{lang}-en.sample."
        gold.output(f"parallel/bucc2018_sample_gold/{lang}-en.tsv", {
            "kind": "bucc-gold", "header": [f"{lang}_id", "en_id", lang, "en"],
            "gold": {"source": b, "member": ref + "gold"},
            "src": {"source": b, "member": ref + lang}, "tgt": {"source": b, "member": ref + "en"}})
    return pools, gold


MULTI30K_SPLITS = {"train": "en de fr cs", "val": "en de fr cs",
                   "test_2016_flickr": "en de fr cs", "test_2017_flickr": "en de fr",
                   "test_2017_mscoco": "en de fr", "test_2018_flickr": "en de fr cs"}


def multi30k(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "parallel-multi30k", folder="parallel/multi30k",
                   licence="see multi30k/dataset (Flickr30k terms)",
                   description="Multi30k image captions, multi-way en/de/fr(/cs)",
                   reference="multi30k/dataset @ a3d2e0d, data/task1/raw")
    for split, langs in MULTI30K_SPLITS.items():
        cols = [{"source": s.source(MULTI30K, f"data/task1/raw/{split}.{lang}.gz"),
                 "gunzip": True} for lang in langs.split()]
        s.output(f"parallel/multi30k/{split}.tsv",
                 {"kind": "columns", "header": langs.split(), "columns": cols})
    return s


def flores(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "parallel-flores-v1", folder="parallel/flores_v1", licence="CC-BY-SA 4.0",
                   description="FLoRes v1 ne-en and si-en (Wikipedia) dev/devtest/test",
                   reference="facebookresearch/flores @ 3f26fb0, previous_releases/floresv1")
    sid = s.source(FLORES, "previous_releases/floresv1/data/wikipedia_en_ne_si_test_sets.tgz")
    base = "wikipedia_en_ne_si_test_sets/wikipedia"
    for lang in ("ne", "si"):
        for split in ("dev", "devtest", "test"):
            cols = [{"source": sid, "member": f"{base}.{split}.{lang}-en.{ext}"}
                    for ext in ("doc_id", lang, "en")]
            s.output(f"parallel/flores_v1/{lang}-en.{split}.tsv",
                     {"kind": "columns", "header": ["doc_id", lang, "en"], "columns": cols})
    s.output("parallel/flores_v1/LICENSE_CC-BY-SA",
             {"kind": "copy", "source": s.source(FLORES, "LICENSE_CC-BY-SA")})
    return s


def mlqe_postedits(m: Mirrors) -> SetBuilder:
    s = SetBuilder(m, "parallel-mlqe-pe", folder="parallel/mlqe_pe_postedits", licence="CC0",
                   description="MLQE-PE sources with human post-edited MT (tokenised text)",
                   reference="sheffieldnlp/mlqe-pe @ 2a670a1, data/post-editing")
    for lp in QE_PAIRS:
        src, tgt = lp.split("-")
        for split in ("train", "dev"):
            sid = s.source(MLQE_PE, f"data/post-editing/{split}/{lp}-{split}.tar.gz")
            cols = [{"source": sid, "member": f"{lp}-{split}/{split}.{ext}"}
                    for ext in ("src", "pe")]
            s.output(f"parallel/mlqe_pe_postedits/{lp}.{split}.tsv",
                     {"kind": "columns", "header": [src, f"{tgt}_postedit"], "columns": cols})
    s.output("parallel/mlqe_pe_postedits/LICENSE.CC0",
             {"kind": "copy", "source": s.source(MLQE_PE, "LICENSE")})
    return s


MANUAL = {
    "parallel-wmt-newstest": {
        "folder": "parallel/wmt_newstest",
        "description": "WMT news test sets 2008-2021 (en-de fr es it tr zh ro et)",
        "why": "converted from the statmt.org SGML/text releases; no pinned public file "
               "reproduces this TSV byte for byte yet",
        "how": "build en-<xx>.tsv (columns testset, en, <xx>) from sacrebleu's test sets, or "
               "copy parallel/wmt_newstest from an existing data directory"},
    "parallel-tatoeba-challenge": {
        "folder": "parallel/tatoeba_challenge_v2021-08-07",
        "description": "Tatoeba Challenge v2021-08-07 en-<xxx> pairs with LASER-overlap flags",
        "why": "converted from the Tatoeba Challenge release archives (object.pouta.csc.fi), "
               "too large to pin here and flagged against the LASER test by a script",
        "how": "copy parallel/tatoeba_challenge_v2021-08-07 from an existing data directory"},
    "parallel-tico19": {
        "folder": "parallel/tico19_test",
        "description": "TICO-19 test en-ne and en-ar (COVID domain)",
        "why": "tico19-testset.zip could not be pinned from a local copy",
        "how": "convert data/tico19-testset.zip of tico-19/tico-19.github.io to en-<xx>.tsv, or "
               "copy parallel/tico19_test from an existing data directory"},
    "muse-dictionaries": {
        "folder": "muse_dictionaries",
        "description": "MUSE bilingual dictionaries en-<xx>.tsv (code-switching analysis)",
        "why": "converted from coezbek/hunalign-dict-muse; conversion not pinned yet",
        "how": "copy muse_dictionaries from an existing data directory"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirrors", required=True, type=Path)
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[1] / "src/disembed/data/catalog.json")
    args = ap.parse_args()
    m = Mirrors(args.mirrors)
    builders = [tatoeba(m), sts17(m), wmt20_qe(m, ("test",), "wmt20-qe"),
                wmt20_qe(m, ("train", "dev"), "wmt20-qe-traindev"), wmt21_qe(m), *bucc(m),
                multi30k(m), flores(m), mlqe_postedits(m)]
    sets, failures = {}, 0
    for b in builders:
        with tempfile.TemporaryDirectory() as tmp:
            sets[b.name] = b.finish(Path(tmp))
        for path, data in b.built.items():
            if args.compare is None:
                continue
            ref = args.compare / path
            same = ref.is_file() and ref.read_bytes() == data
            failures += not same
            print(f"{'identical' if same else 'DIFFERENT'}  {path}")
        print(f"{b.name}: {len(b.sources)} sources, {len(b.files)} files")
    catalog = {"format_version": 1, "generated_by": "scripts/pin_data_sources.py",
               "sets": sets, "manual": MANUAL}
    args.out.write_text(json.dumps(catalog, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}; {failures} outputs differ from {args.compare}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
