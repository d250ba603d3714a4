"""The core against random systems and random bad input (tests/fuzz_core.py, hypothesis).

The fuzzer runs in a subprocess, so that a crash of the compiled core fails this test with
the case that crashed it and the seed to rerun it, instead of killing the test run: 500
cases in the fast suite, 10 000 in the slow one."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def fuzz(cases, seed, fuzzer="fuzz_core.py", timeout=1800):
    """Run tests/`fuzzer` for `cases` cases from `seed`; its last line ('done: ...').
    `timeout`: seconds after which it counts as hung."""
    command = [sys.executable, str(TESTS / fuzzer), "--cases", str(cases), "--seed", str(seed)]
    try:
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                 env=dict(os.environ))
    except subprocess.TimeoutExpired as hung:
        output = hung.stdout.decode() if isinstance(hung.stdout, bytes) else (hung.stdout or "")
        last = output.splitlines()[-1] if output else "(no output)"
        pytest.fail(f"the fuzzer hung (seed {seed}: {' '.join(command[1:])}). Last case:\n{last[:4000]}")
    lines = process.stdout.splitlines()
    last = lines[-1] if lines else "(no output)"
    assert process.returncode == 0, (
        f"the fuzzer failed (exit {process.returncode}; seed {seed}: "
        f"python tests/{fuzzer} --cases {cases} --seed {seed}). Last case:\n{last[:4000]}\n"
        f"{process.stderr[-4000:]}")
    assert last.startswith(f"done: {cases} cases"), last
    return last


def test_fuzzer_500_cases():
    done = fuzz(500, seed=1)
    # both kinds of case happen: the generator is not stuck on bad input
    assert "'ran'" in done and "'ValueError'" in done


@pytest.mark.slow
def test_fuzzer_10000_cases():
    fuzz(10000, seed=2)
