"""Code-switched sentences: seeded, >= 1 substitution, only dictionary words, skips reported."""

import re

import pytest

from disembed.analysis.codeswitch import CodeSwitchTask, code_switch, load_dictionary
from disembed.exceptions import ConfigError

DICT = {"hund": ["dog"], "katze": ["cat"], "haus": ["house", "home"], "rot": ["red"]}
SENTENCES = ["Der Hund und die Katze.", "Das Haus ist rot.", "Nichts hier.",
             "Hund Hund Hund Hund."]


def test_seeded_and_at_least_one_substitution():
    a = code_switch(SENTENCES, DICT, rate=0.3, seed=1)
    assert a == code_switch(SENTENCES, DICT, rate=0.3, seed=1)
    assert a.kept == [0, 1, 3] and a.skipped == [2]
    assert all(k >= 1 for k in a.substitutions)
    assert a.substitutions[2] == 1  # round(0.3 * 4)
    assert code_switch(SENTENCES, DICT, rate=1.0).texts[0] == "Der dog und die cat."


def test_only_dictionary_words_replaced():
    english = {w for ws in DICT.values() for w in ws}
    for seed in range(5):
        out = code_switch(SENTENCES, DICT, rate=0.5, seed=seed)
        for i, text in zip(out.kept, out.texts, strict=True):
            before, after = re.findall(r"\w+", SENTENCES[i]), re.findall(r"\w+", text)
            assert len(before) == len(after)
            changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
            assert len(changed) == out.substitutions[out.kept.index(i)]
            assert all(b.lower() in DICT and a in english for b, a in changed)


def test_unspaced_language_longest_match():
    out = code_switch(["我喜欢猫。"], {"喜欢": ["like"], "喜": ["joy"], "猫": ["cat"]}, rate=1.0,
                      unspaced=True)
    assert out.texts == ["我likecat。"]


def test_rate_is_checked():
    with pytest.raises(ConfigError):
        code_switch(SENTENCES, DICT, rate=0)


def _muse(data_dir):
    folder = data_dir / "muse_dictionaries"
    folder.mkdir()
    (folder / "en-de.tsv").write_text("en\tde\nhello\thallo\nthanks\tdanke\nyes\tja\n"
                                      "good\tgut\nthe\tthe\n", encoding="utf-8")


def test_task_pairs_original_and_switched(tiny_data_dir):
    _muse(tiny_data_dir)
    assert load_dictionary("de", tiny_data_dir) == {"hallo": ["hello"], "danke": ["thanks"],
                                                    "ja": ["yes"], "gut": ["good"]}
    task = CodeSwitchTask(data_dir=tiny_data_dir, seed=0)
    subsets = {s.name: s for s in task.load_subsets()}
    assert set(subsets) == {"de", "de+cs"}
    assert task.stats_["de"] == {"items": 5, "switched": 4, "skipped_no_dictionary_word": 1,
                                 "mean_substitutions": 1.0}
    assert subsets["de"].texts_b == subsets["de+cs"].texts_b
    assert subsets["de"].texts_a != subsets["de+cs"].texts_a
    with pytest.raises(ConfigError, match="no MUSE dictionary"):
        load_dictionary("zh", tiny_data_dir)
