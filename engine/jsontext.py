"""JSON text for what recall writes every time (a trace's candidates, parameters and stages).

orjson (issue 21): json's pure-Python walk over a trace's 200-300 candidate rows was most of the
trace write, a tenth of a benchmark container's recall; orjson writes the same JSON (read back
with json.loads) in about an eighth of the time. Differences from json.dumps: no spaces after
separators, non-ASCII kept as UTF-8, numpy scalars written as numbers, dict keys that are not
strings written as their str() (json does the same for ints), and NaN or infinity written as null
(json writes the non-standard NaN, which no trace holds).
"""

from __future__ import annotations

from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(value: Any) -> str:
    """`value` as JSON text; a value JSON cannot hold raises TypeError, as json.dumps does."""
    return orjson.dumps(value, option=_OPTIONS).decode("utf-8")
