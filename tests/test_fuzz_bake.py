"""scripts/bake.py against random command lines (tests/fuzz_bake.py, hypothesis), in a
subprocess with this venv's bpy, so that a crash fails this test with the case that caused
it: 500 cases in the fast suite (about a minute and a half: a few cases are fresh Blender
processes sent a signal; MS_BAKE_FUZZ_CASES sets fewer, as scripts/test.sh does for its
older Blenders), 10 000 in the slow one. The fast cases come in parts of about 250, each
from its own seed, which `pytest -n` runs side by side."""
import os

import pytest

from test_addon_helpers import require_bpy
from test_fuzz import fuzz

require_bpy()


def fast_parts():
    """(seed, cases) of each part: MS_BAKE_FUZZ_CASES (500) cases in parts of 250 or more."""
    total = int(os.environ.get("MS_BAKE_FUZZ_CASES", "500"))
    parts = max(1, total // 250)
    return [(1 + 2 * k, total // parts) for k in range(parts)]


@pytest.mark.parametrize("seed, cases", fast_parts())
def test_bake_fuzzer_fast_cases(seed, cases):
    assert cases >= 250  # fewer do not reach every outcome below every time (scripts/test.sh)
    done = fuzz(cases, seed=seed, fuzzer="fuzz_bake.py")
    # every kind of outcome happens: the generator is not stuck on bad input
    assert "'baked'" in done and "'exit 2'" in done and "'exit 1'" in done
    # ... nor on the data-loss paths of issue 34: PC2 clashes refused, pc2scene bakes
    # that succeed, and runs stopped by SIGTERM or SIGINT
    assert "'pc2 scene: refused'" in done and "'pc2 scene: baked'" in done
    assert "exit 130'" in done


@pytest.mark.slow
def test_bake_fuzzer_10000_cases():
    fuzz(10000, seed=2, fuzzer="fuzz_bake.py", timeout=3600)
