"""bench fit --model order: labels, the logistic fit, and a fit on a tiny updates file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.bench import datasets as ds
from engine.bench import order_fit
from engine.errors import BadInput
from engine.memory import MemoryEngine
from engine.retrieve import order
from engine.retrieve.order import FEATURE_NAMES


def _item(label: int, rng: np.random.Generator, fold: str = "dev:tidy") -> dict:
    x = rng.normal(size=(3, len(FEATURE_NAMES)))
    pairs = [[["s1:0"], ["s2:0"]], [["s1:2"], ["s2:0"]], [["s1:0"], ["s2:2"]]]
    x[0, FEATURE_NAMES.index("l_change")] = 3.0 if label else -3.0
    return {"fold": fold, "type": "current", "gold": ["s2:0"] if label else ["s1:0"],
            "stale": ["s1:0"] if label else ["s2:0"], "pairs": pairs, "x": x.tolist(), "metrics": {}}


def test_labels_mark_only_a_later_gold_over_an_earlier_stale():
    it = _item(1, np.random.default_rng(0))
    assert order_fit.labels(it) == [1.0, 0.0, 0.0]
    assert order_fit.labels(_item(0, np.random.default_rng(0))) == [0.0, 0.0, 0.0]  # a plan after the state
    assert order_fit.labels({**it, "type": "keep"}) == [0.0, 0.0, 0.0]


def test_the_fit_learns_what_marks_a_replacement():
    rng = np.random.default_rng(3)
    items = [_item(i % 2, rng) for i in range(40)]
    model = order_fit.train(items)
    w = dict(zip(FEATURE_NAMES, model["weights"]))
    assert w["l_change"] == max(w.values()) > 0
    p = order.probability(model, np.asarray(items[0]["x"]))  # label 0
    q = order.probability(model, np.asarray(items[1]["x"]))  # label 1
    assert q[0] > 0.5 > p[0]
    with pytest.raises(BadInput, match="no current or keep question"):
        order_fit.train([{**items[0], "x": []}])


def test_fit_end_to_end_reports_folds_and_writes_a_model_the_stage_reads(tmp_path):
    raw = json.loads(ds.updates_default_path().read_text(encoding="utf-8"))
    keep = {"home-d1", "home-d3", "home1-w2", "home1-w3", "home1-w4", "tool-h1"}
    raw["scenarios"] = [s for s in raw["scenarios"] if s["id"] in keep]
    path = tmp_path / "updates.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with MemoryEngine(tmp_path / "main.db", llm=False) as engine:
        out = order_fit.run_order_fit(engine, str(path), embedder="hashing")
    assert set(out["folds"]) == {"dev:tidy", "dev:w2", "dev:w3", "dev:w4", "heldout"}
    for r in out["folds"].values():
        assert set(r) == {"without", "with"} and "current_first@1" in r["with"]
    md = order_fit.markdown(out)
    assert "| dev:w4 |" in md and "natural pooled" in md
    written = order_fit.write_model(out, tmp_path / "order.json")
    model = order.load_model(written)
    assert model is not None and model["depth"] == order_fit.DEPTH and "dev:w2" in model["folds"]
