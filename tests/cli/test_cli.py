"""Every CLI verb, end to end on the tiny data directory with the hash encoder."""

import json

import numpy as np
import pytest

from disembed.cli import main
from disembed.experiment import DEFAULT_RECIPE


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_encode_writes_matrix_and_texts(env, capsys):
    src = env / "in.txt"
    src.write_text("hello\nworld\nhello\n", encoding="utf-8")
    assert main(["encode", str(src), "--out", str(env / "e.npy"), "--encoder", "hash:8"]) == 0
    matrix = np.load(env / "e.npy")
    assert matrix.shape == (3, 8)
    np.testing.assert_array_equal(matrix[0], matrix[2])
    assert (env / "e.txt").read_text(encoding="utf-8").splitlines() == ["hello", "world", "hello"]
    assert "encoded 2" in capsys.readouterr().out
    # the output pair is itself a usable npy: encoder
    assert main(["encode", str(src), "--out", str(env / "f.npy"),
                 "--encoder", f"npy:{env / 'e.npy'}"]) == 0
    np.testing.assert_array_equal(np.load(env / "f.npy"), matrix)


def test_encode_rejects_empty_lines_unless_asked(env, capsys):
    src = env / "in.txt"
    src.write_text("a\n\nb\n", encoding="utf-8")
    assert main(["encode", str(src), "--out", str(env / "e.npy"), "--encoder", "hash:8"]) == 2
    assert "in.txt:2: empty line" in capsys.readouterr().err
    assert main(["encode", str(src), "--out", str(env / "e.npy"), "--encoder", "hash:8",
                 "--skip-bad-lines"]) == 0
    assert "skipped 1 empty lines" in capsys.readouterr().out


