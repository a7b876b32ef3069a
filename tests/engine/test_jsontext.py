"""engine.jsontext: the JSON recall writes reads back as json would have written it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine import jsontext


def test_what_a_trace_holds_reads_back_as_written():
    value = {"components": ["fusion", "recency"], "rows": [[12, {"vector": {"rank": 1, "score": 0.5}}, [0.25, -0.0],
                                                                0.75, None, "rank", "below_cut", "rank 11 > k 10", None]],
             "outdated": {"7": {"by": 9, "reason": "Ünïcode – kept"}}, "ids": (1, 2)}
    assert json.loads(jsontext.dumps(value)) == json.loads(json.dumps(value))


def test_numpy_scalars_are_numbers_and_int_keys_strings():
    assert json.loads(jsontext.dumps({"s": np.float32(0.5), "n": np.int64(3), 4: "x"})) == {"s": 0.5, "n": 3, "4": "x"}


def test_what_json_cannot_hold_raises_type_error():
    with pytest.raises(TypeError):
        jsontext.dumps({"x": object()})
