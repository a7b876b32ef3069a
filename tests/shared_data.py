"""The development benchmark data beside the checkout: ../shared/data (its README says what is in it).

Found relative to this checkout, wherever it is, or at $MEMLENS_SHARED_DATA. A test that needs a
file there is marked with `needs_shared(...)`: on a fresh clone without it, the test is skipped and
the skip names the path it looked for (pytest -ra lists it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEMLENS_SHARED_DATA") or REPO.parent / "shared" / "data")


def needs_shared(*names: str) -> pytest.MarkDecorator:
    """Skip unless every named file or folder is in SHARED_DATA."""
    missing = [SHARED_DATA / n for n in names if not (SHARED_DATA / n).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"no {', '.join(map(str, missing))}: the dev data beside the "
                                                     "checkout (../shared/data, or set MEMLENS_SHARED_DATA)")
