"""The default embedder: all-MiniLM-L6-v2 as an int8 ONNX model, on onnxruntime + tokenizers.

The model files (resources/models/all-MiniLM-L6-v2-int8/) come from packaging/build_embedder.py,
whose MODEL.md records how they were made and how close they are to the float model. No PyTorch
and no network here: everything is read from that folder and checked against its SHA256SUMS.

Choices worth knowing:

- One text per onnxruntime run. The model's activations are quantised at run time with one scale
  per input tensor, so in a padded batch a text's vector would depend on its neighbours (measured:
  up to 5e-2 per component). Run alone, every vector is a pure function of its text, and on this
  model single runs on two worker threads were as fast as padded batches of 32.
- Multi-text calls (more than INLINE_TEXTS) run texts on ``threads`` worker threads (default min(2, cpu count)), longest
  first, each run single-threaded (``intra_op_threads``, default 1): a lone query on a busy
  machine then takes one core and never waits on a thread pool.
- Texts are truncated at 256 tokens (the model's max_seq_length); mean pooling over the tokens,
  then L2. An empty or blank text becomes ``[CLS] [SEP]`` and gets that fixed, valid unit vector.
- kind ("passage" or "query") is accepted for the protocol; MiniLM uses no prefixes, so both give
  the same vector for the same text.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import EmbedderError
from ..paths import resources_dir
from .base import l2_normalise

MODEL_DIRNAME = "all-MiniLM-L6-v2-int8"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
SUMS_FILE = "SHA256SUMS"
MAX_TOKENS = 256
KINDS = ("passage", "query")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUT = "last_hidden_state"


def default_model_dir() -> Path:
    return resources_dir() / "models" / MODEL_DIRNAME


class _Loaded(NamedTuple):
    tokenizer: Any  # tokenizers.Tokenizer, configured once and then only read
    session: Any  # onnxruntime.InferenceSession; run() is thread-safe


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX), 384 dims, unit rows. Cheap to construct; loads on first use."""

    provider = "local"
    model = MODEL_DIRNAME
    dims = 384

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        intra_op_threads: int = 1,
    ) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        self.threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        if self.threads < 1 or intra_op_threads < 1:
            raise ValueError("threads and intra_op_threads must be at least 1")
        self.intra_op_threads = intra_op_threads
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None

    def fingerprint(self) -> str:
        """The checksums of the model files (engine/embed/cache.py keys vectors by it); reads
        the small SHA256SUMS file, never the model."""
        return hashlib.sha256(repr(sorted(self._read_sums().items())).encode()).hexdigest()[:16]

    # -- loading ---------------------------------------------------------------------------

    def warm(self) -> None:
        """Load and verify the model now rather than on the first embed()."""
        self._state()

    def _state(self) -> _Loaded:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._load()
                loaded = self._loaded
        return loaded

    def _fail(self, what: str) -> EmbedderError:
        return EmbedderError(f"local embedder: {what} ({self.model_dir})")

    def _load(self) -> _Loaded:
        # Imported here so that importing memlens (or constructing this class) stays cheap.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if not self.model_dir.is_dir():
            raise self._fail("model folder not found; reinstall memlens or pass the folder")
        expected = self._read_sums()
        model_bytes = self._read_verified(MODEL_FILE, expected)
        tokenizer_bytes = self._read_verified(TOKENIZER_FILE, expected)

        try:
            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise self._fail(f"cannot read {TOKENIZER_FILE}: {_first_line(exc)}") from exc
        tokenizer.no_padding()  # the file carries upstream's fixed 128-token padding
        tokenizer.enable_truncation(max_length=MAX_TOKENS)

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.intra_op_threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # errors only
        # x86 CPUs without VNNI saturate u8s8 products at 16 bits; this makes them exact (u8u8),
        # so every machine computes what MODEL.md measured. With VNNI the u8s8 products are exact
        # already and the option only costs time: it rewrites every weight to u8 and takes the
        # u8u8 kernels, half as fast here (the same vectors, byte for byte: tests/engine/test_embed_local.py).
        if not _exact_u8s8():
            opts.add_session_config_entry("session.x64quantprecision", "1")
        try:
            session = ort.InferenceSession(
                model_bytes, sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's exception types live in a private module
            raise self._fail(f"cannot load {MODEL_FILE}: {_first_line(exc)}") from exc
        names = {i.name for i in session.get_inputs()}
        outputs = session.get_outputs()
        if names != set(_INPUTS) or outputs[0].name != _OUTPUT or outputs[0].shape[-1] != self.dims:
            raise self._fail(f"{MODEL_FILE} does not have the expected inputs and output")
        return _Loaded(tokenizer, session)

    def _read_sums(self) -> dict[str, str]:
        path = self.model_dir / SUMS_FILE
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise self._fail(f"cannot read {SUMS_FILE}: {_first_line(exc)}") from exc
        sums: dict[str, str] = {}
        for line in lines:
            digest, _, name = line.strip().partition("  ")
            if digest and name:
                sums[name.lstrip("*")] = digest.lower()
        return sums

    def _read_verified(self, name: str, expected: dict[str, str]) -> bytes:
        # Hash the very bytes that get loaded (~20 ms for the model here): no window between
        # the check and the load, and a truncated or flipped file never reaches onnxruntime.
        if name not in expected:
            raise self._fail(f"{SUMS_FILE} has no entry for {name}")
        try:
            data = (self.model_dir / name).read_bytes()
        except OSError as exc:
            raise self._fail(f"cannot read {name}: {_first_line(exc)}") from exc
        if hashlib.sha256(data).hexdigest() != expected[name]:
            raise self._fail(f"{name} is corrupt: its sha256 does not match {SUMS_FILE}")
        return data

    # -- embedding -------------------------------------------------------------------------

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single string")
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be str, not {type(text).__name__}")
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        loaded = self._state()
        # One call for the batch (same encodings as one by one; no padding is set): a loop of
        # single encodes hands the GIL back and forth hundreds of times, and a thread waiting
        # for it (the GUI's) misses its turn while the switches keep happening.
        encodings = _encode(loaded.tokenizer, texts)

        def run_rows(rows: list[int]) -> None:
            for row in rows:
                out[row] = self._run_one(loaded.session, encodings[row])

        workers = min(self.threads, len(texts))
        if workers == 1 or len(texts) <= INLINE_TEXTS:
            run_rows(list(range(len(texts))))
        else:
            # Longest first, dealt out in turn, so the workers finish together.
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids), reverse=True)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memlens-embed") as pool:
                for future in [pool.submit(run_rows, order[w::workers]) for w in range(workers)]:
                    future.result()
        return l2_normalise(out)

    def _run_one(self, session: Any, encoding: Any) -> np.ndarray:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feed = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64),
        }
        try:
            hidden = session.run([_OUTPUT], feed)[0]
        except Exception as exc:
            raise EmbedderError(f"local embedder: inference failed: {_first_line(exc)}") from exc
        return _mean_pool(hidden[0], mask[0])


