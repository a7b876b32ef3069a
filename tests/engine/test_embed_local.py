"""LocalEmbedder on the bundled all-MiniLM-L6-v2 int8 model (resources/models/all-MiniLM-L6-v2-int8).

These run the real model: no Qt, no network, about two seconds in all.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.embed.base import Embedder
from engine.embed.local import MAX_TOKENS, LocalEmbedder, default_model_dir
from engine.errors import EmbedderError
from engine.paths import resources_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO_ROOT / "resources" / "models" / "all-MiniLM-L6-v2-int8"

MIXED = [
    "ok",
    "My brother moved to Toronto in 2021 to study mechanical engineering, and he loves it there.",
    "",
    "When did Caroline go to the LGBTQ support group?",
    " ".join(["We planted tomatoes, beans and basil in the new raised beds."] * 25),  # > 256 tokens
    "Congrats on the new job!!! 🎉",
    "ok",  # a duplicate: same vector as row 0, wherever it lands
    "東京は日本の首都です。",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    emb = LocalEmbedder(MODEL_DIR)
    emb.warm()
    return emb


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_identity_and_protocol():
    emb = LocalEmbedder(MODEL_DIR)
    assert isinstance(emb, Embedder)
    assert (emb.provider, emb.model, emb.dims) == ("local", "all-MiniLM-L6-v2-int8", 384)


def test_default_folder_is_under_resources():
    assert LocalEmbedder().model_dir == resources_dir() / "models" / "all-MiniLM-L6-v2-int8"
    assert default_model_dir() == LocalEmbedder().model_dir


def test_shape_dtype_and_unit_rows(embedder):
    vecs = embedder.embed(MIXED)
    assert vecs.shape == (len(MIXED), 384)
    assert vecs.dtype == np.float32
    assert np.all(np.isfinite(vecs))
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # Not a constant or degenerate output: distinct texts get distinct directions.
    assert cos(vecs[1], vecs[3]) < 0.9


def test_empty_list_gives_empty_matrix(embedder):
    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_empty_and_blank_texts_get_the_same_valid_unit_vector(embedder):
    # Documented choice: "" and whitespace tokenise to [CLS] [SEP], a fixed non-zero vector.
    empty, blank, word = embedder.embed(["", "   \n\t", "hello"])
    assert np.linalg.norm(empty) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_array_equal(empty, blank)
    assert cos(empty, word) < 0.99


def test_deterministic_across_calls_and_instances(embedder):
    first = embedder.embed(MIXED)
    again = embedder.embed(MIXED)
    other = LocalEmbedder(MODEL_DIR, threads=1).embed(MIXED)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, other)


def test_paraphrase_is_closer_than_unrelated(embedder):
    triples = [
        ("I adopted a puppy last week.", "Last week I got a new dog.",
         "The quarterly tax filing deadline is in April."),
        ("Where does my brother live now?", "My brother moved to Toronto in 2021.",
         "I love pottery classes on Saturdays."),
        ("What did Melanie paint?", "Melanie painted a sunrise over the lake last year.",
         "The car needs new tyres before winter."),
    ]
    for anchor, paraphrase, unrelated in triples:
        a, p, u = embedder.embed([anchor, paraphrase, unrelated])
        assert cos(a, p) > cos(a, u) + 0.3, (anchor, cos(a, p), cos(a, u))


# Cosines from the float PyTorch model (mean pooling + L2, as sentence-transformers does),
# computed once in the build venv of packaging/build_embedder.py. Other poolings land far off
# (CLS pooling gives 0.85 / 0.82 / 0.83 / 0.61 / 0.94), so these pin what the int8 model computes.
FLOAT_MODEL_COSINES = [
    ("I adopted a puppy last week.", "Last week I got a new dog.", 0.7113),
    ("Where does my brother live now?", "My brother moved to Toronto in 2021.", 0.6175),
    ("What did Melanie paint?", "Melanie painted a sunrise over the lake last year.", 0.6443),
    ("I adopted a puppy last week.", "The quarterly tax filing deadline is in April.", 0.0803),
    ("", "hello", 0.5098),
]


@pytest.mark.parametrize(("left", "right", "expected"), FLOAT_MODEL_COSINES)
def test_similarities_match_the_float_model(embedder, left, right, expected):
    a, b = embedder.embed([left, right])
    assert cos(a, b) == pytest.approx(expected, abs=0.03)


def test_query_and_passage_kinds(embedder):
    passages = [
        "Caroline went to the LGBTQ support group on 7 May 2023.",
        "Melanie painted a sunrise over the lake in 2022.",
        "The team switched the database to PostgreSQL last spring.",
    ]
    p = embedder.embed(passages, kind="passage")
    q = embedder.embed(["When did Caroline go to the support group?"], kind="query")
    assert q.shape == (1, 384) and p.shape == (3, 384)
    scores = p @ q[0]
    assert int(np.argmax(scores)) == 0, scores
    # MiniLM has no query/passage prefixes: the same text gives the same vector either way.
    np.testing.assert_array_equal(
        embedder.embed(passages[:1], kind="query"), embedder.embed(passages[:1], kind="passage")
    )
    with pytest.raises(ValueError):
        embedder.embed(["x"], kind="document")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_equals_single_texts_in_order(threads):
    emb = LocalEmbedder(MODEL_DIR, threads=threads)
    batch = emb.embed(MIXED)
    singles = np.stack([emb.embed([text])[0] for text in MIXED])
    np.testing.assert_allclose(batch, singles, atol=1e-5, rtol=0)
    # Each row is its own text's vector, not a neighbour's (order is restored after sorting).
    sims = batch @ singles.T
    for row, text in enumerate(MIXED):
        twins = [i for i, other in enumerate(MIXED) if other == text]
        best = int(np.argmax(sims[row]))
        assert best in twins, (row, best)
        assert all(sims[row, j] < 0.999 for j in range(len(MIXED)) if j not in twins)


def test_text_longer_than_the_window_is_truncated_at_256_tokens(embedder):
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    raw.no_truncation()
    raw.no_padding()

    def n_tokens(text: str) -> int:
        return len(raw.encode(text).ids)

    long_text = " ".join(f"Day {i}: watered the garden and read a chapter." for i in range(200))
    tail = " Then a completely different ending about quantum chromodynamics and tax law."
    assert n_tokens(long_text) > 4 * MAX_TOKENS
    assert n_tokens(MIXED[4]) > MAX_TOKENS
    a, b, short = embedder.embed([long_text, long_text + tail, "Day 0: watered the garden."])
    # Everything past 256 tokens is dropped, so the appended tail cannot change the vector.
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert cos(a, short) < 0.999

    # ...and nothing before token 256 is dropped (the file itself says 128: that must not win).
    head = " ".join(f"Day {i}: watered the garden." for i in range(24))
    ends = [head + " The ending is about cats and dogs.", head + " The ending is about taxes and law."]
    assert all(150 < n_tokens(text) < MAX_TOKENS for text in ends)
    x, y = embedder.embed(ends)
    assert cos(x, y) < 0.9999


def test_no_fixed_padding(embedder):
    # tokenizer.json pads every text to 128 tokens; left on, a 3-token query would cost ~40x.
    tokenizer = embedder._state().tokenizer  # noqa: SLF001 - the one white-box check here
    assert tokenizer.padding is None
    assert len(tokenizer.encode("ok").ids) == 3


def test_concurrent_calls_match_serial(embedder):
    texts = [f"{i}: {t}" for i, t in enumerate(MIXED * 3)]
    expected = embedder.embed(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            results[k] = embedder.embed(texts[k:] + texts[:k])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, got in results.items():
        np.testing.assert_allclose(got, np.roll(expected, -k, axis=0), atol=1e-5, rtol=0)


def test_concurrent_first_use_loads_once():
    emb = LocalEmbedder(MODEL_DIR)
    out: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: out.append(emb.embed(["hello there"]))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 3
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])


def test_rejects_non_text_input(embedder):
    with pytest.raises(TypeError):
        embedder.embed("a bare string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embedder.embed(["fine", None])  # type: ignore[list-item]


def test_missing_model_dir_raises_embedder_error_on_use(tmp_path):
    emb = LocalEmbedder(tmp_path / "nowhere")  # constructing is cheap and does not touch disk
    with pytest.raises(EmbedderError) as err:
        emb.embed(["hello"])
    assert "not found" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(EmbedderError):
        emb.warm()


def copy_model(tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(MODEL_DIR, target)
    return target


def test_missing_model_file_raises_embedder_error(tmp_path):
    target = copy_model(tmp_path)
    (target / "model.onnx").unlink()
    with pytest.raises(EmbedderError, match="model.onnx"):
        LocalEmbedder(target).warm()


def test_missing_checksums_raise_embedder_error(tmp_path):
    target = copy_model(tmp_path)
    (target / "SHA256SUMS").unlink()
    with pytest.raises(EmbedderError, match="SHA256SUMS"):
        LocalEmbedder(target).warm()


@pytest.mark.parametrize("name", ["model.onnx", "tokenizer.json"])
def test_flipped_byte_raises_embedder_error(tmp_path, name):
    target = copy_model(tmp_path)
    path = target / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    emb = LocalEmbedder(target)
    with pytest.raises(EmbedderError, match="corrupt") as err:
        emb.embed(["hello"])
    assert name in str(err.value) and "\n" not in str(err.value)


def test_intact_copy_loads(tmp_path):
    # The copy used by the corruption tests is itself fine: the failure above is the flip.
    target = copy_model(tmp_path)
    np.testing.assert_allclose(
        LocalEmbedder(target).embed(["hello"]), LocalEmbedder(MODEL_DIR).embed(["hello"]), atol=0
    )


def test_no_torch_at_run_time():
    code = (
        "import sys\n"
        "from engine.embed.local import LocalEmbedder\n"
        f"LocalEmbedder({str(MODEL_DIR)!r}).embed(['hello'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_long_text_is_tokenized_from_a_prefix_with_the_same_tokens(embedder):
    """The model reads MAX_TOKENS tokens; tokenizing only a prefix of a 2 MB turn must give the
    very tokens the whole text gives (else the whole text is tokenized)."""
    from engine.embed.local import PREFIX_CHARS, _encode

    tokenizer = embedder._state().tokenizer
    prose = " ".join(["We planted tomatoes, beans and basil in the new raised beds."] * 4000)
    texts = [
        prose,                                       # long prose: the prefix suffices
        "x" * (PREFIX_CHARS * 3),                    # one giant word: cut inside it, so the whole text
        "a\n" * PREFIX_CHARS + "tail",               # short tokens: more than MAX_TOKENS in the prefix
        " " * (PREFIX_CHARS + 10) + "late words",    # nothing but space in the prefix
        prose[:PREFIX_CHARS + 1],                    # just over the prefix
        "short",
    ]
    assert [e.ids for e in _encode(tokenizer, texts)] == [e.ids for e in tokenizer.encode_batch(texts)]
    assert np.array_equal(embedder.embed(texts[:1]), embedder.embed([prose[:PREFIX_CHARS * 2]]))


def test_the_u8s8_kernels_give_the_exact_u8u8_vectors_where_they_are_taken(embedder, monkeypatch):
    """Where the CPU has VNNI, the session skips session.x64quantprecision (the u8u8 rewrite, half
    as fast) since its u8s8 products are exact: the vectors must be those of the u8u8 path, byte for
    byte. Elsewhere both sessions take the u8u8 path and this holds trivially."""
    import engine.embed.local as local

    texts = MIXED + [" ".join(f"word{i} and the {i}th turn about gardens" for i in range(60)), "Hello?"]
    monkeypatch.setattr(local, "_exact_u8s8", lambda: False)
    exact = LocalEmbedder(MODEL_DIR).embed(texts)
    monkeypatch.undo()
    assert embedder.embed(texts).tobytes() == exact.tobytes()


def test_vnni_is_read_from_the_cpu_flags(monkeypatch, tmp_path):
    import builtins

    import engine.embed.local as local

    real_open = builtins.open

    def cpuinfo(text):
        def fake(path, *a, **k):
            return real_open(tmp_path / "cpuinfo", *a, **k) if path == "/proc/cpuinfo" else real_open(path, *a, **k)
        (tmp_path / "cpuinfo").write_text(text)
        monkeypatch.setattr(builtins, "open", fake)

    cpuinfo("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    assert local._exact_u8s8() is False
    cpuinfo("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n")
    assert local._exact_u8s8() is True
    cpuinfo("processor\t: 0\nflags\t\t: fpu avx_vnni\n")
    assert local._exact_u8s8() is True
    # No /proc/cpuinfo (macOS, Windows): numpy's probe of the CPU answers
    monkeypatch.setattr(builtins, "open", lambda *a, **k: (_ for _ in ()).throw(OSError("no such file")))
    monkeypatch.setattr(local, "_numpy_knows_vnni", lambda: False)
    assert local._exact_u8s8() is False
    monkeypatch.setattr(local, "_numpy_knows_vnni", lambda: True)
    assert local._exact_u8s8() is True


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux's CPU flags to compare with")
def test_numpys_vnni_probe_agrees_with_the_cpu_flags():
    import engine.embed.local as local

    flags = next((line.partition(":")[2].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    assert local._numpy_knows_vnni() is ("avx512_vnni" in flags)
