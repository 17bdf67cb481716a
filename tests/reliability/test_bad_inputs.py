"""Every bad input we know of, as a table: the command, its exit code, what the user reads.

Each row runs ``disembed.cli.main`` in-process on the hash encoder and tiny files (see
``conftest.py``). A user error must exit 2 with one line ``disembed VERB: error: ...``
that names the problem, and never print a traceback. docs/reliability.md lists the same
cases with the user-visible behaviour.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from world import run_cli

from disembed.util.locks import LOCK_NAME

ENC = "encode {a} --out {out}/e.npy --encoder hash:8"
MINE = "mine {s} {t} --out {out}/m.tsv --encoder hash:8"
SCORE = "score {st} --out {out}/sc.tsv --encoder hash:8"
SEARCH = "search {s} {t} --out {out}/q.tsv --encoder hash:8"
TRAIN = ("train --method mean-centering --pairs {pairs} --src-col de --tgt-col en "
         "--out {out}/model --encoder hash:8")
TRAIN_LANGS = "train --method seed --languages de --out {out}/model --encoder hash:8"
EVAL = "evaluate --encoder hash:8 --tasks sts17"
BENCH = ("bench --encoder hash:8 --methods baseline --tasks sts17 --languages de "
         "--pairs-per-language 20 --no-floor --out {out}/bench")
ANALYSE = ("analyse --methods baseline --encoder hash:8 --tasks sts17 --analyses significance "
           "--out {out}/an")
SERVE = "serve --encoder hash:8 --no-cache"
VERBS = {"encode": ENC, "mine": MINE, "score": SCORE, "search": SEARCH, "train": TRAIN,
         "evaluate": EVAL, "bench": BENCH, "analyse": ANALYSE}
ENCODING_VERBS = ("encode", "mine", "score", "search", "train", "evaluate")


def _per_verb(verbs, change, fragment, code=2):
    """One row per verb: ``change(template) -> template``."""
    return [(f"{verb}:{fragment[:24]}", change(VERBS[verb]), code, fragment) for verb in verbs]


ROWS = [
    # 1. batch sizes < 1 (they returned uninitialised memory that was cached for good)
    *_per_verb(ENCODING_VERBS, lambda t: t + " --batch-size 0",
               "argument --batch-size: expected a positive integer"),
    *_per_verb(ENCODING_VERBS, lambda t: t + " --batch-size -1",
               "argument --batch-size: expected a positive integer, got '-1'"),
    # 3. the .txt sidecar of encode never overwrites an input or the matrix
    ("encode-sidecar-is-input", "encode {words} --out {wordsnpy} --encoder hash:8", 2,
     "which is the input file"),
    ("encode-out-txt", "encode {a} --out {out}/vec.txt --encoder hash:8", 2,
     "expected a path ending in .npy"),
    ("encode-out-is-input", "encode {a} --out {a} --encoder hash:8", 2, "ending in .npy"),
    ("mine-out-is-input", "mine {s} {t} --out {s} --encoder hash:8", 2, "destroy the input"),
    ("score-out-is-input", "score {st} --out {st} --encoder hash:8", 2, "destroy the input"),
    ("score-out-is-pool", "score {st} --out {a} --src-pool {a} --encoder hash:8", 2,
     "is the input --src-pool"),
    ("search-out-is-input", "search {s} {t} --out {t} --encoder hash:8", 2,
     "is the input DATABASE"),
    # 4. train accepts no nonsense
    ("train-pairs-per-language-0", TRAIN_LANGS + " --pairs-per-language 0", 2,
     "pairs per language >= 20"),
    ("train-pairs-per-language-neg", TRAIN_LANGS + " --pairs-per-language -5", 2,
     "pairs per language >= 20"),
    ("train-lr-inf", TRAIN_LANGS + " --lr inf", 2, "argument --lr: expected a finite number"),
    ("train-lr-nan", TRAIN_LANGS + " --lr nan", 2, "argument --lr: expected a finite number"),
    ("train-lr-zero", TRAIN_LANGS + " --lr 0", 2, "argument --lr: expected a number > 0"),
    ("train-lr-negative", TRAIN_LANGS + " --lr -1", 2, "expected a number > 0"),
    ("train-same-columns", "train --method seed --pairs {pairs} --src-col de --tgt-col de "
     "--out {out}/m --encoder hash:8", 2, "both 'de'"),
    ("train-columns-without-pairs", TRAIN_LANGS + " --src-col de", 2, "give --pairs too"),
    ("train-batch-1", TRAIN_LANGS + " --train-batch-size 1", 2,
     "batch_size must be an integer in [2, inf)"),
    ("train-max-epochs-0", TRAIN_LANGS + " --max-epochs 0", 2, "expected a positive integer"),
    ("train-unknown-method", "train --method sed --languages de --out {out}/m", 2,
     "Did you mean 'seed'"),
    ("train-unknown-language", "train --languages xx --out {out}/m --encoder hash:8", 2,
     "Unknown language code 'xx'"),
    ("train-columns-not-languages", "train --method seed --pairs {st} --src-col src --tgt-col "
     "tgt --out {out}/m --encoder hash:8", 2, "defaults to the column name, 'src'"),
    *_per_verb(ENCODING_VERBS, lambda t: t + " --pooling cls",
               "--pooling only apply to st: encoders"),
    # 5. missing files and bad --out paths: exit 2 before any work, not a traceback
    ("encode-missing-input", "encode {missing} --out {out}/e.npy --encoder hash:8", 2,
     "argument input: "),
    ("mine-missing-src", "mine {missing} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "no such file"),
    ("mine-missing-tgt", "mine {s} {missing} --out {out}/m.tsv --encoder hash:8", 2,
     "no such file"),
    ("score-missing-pairs", "score {missing} --out {out}/sc.tsv --encoder hash:8", 2,
     "no such file"),
    ("score-missing-src-pool", SCORE + " --score ratio --src-pool {missing}", 2,
     "argument --src-pool"),
    ("score-missing-tgt-pool", SCORE + " --score ratio --tgt-pool {missing}", 2,
     "argument --tgt-pool"),
    ("search-missing-queries", "search {missing} {t} --out {out}/q.tsv --encoder hash:8", 2,
     "no such file"),
    ("search-missing-database", "search {s} {missing} --out {out}/q.tsv --encoder hash:8", 2,
     "no such file"),
    ("train-missing-pairs", "train --pairs {missing} --src-col de --tgt-col en --out {out}/m",
     2, "no such file"),
    ("train-pairs-is-dir", "train --pairs {adir} --src-col de --tgt-col en --out {out}/m", 2,
     "is a directory"),
    ("analyse-missing-bench", "analyse --bench {nodir} --out {out}/an", 2, "no such directory"),
    ("analyse-missing-model", "analyse --model {nodir} --out {out}/an", 2, "no such directory"),
    ("evaluate-missing-model", "evaluate --model {nodir}", 2, "no such directory"),
    ("evaluate-model-not-a-model", "evaluate --model {adir}", 2, "is not a saved disentangler"),
    ("mine-missing-model", MINE + " --model {nodir}", 2, "no such directory"),
    ("encode-out-is-dir", "encode {a} --out {adir} --encoder hash:8", 2, "ending in .npy"),
    ("score-out-is-dir", "score {st} --out {adir} --encoder hash:8", 2, "is a directory"),
    ("mine-out-is-dir", "mine {s} {t} --out {adir} --encoder hash:8", 2, "is a directory"),
    ("search-out-is-dir", "search {s} {t} --out {adir} --encoder hash:8", 2, "is a directory"),
    ("evaluate-out-is-dir", EVAL + " --out {adir}", 2, "is a directory"),
    ("train-out-is-file", "train --method seed --languages de --out {afile}", 2, "is a file"),
    ("bench-out-is-file", "bench --encoder hash:8 --out {afile}", 2, "is a file"),
    ("analyse-out-is-file", "analyse --encoder hash:8 --out {afile}", 2, "is a file"),
    ("mine-run-dir-is-file", MINE + " --run-dir {afile}", 2, "is a file"),
    ("encode-out-under-file", "encode {a} --out {afile}/x.npy --encoder hash:8", 2,
     "is a file, not a directory"),
    ("score-out-under-file", "score {st} --out {afile}/x.tsv --encoder hash:8", 2,
     "is a file, not a directory"),
    ("train-out-under-file", "train --languages de --out {afile}/m --encoder hash:8", 2,
     "is a file, not a directory"),
    *_per_verb(VERBS, lambda t: t + " --cache-dir {afile}", "argument --cache-dir: "),
    # bad encoder specs, in every verb that takes one
    *_per_verb(ENCODING_VERBS + ("analyse",), lambda t: t.replace("hash:8", "hash:abc"),
               "hash:abc: the part after 'hash:' is the dimension"),
    *_per_verb(ENCODING_VERBS, lambda t: t.replace("hash:8", "hash:-5"),
               "hash:-5: the part after 'hash:' is the dimension"),
    *_per_verb(ENCODING_VERBS, lambda t: t.replace("hash:8", "hash:0"),
               "dim must be a positive integer"),
    *_per_verb(("encode", "evaluate"), lambda t: t.replace("hash:8", "st:/nonexistent/model"),
               "st:/nonexistent/model: no such model folder"),
    ("encode-st-empty", ENC.replace("hash:8", "st:"), 2, "st: needs a model name"),
    ("encode-npy-empty", ENC.replace("hash:8", "npy:"), 2, "npy: needs a matrix path"),
    ("encode-npy-garbage", ENC.replace("hash:8", "npy:{garbage}"), 2, "is not a .npy file"),
    ("encode-npy-text", ENC.replace("hash:8", "npy:{a}"), 2, "is not a .npy file"),
    ("encode-npy-objects", ENC.replace("hash:8", "npy:{objects}"), 2,
     "is not a readable .npy matrix (Array can't be memory-mapped: Python objects"),
    ("encode-npy-3d", ENC.replace("hash:8", "npy:{cube}"), 2, "expected a 2-D (n, d) matrix"),
    ("encode-npy-misaligned", ENC.replace("hash:8", "npy:{short}"), 2, "must be line-aligned"),
    ("encode-npy-missing", ENC.replace("hash:8", "npy:{missing}"), 2, "does not exist"),
    ("encode-unknown-encoder", ENC.replace("hash:8", "e5-smal"), 2, "Did you mean 'e5-small'"),
    # 6. silent wrong results are now errors
    ("evaluate-flipped-model", "evaluate --model {flipped} --tasks sts17", 2,
     "does not match the checksum in config.json"),
    ("mine-flipped-model", "mine {s} {t} --out {out}/m.tsv --model {flipped} --src-lang de "
     "--tgt-lang en", 2, "does not match the checksum"),
    ("analyse-flipped-model", "analyse --model {flipped} --analyses significance --out {out}/an",
     2,
     "does not match the checksum"),
    ("mine-threshold-nan", MINE + " --threshold nan", 2, "argument --threshold: expected a "
     "finite number"),
    ("mine-threshold-inf", MINE + " --threshold inf", 2, "expected a finite number"),
    ("score-threshold-nan", SCORE + " --threshold nan", 2, "expected a finite number"),
    ("analyse-truncation-of-models", "analyse --model {model} --analyses truncation --out "
     "{out}/an", 2, "saved models cannot be truncated"),
    ("evaluate-model-other-encoder", "evaluate --model {model} --encoder hash:8 --tasks sts17",
     2, "was trained on encoder hash:16"),
    ("mine-model-other-encoder", "mine {s} {t} --out {out}/m.tsv --model {model} --src-lang de "
     "--tgt-lang en --encoder hash:8", 2, "was trained on encoder hash:16"),
    ("mine-model-bad-language", "mine {s} {t} --out {out}/m.tsv --model {model} --src-lang "
     "xx-nonsense --tgt-lang en", 2, "Unknown language code 'xx-nonsense' (nearest known"),
    ("bench-bad-second-encoder", BENCH.replace("hash:8", "hash:8,nope"), 2,
     "Unknown encoder 'nope'"),
    ("bench-bad-second-dim", BENCH.replace("hash:8", "hash:8,hash:0"), 2,
     "dim must be a positive integer"),
    ("bench-missing-st-model", BENCH.replace("hash:8", "hash:8,st:/nonexistent/model"), 2,
     "no such model folder"),
    ("bench-bad-second-task", BENCH.replace("sts17", "sts17,nope"), 2, "Unknown task 'nope'"),
    ("bench-bad-second-method", BENCH.replace("baseline", "baseline,sed"), 2,
     "Did you mean 'seed'"),
    ("bench-lr-nan", BENCH + " --lr nan", 2, "argument --lr: expected a finite number"),
    ("bench-max-epochs-0", BENCH + " --max-epochs 0", 2, "expected a positive integer"),
    # counts and sizes
    ("mine-k-0", MINE + " -k 0", 2, "argument -k: expected a positive integer"),
    ("mine-k-negative", MINE + " -k -3", 2, "argument -k: expected a positive integer"),
    ("search-k-0", SEARCH + " -k 0", 2, "argument -k: expected a positive integer"),
    ("score-k-0", SCORE + " --score ratio -k 0", 2, "argument -k"),
    ("mine-chunk-0", MINE + " --chunk 0", 2, "argument --chunk"),
    ("mine-top-negative", MINE + " --top -1", 2, "argument --top: expected a positive integer"),
    ("mine-top-0", MINE + " --top 0", 2, "argument --top: expected a positive integer"),
    ("analyse-codeswitch-rate-nan", ANALYSE + " --codeswitch-rate nan", 2,
     "expected a finite number"),
    ("analyse-codeswitch-rate-2", ANALYSE.replace("significance", "codeswitch")
     + " --codeswitch-rate 2", 2, "code-switching rate must be in (0, 1]"),
    # content of the inputs
    ("mine-empty-source", "mine {empty} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "no sentences; the source file"),
    ("search-empty-database", "search {s} {empty} --out {out}/q.tsv --encoder hash:8", 2,
     "no sentences; the database file"),
    ("search-empty-queries", "search {empty} {t} --out {out}/q.tsv --encoder hash:8", 2,
     "no sentences; the queries file"),
    ("score-empty-file", "score {empty} --out {out}/sc.tsv --encoder hash:8", 2,
     "the file is empty; expected one pair per line"),
    ("score-missing-column", SCORE + " --src-col nope", 2, "no column named 'nope' (no header "
     "row: the first row ['src', 'tgt'] does not hold both"),
    ("encode-bad-utf8", "encode {badutf8} --out {out}/e.npy --encoder hash:8", 2,
     "are not valid UTF-8"),
    ("encode-empty-line", "encode {words} --out {out}/w.npy --encoder hash:8", 2,
     "words.txt:2: empty line"),
    ("evaluate-no-data-dir", EVAL + " --data-dir {nodir}", 2, "No data directory found"),
    ("evaluate-unknown-task", EVAL.replace("sts17", "stss17"), 2, "Did you mean 'sts17'"),
    # the verbs of the experiment tooling and the ecosystem
    ("prepare-tier-0", "prepare --encoder hash:8 --tiers 0", 2, "argument --tiers"),
    ("prepare-unknown-task", "prepare --encoder hash:8 --tasks stss17", 2,
     "Did you mean 'sts17'"),
    ("prepare-holdout-all", "prepare --encoder hash:8 --languages de --holdout 100000", 2,
     "too few to hold out 100000"),
    ("tune-grid-not-json", "tune --encoder hash:8 --grid {{nope", 2, "argument --grid"),
    ("tune-grid-wrong-param", "tune --encoder hash:8 --methods lir --grid "
     '{{"lir":{{"lr":[0.1]}}}}', 2, "lir takes no 'lr'"),
    ("tune-holdout-tiny", "tune --encoder hash:8 --holdout 5", 2,
     "argument --holdout: expected a number of pairs per language >= 20, got '5'"),
    ("scale-size-0", "scale --encoder hash:8 --sizes 0", 2, "argument --sizes"),
    ("scale-unknown-method", "scale --encoder hash:8 --methods sed", 2, "Did you mean 'seed'"),
    ("scale-params-missing-file", "scale --encoder hash:8 --params {nodir}/p.json", 2,
     "argument --params"),
    ("bench-params-not-json", BENCH + " --params {badutf8}", 2, "argument --params"),
    ("export-no-model", "export --model {nodir} --out {out}/exp", 2, "is not a saved"),
    # issue 22, 1: outputs never touch what the user owns
    ("evaluate-out-is-model-file", "evaluate --model {model} --tasks sts17 --out "
     "{model}/config.json", 2, "lies inside the input folder --model"),
    ("evaluate-out-in-data", EVAL + " --out {data}/sts17/en-de.tsv", 2,
     "lies inside the input folder (a data set)"),
    ("train-out-in-cache", "train --method mean-centering --pairs {pairs} --src-col de "
     "--tgt-col en --out {cache}/m --encoder hash:8", 2,
     "lies inside the input folder (the embedding cache)"),
    ("mine-run-dir-in-data", MINE + " --run-dir {data}/parallel/run", 2,
     "parallel/run lies inside the input folder (a data set)"),
    ("export-out-is-model", "export --model {model} --out {model} --overwrite", 2,
     "is the input folder --model"),
    ("export-out-is-parent", "export --model {model} --out {root} --overwrite", 2,
     "holds the input folder --model"),
    ("export-overwrite-users-folder", "export --model {model} --out {userdir} --overwrite", 2,
     "not written by disembed (it has no readable manifest, .disembed-manifest.json): "
     "thesis.tex"),
    # 3: reuse only what is provably the same
    ("evaluate-reordered-config", "evaluate --model {reordered} --tasks sts17", 2,
     "does not match its own checksum"),
    ("mine-reordered-config", "mine {s} {t} --out {out}/m.tsv --model {reordered} --src-lang "
     "de --tgt-lang en", 2, "does not match its own checksum"),
    # 4: every option and file checked against its declaration
    ("bench-params-unknown-method", BENCH + " --params {sedp}", 2, "Did you mean 'seed'"),
    ("bench-params-lr-fast", BENCH + " --params {fastp}", 2,
     "seed: lr must be a finite number in (0, inf); got 'fast'"),
    ("bench-params-method-not-run", BENCH + " --params {lirp}", 2,
     "lir: rank must be an integer in [1, inf); got -3"),
    ("scale-params-unknown-method", "scale --encoder hash:8 --params {sedp}", 2,
     "Did you mean 'seed'"),
    ("tune-grid-empty-list", "tune --encoder hash:8 --grid "
     '{{"seed":{{"lr":[]}}}}', 2, "'lr' is an empty list, so there would be nothing to try"),
    ("tune-grid-scalar", "tune --encoder hash:8 --grid "
     '{{"seed":{{"lr":0.1}}}}', 2, "'lr' must be a list of values to try"),
    ("tune-grid-lr-fast", "tune --encoder hash:8 --grid "
     '{{"seed":{{"lr":["fast"]}}}}', 2, "lr must be a finite number"),
    ("tune-grid-unknown-method", "tune --encoder hash:8 --grid "
     '{{"sed":{{"lr":[0.1]}}}}', 2, "Did you mean 'seed'"),
    ("data-download-timeout-nan", "data download --timeout nan --data-dir {out}/d", 2,
     "argument --timeout: expected a finite number"),
    ("data-download-timeout-0", "data download --timeout 0 --data-dir {out}/d", 2,
     "argument --timeout: expected a number > 0"),
    # 5: text in, text out, faithfully
    ("encode-utf16-without-bom", "encode {u16} --out {out}/e.npy --encoder hash:8", 2,
     "is UTF-16LE text, not UTF-8; convert it first: iconv -f UTF-16LE -t UTF-8"),
    ("encode-utf16-with-bom", "encode {u16bom} --out {out}/e.npy --encoder hash:8", 2,
     "is UTF-16 text, not UTF-8; convert it first: iconv -f UTF-16 -t UTF-8"),
    ("mine-utf16", "mine {u16} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "is UTF-16LE text, not UTF-8"),
    ("train-pairs-utf16", "train --method mean-centering --pairs {u16} --src-col de --tgt-col "
     "en --out {out}/m --encoder hash:8", 2, "iconv -f UTF-16LE -t UTF-8"),
    ("mine-tab-in-sentence", "mine {tabs} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "3 tab-separated fields; expected two, 'id<TAB>sentence'"),
    # 6 and 7: no internal error, no silent fallback
    ("train-header-only-pairs", "train --method mean-centering --pairs {hdr} --src-col de "
     "--tgt-col en --out {out}/m --encoder hash:8", 2, "it holds no rows after the header"),
    ("train-every-row-skipped", "train --method mean-centering --pairs {badrows} --src-col de "
     "--tgt-col en --out {out}/m --encoder hash:8 --skip-bad-lines", 2,
     "every row was skipped (2,"),
    ("score-header-only", "score {hdrst} --out {out}/sc.tsv --encoder hash:8", 2,
     "no pairs to score: it holds only the header row"),
    ("score-every-row-skipped", "score {hdrst} --out {out}/sc.tsv --encoder hash:8 "
     "--skip-bad-lines", 2, "no pairs to score: every row was skipped"),
    ("score-empty-src-pool", SCORE + " --score ratio --src-pool {empty}", 2,
     "the source pool has no sentences"),
    *[(f"{verb}-seed-past-2^64", VERBS[verb] + " --seed 99999999999999999999999", 2,
       "argument --seed: expected a seed in [0, 2**64 - 1]")
      for verb in ("train", "evaluate", "bench", "analyse")],
    ("tune-seed-negative", "tune --encoder hash:8 --seed -1", 2, "argument --seed: expected "
     "a seed, an integer >= 0"),
    # issue 33: text at the reading edge
    ("encode-cr-only-file", "encode {cronly} --out {out}/e.npy --encoder hash:8", 2,
     "ends its lines with a carriage return (CR) only (classic Mac OS)"),
    ("mine-cr-only-file", "mine {cronly} {t} --out {out}/m.tsv --encoder hash:8", 2,
     ":1: a carriage return (CR) inside the line"),
    ("score-pool-cr-only", SCORE + " --score ratio --src-pool {cronly}", 2,
     "carriage return (CR) only"),
    ("encode-stray-cr", "encode {strayCR} --out {out}/e.npy --encoder hash:8", 2,
     "strayCR.txt:2: a carriage return (CR) inside the line"),
    ("encode-zero-width-line", "encode {zerowidth} --out {out}/e.npy --encoder hash:8", 2,
     "zerowidth.txt:2: empty line"),
    ("mine-zero-width-line", "mine {zerowidth} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "zerowidth.txt:2: empty sentence (or only invisible characters)"),
    ("search-zero-width-tsv", "search {zwtsv} {t} --out {out}/q.tsv --encoder hash:8", 2,
     "zwtsv.tsv:2: empty sentence"),
    ("mine-tab-in-text-line", "mine {texttab} {t} --out {out}/m.tsv --encoder hash:8", 2,
     "texttab.txt:2: holds a tab, but the file is read as one sentence per line"),
    ("mine-tab-in-gathered-text", "mine {texttab},{a} {t} --out {out}/m.tsv --encoder hash:8",
     2, "texttab.txt:2: holds a tab"),
    ("calibrate-und", "calibrate {a} --model {model} --language und", 2, "'und'"),
    # issue 33 probe: two outputs of one command are two paths
    ("mine-out-is-run-dir", "mine {s} {t} --out {out}/x --run-dir {out}/x --encoder hash:8", 2,
     "are the same path, but one command writes both"),
    # serve options are checked before anything is loaded
    ("serve-max-batch-0", SERVE + " --max-batch 0", 2,
     "argument --max-batch: expected a positive integer, got '0'"),
    ("serve-max-inputs-0", SERVE + " --max-inputs 0", 2,
     "argument --max-inputs: expected a positive integer, got '0'"),
    ("serve-max-chars-neg", SERVE + " --max-chars -1", 2, "argument --max-chars"),
    ("serve-port-70000", SERVE + " --port 70000", 2,
     "argument --port: expected a TCP port from 0 to 65535, got '70000'"),
    ("serve-port-word", SERVE + " --port http", 2, "argument --port"),
    ("serve-window-nan", SERVE + " --batch-window-ms nan", 2,
     "argument --batch-window-ms: expected a finite number"),
    ("serve-window-negative", SERVE + " --batch-window-ms -5", 2,
     "argument --batch-window-ms: expected milliseconds from 0 to 10000"),
    ("serve-cors-empty", SERVE + " --cors-origins ,", 2, "argument --cors-origins"),
]


@pytest.mark.parametrize("row_id, template, code, fragment", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_a_clear_error(row_id, template, code, fragment, env, tmp_path, capsys):
    if row_id.startswith("export"):  # export checks its inputs after its own dependency
        pytest.importorskip("sentence_transformers", reason="pip install 'disembed[st]'")
    argv = env.argv(template, tmp_path / "out")
    got, _, err = run_cli(argv, capsys)
    assert got == code, f"{argv}: exit {got}, stderr:\n{err}"
    assert fragment in err, f"{argv}: {fragment!r} not in stderr:\n{err}"
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    verb = " ".join(argv[:2]) if argv[0] == "data" else argv[0]
    assert last.startswith(f"disembed {verb}: error: "), last
    assert written(tmp_path / "out") == [], f"{argv}: wrote outputs before failing"


def written(folder: Path) -> list[Path]:
    """The files under ``folder``, but the lock file a writer takes on its output folder
    (``.disembed.lock``, empty: it marks the folder as disembed's, util/folders.py)."""
    return [p for p in folder.rglob("*") if p.is_file() and p.name != LOCK_NAME] \
        if folder.exists() else []