_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})


def _exact_u8s8() -> bool:
    """Are onnxruntime's u8s8 products exact on this CPU (x86 with VNNI, which accumulates them in
    32 bits)? Read from Linux's /proc/cpuinfo; elsewhere from numpy's own CPU feature probe, which
    knows AVX512-VNNI (not AVX-VNNI) on every OS; False wherever it cannot be told, which keeps the
    exact u8u8 path (the option has no effect off x86)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return bool(_VNNI_FLAGS & set(line.partition(":")[2].split()))
    except OSError:
        pass
    return _numpy_knows_vnni()


def _numpy_knows_vnni() -> bool:
    import importlib

    try:  # numpy's dispatch table of the running CPU's features; not a public name, so guarded
        features = getattr(importlib.import_module("numpy._core._multiarray_umath"), "__cpu_features__", {})
    except ImportError:
        return False
    return bool(features.get("AVX512VNNI"))


# A call with this few texts runs on the calling thread: recall embeds two or three clauses at a
# time, and starting a pool's threads for them cost more CPU than the runs (LoCoMo dev recall:
# a fifth of the current-truth stage). Each text is run alone either way, so the vectors are the same.
INLINE_TEXTS = 4

PREFIX_CHARS = 16 * MAX_TOKENS  # 256 tokens of prose take about 1,200 characters


def _encode(tokenizer: Any, texts: list[str]) -> list[Any]:
    """The tokenizer's encodings of texts, tokenizing only a prefix of a long text: the model
    reads MAX_TOKENS tokens, and tokenizing all of a 2 MB turn to keep its first 256 took
    seconds. Exact: a prefix's encoding is used only if it was truncated before the last word
    the prefix may have cut (word pieces never span whitespace), else the whole text is encoded."""
    prefixes = [t[:PREFIX_CHARS] if len(t) > PREFIX_CHARS else t for t in texts]
    encodings: list[Any] = tokenizer.encode_batch(prefixes)
    redo = []
    for i, (text, prefix) in enumerate(zip(texts, prefixes)):
        if prefix is text:
            continue
        enc = encodings[i]
        cut = max(prefix.rfind(" "), prefix.rfind("\n"), prefix.rfind("\t"))
        kept_end = max((end for _start, end in enc.offsets), default=0)
        if len(enc.ids) < MAX_TOKENS or cut < 0 or kept_end > cut:
            redo.append(i)
    if redo:
        for i, enc in zip(redo, tokenizer.encode_batch([texts[i] for i in redo])):
            encodings[i] = enc
    return encodings


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors the attention mask keeps (sentence-transformers' pooling)."""
    weights = mask.astype(np.float32)
    pooled: np.ndarray = (hidden * weights[:, None]).sum(axis=0) / max(float(weights.sum()), 1.0)
    return pooled


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
