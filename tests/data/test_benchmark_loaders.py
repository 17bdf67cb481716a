import numpy as np
import pytest

from disembed.data.sts17 import available_sts17_tracks, load_sts17
from disembed.data.tatoeba import available_tatoeba_languages, load_tatoeba
from disembed.data.wmt20_qe import available_qe_pairs, load_wmt20_qe
from disembed.exceptions import ConfigError, DataError


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def tatoeba_dir(tmp_path):
    for code, src in {"cmn": ["你好。", "谢谢。"], "deu": ["Hallo.", "Danke."]}.items():
        _write(tmp_path / "tatoeba" / f"tatoeba.{code}-eng.{code}", src)
        _write(tmp_path / "tatoeba" / f"tatoeba.{code}-eng.eng", ["Hello.", "Thanks."])
    (tmp_path / "tatoeba" / "README.LASER.md").write_text("not data\n")
    return tmp_path


def test_tatoeba_codes_and_content(tatoeba_dir):
    assert available_tatoeba_languages(tatoeba_dir) == ["de", "zh"]
    zh = load_tatoeba("zh", tatoeba_dir)
    assert (zh.lang, zh.file_code, len(zh)) == ("zh", "cmn", 2)
    assert zh.source == ["你好。", "谢谢。"] and zh.english == ["Hello.", "Thanks."]
    assert load_tatoeba("deu", data_dir=tatoeba_dir).lang == "de"


def test_tatoeba_missing_language_and_misaligned_files(tatoeba_dir):
    with pytest.raises(ConfigError, match=r"tatoeba\.fra-eng\.fra.*Available: de, zh"):
        load_tatoeba("fr", tatoeba_dir)
    _write(tatoeba_dir / "tatoeba" / "tatoeba.deu-eng.eng", ["Hello."])
    with pytest.raises(DataError, match=r"tatoeba\.deu-eng\.deu has 2 lines"):
        load_tatoeba("de", tatoeba_dir)
    (tatoeba_dir / "empty").mkdir()
    with pytest.raises(ConfigError,
                       match=r"Tatoeba \(the folder tatoeba/\): not found; looked in .*empty\. "):
        available_tatoeba_languages(tatoeba_dir / "empty")


def test_sts17_loads_and_reports_bad_rows(tmp_path):
    header = "sentence1\tsentence2\tscore"
    rows = [header, "A \"quoted\" one.\tEins.\t4.2", "B.\tZwei.\t0"]
    _write(tmp_path / "sts17" / "en-de.tsv", rows)
    _write(tmp_path / "sts17" / "en-es_wmt.tsv", [header, "A.\tUno.\t3"])
    assert available_sts17_tracks(tmp_path) == ["en-de", "en-es_wmt"]
    s = load_sts17("en-de", tmp_path)
    assert (s.lang1, s.lang2, s.sentences1[0]) == ("en", "de", 'A "quoted" one.')
    np.testing.assert_array_equal(s.gold, [4.2, 0.0])
    assert load_sts17("en-es_wmt", tmp_path).lang2 == "es"
    _write(tmp_path / "sts17" / "en-tr.tsv", [header, "A.\tBir.\t1", "B.\tIki.\t2\textra"])
    with pytest.raises(DataError, match=r"en-tr\.tsv:3: has 4 fields"):
        load_sts17("en-tr", tmp_path)
    _write(tmp_path / "sts17" / "en-ar.tsv", [header, "A.\tB.\tfive"])
    with pytest.raises(DataError, match=r"en-ar\.tsv:2: column 'score' holds 'five'"):
        load_sts17("en-ar", tmp_path)
    with pytest.raises(ConfigError, match=r"the file es-en\.tsv\): not found; looked in "
                       r".*sts17\. Fetch it with 'disembed data download sts17'"):
        load_sts17("es-en", tmp_path)
    with pytest.raises(ConfigError, match="Unknown STS17 track"):
        load_sts17("de-de", tmp_path)


def test_wmt20_qe_both_layouts(tmp_path):
    _write(tmp_path / "wmt20_mlqe" / "test" / "en-zh.tsv", [
        "index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores",
        "0\tHi.\t你好。\t[1]\t1\t[0.1]\t0.25\t-0.1",
    ])
    _write(tmp_path / "wmt20_mlqe" / "test21" / "km-en.tsv",
           ["index\toriginal\ttranslation\tz_mean", "0\tសួស្តី\tHello\t-1.5"])
    q = load_wmt20_qe("en-zh", data_dir=tmp_path)
    assert (q.src_lang, q.tgt_lang, q.sources, q.translations) == ("en", "zh", ["Hi."], ["你好。"])
    assert q.z_mean.tolist() == [0.25] and q.split == "test"
    t21 = load_wmt20_qe("km-en", split="test21", data_dir=tmp_path)
    assert t21.src_lang == "km" and t21.z_mean.tolist() == [-1.5]
    assert available_qe_pairs("test21", tmp_path) == ["km-en"]
    with pytest.raises(ConfigError, match=r"the file en-de\.tsv\): not found; looked in "
                       r".*wmt20_mlqe/test\. Fetch it with 'disembed data download wmt20-qe'"):
        load_wmt20_qe("en-de", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="Unknown WMT QE split"):
        load_wmt20_qe("en-de", split="test20", data_dir=tmp_path)
    _write(tmp_path / "wmt20_mlqe" / "test" / "ro-en.tsv",
           ["index\toriginal\tz_mean", "0\tSalut.\t0.1"])
    with pytest.raises(DataError, match=r"ro-en\.tsv:1: header has no column\(s\) \['translati"):
        load_wmt20_qe("ro-en", data_dir=tmp_path)