def test_train_then_evaluate_saved_model(env, capsys):
    out = env / "model"
    assert main(["train", "--method", "seed", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "40", "--max-epochs", "2", "--train-batch-size", "16",
                 "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["method"] == "seed" and summary["pairs"] == 80 and summary["epochs"] == 2
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert main(["evaluate", "--model", str(out), "--tasks", "sts17,wmt20-qe",
                 "--out", str(env / "r.json")]) == 0
    printed = capsys.readouterr().out
    assert "sts17 meaning" in printed and "sts17 language" in printed
    result = json.loads((env / "r.json").read_text())
    assert result["method"] == "seed" and result["encoder"]["backend"] == "hash"
    assert {s["task"] for s in result["scores"]} == {"sts17", "wmt20-qe"}
    assert result["environment"]["disembed_version"]


def test_train_from_own_tsv(env, capsys):
    tsv = env / "pairs.tsv"
    tsv.write_text("de\ten\n" + "".join(f"Satz {i}\tSentence {i}\n" for i in range(30)))
    assert main(["train", "--method", "mean-centering", "--encoder", "hash:16", "--pairs",
                 str(tsv), "--src-col", "de", "--tgt-col", "en", "--out", str(env / "mc")]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 30


def test_evaluate_baseline_and_errors(env, capsys):
    assert main(["evaluate", "--encoder", "hash:16", "--tasks", "tatoeba",
                 "--tatoeba-languages", "de,zh"]) == 0
    assert "tatoeba meaning" in capsys.readouterr().out
    assert main(["evaluate", "--method", "seed", "--encoder", "hash:16"]) == 2
    assert "must be trained first" in capsys.readouterr().err
    assert main(["evaluate", "--encoder", "hash:16", "--tasks", "stss17"]) == 2
    assert "Did you mean 'sts17'" in capsys.readouterr().err


def test_bench_runs_resumes_and_reports(env, capsys):
    args = ["bench", "--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language",
            "40", "--max-epochs", "2", "--out", str(env / "bench"),
            "--tatoeba-languages", "de,zh"]
    assert main(args) == 0
    report = (env / "bench" / "results.md").read_text()
    for needle in ("hash:16 / baseline", "hash:16 / mean-centering",
                   f"hash:16 / {DEFAULT_RECIPE}", "(floor)", "## Training data", "de-en | 40",
                   "## sts17", f"Settings: {DEFAULT_RECIPE}: ",
                   "max_epochs=2 (settings chosen by `disembed tune`"):
        assert needle in report, needle
    assert (env / "bench" / "summary.png").stat().st_size > 1000
    first = json.loads((env / "bench" / "bench.json").read_text())
    assert first["timings"]["sentences_encoded"] > 0
    assert main(args) == 0  # finished runs are reused, nothing is encoded again
    second = json.loads((env / "bench" / "bench.json").read_text())
    assert second["timings"]["sentences_encoded"] == 0
    trained = next(r for r in second["runs"] if r["label"].endswith(f"/ {DEFAULT_RECIPE}"))
    assert trained["timings"] == next(
        r for r in first["runs"] if r["label"].endswith(f"/ {DEFAULT_RECIPE}"))["timings"]


def test_unknown_method_in_bench_suggests(env, capsys):
    assert main(["bench", "--encoder", "hash:16", "--methods", "sed"]) == 2
    assert "Did you mean 'seed'" in capsys.readouterr().err


def test_train_composed_recipe_and_evaluate_it(env, capsys):
    out = env / "om"
    assert main(["train", "--method", "oracle+meat", "--encoder", "hash:16", "--languages",
                 "de,zh", "--pairs-per-language", "40", "--max-epochs", "2", "--out",
                 str(out)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["method"] == "oracle+meat"
    assert json.loads((out / "config.json").read_text())["method"] == "oracle+meat"
    assert main(["evaluate", "--model", str(out), "--tasks", "sts17"]) == 0
    assert "sts17 language" in capsys.readouterr().out


def test_bench_all_methods_gives_one_matrix(env, capsys):
    from disembed.experiment import all_methods

    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language",
                 "40", "--max-epochs", "1", "--methods", "all", "--no-floor", "--tasks",
                 "sts17,wmt20-qe", "--out", str(env / "bench")]) == 0
    report = (env / "bench" / "results.md").read_text()
    for method in all_methods():
        assert f"hash:16 / {method} |" in report, method
    runs = json.loads((env / "bench" / "bench.json").read_text())["runs"]
    assert [r["method"] for r in runs] == all_methods()
    linear = next(r for r in runs if r["method"] == "linear-map")
    table = linear["training"]["diagnostics"]
    assert [row[0] for row in table["rows"]] == ["de", "zh"] and "dD" in table["columns"]
    assert all(isinstance(row[table["columns"].index("dD")], float) for row in table["rows"])
    assert "## Map diagnostics" in report and "hash:16 / linear-map | zh |" in report


def test_bench_lr_reaches_trained_methods_only_and_reruns_them(env, capsys):
    base = ["bench", "--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language",
            "40", "--max-epochs", "1", "--methods", "baseline,seed", "--no-floor", "--tasks",
            "sts17", "--out", str(env / "bench")]
    assert main(base) == 0
    assert main(base + ["--lr", "0.003"]) == 0
    runs = {r["method"]: r for r in json.loads((env / "bench" / "bench.json").read_text())["runs"]}
    assert runs["seed"]["params"]["lr"] == 0.003
    assert "lr" not in runs["baseline"]["params"]
    assert runs["seed"]["spec"]["params"] == {"max_epochs": 1, "lr": 0.003}


def test_python_dash_m_runs_the_cli():
    import subprocess
    import sys

    for module in ("disembed", "disembed.cli"):
        done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("disembed "), done.stderr


def test_bench_max_eval_items_takes_a_count_or_all(env, capsys):
    from disembed.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["bench"]).max_eval_items == 300 and parse(["bench"]).pairs_per_language == 500
    assert parse(["bench", "--max-eval-items", "all"]).max_eval_items is None
    assert parse(["bench", "--max-eval-items", "50"]).max_eval_items == 50
    with pytest.raises(SystemExit):
        parse(["bench", "--max-eval-items", "0"])
    assert "a number of items >= 2 or 'all'" in capsys.readouterr().err



def test_info_prints_the_probe_and_threads(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["probe"]["fp32_gflops"] > 0 and info["threads"]["threads"] >= 1
    assert info["probe_cache"]["read_from_cache"] is False
    assert info["choices"]["e5-small"] in ("torch float32", "torch bfloat16")
    assert main(["info"]) == 0  # second time: the table, read from the cache
    table = capsys.readouterr().out
    for label in ("flags", "float32", "bfloat16", "threads", "e5-small", "exact k-NN"):
        assert label in table
    assert "read from cache" in table


def test_bench_default_languages_leave_out_those_without_data(env, capsys):
    # the tiny data folder has training pairs for de and zh only
    assert main(["bench", "--encoder", "hash:16", "--methods", "mean-centering", "--no-floor",
                 "--tasks", "sts17", "--pairs-per-language", "20", "--out",
                 str(env / "bench"), "-q"]) == 0
    report = (env / "bench" / "results.md").read_text()
    assert "| de-en | 20 |" in report and "| zh-en | 20 |" in report
    assert "Left out, no training pairs in the data folder: ar, es, et, fr" in report
    # a language named on the command line must have data
    assert main(["bench", "--encoder", "hash:16", "--methods", "mean-centering", "--no-floor",
                 "--tasks", "sts17", "--languages", "de,ar", "--out", str(env / "b2")]) == 2
    assert "no training pairs found for 'ar'" in capsys.readouterr().err


def test_training_path_flags_reach_trained_recipes(env, capsys):
    out = env / "fast"
    assert main(["train", "--method", "seed", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "40", "--max-epochs", "1", "--no-deterministic",
                 "--speed", "eager", "--precision", "float32", "--out", str(out)]) == 0
    params = json.loads((out / "config.json").read_text())["params"]
    assert (params["deterministic"], params["speed"], params["precision"]) == (
        False, "eager", "float32")
    # compiled steps change the rounding, so they need --no-deterministic
    assert main(["train", "--method", "seed", "--encoder", "hash:16", "--languages", "de",
                 "--speed", "compiled", "--out", str(env / "x")]) == 2
    assert "set deterministic=False" in capsys.readouterr().err


def test_calibrate_adds_a_language_to_a_saved_model(env, capsys):
    import numpy as np

    from disembed.encoders import HashEncoder
    from disembed.methods import load_disentangler

    tsv = env / "pairs.tsv"
    tsv.write_text("de\ten\n" + "".join(f"Satz {i}\tSentence {i}\n" for i in range(30)))
    assert main(["train", "--method", "mean-centering", "--encoder", "hash:16", "--pairs",
                 str(tsv), "--src-col", "de", "--tgt-col", "en", "--out", str(env / "mc")]) == 0
    ja = env / "ja.txt"
    ja.write_text("".join(f"文 {i}\n" for i in range(40)))
    before = load_disentangler(env / "mc")
    X = HashEncoder(16).encode([f"文 {i}" for i in range(40)])
    assert main(["calibrate", "--model", str(env / "mc"), "--language", "jpn", str(ja),
                 "--out", str(env / "mc-ja")]) == 0
    assert "'ja'" in capsys.readouterr().out
    after = load_disentangler(env / "mc-ja")
    assert "ja" in after.known_languages() and "ja" not in before.known_languages()
    assert after.metadata_["calibrated"] == {"ja": {"sentences": 40}}
    np.testing.assert_allclose(after.meaning(X, "ja"), X - X.mean(0), atol=1e-5)
    assert main(["calibrate", "--model", str(env / "mc"), "--language", "xx-nonsense",
                 str(ja)]) == 2
    assert "nearest known" in capsys.readouterr().err
