"""docs/performance.md is written by the benchmark scripts.

Each benchmark owns one section of that file, between the lines
``<!-- begin NAME -->`` and ``<!-- end NAME -->``. Run with ``--write-docs``, a benchmark
replaces its own section with the numbers it just printed, headed by the date, the
machine and the command line; everything outside the markers is hand-written and kept.

    from perf_doc import record_section
    record_section("bench_core", ["| structure | ms per step |", ...])
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path

PERFORMANCE_MD = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- begin {name} -->", f"<!-- end {name} -->"


def run_header(argv: list[str] | None = None) -> str:
    """One line: when, where and how the numbers were measured."""
    argv = sys.argv if argv is None else argv
    command = " ".join(shlex.quote(a) for a in [Path(argv[0]).name, *argv[1:]])
    cpus = os.cpu_count() or 0
    today = datetime.date.today().isoformat()
    return (f"*Written by `{command}` on {today}; {platform.machine()}, {cpus} CPUs, "
            f"Python {platform.python_version()}.*")


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with the section `name` replaced by `body` (appended if it has none yet)."""
    begin, end = markers(name)
    block = f"{begin}\n{body.rstrip()}\n{end}"
    start = text.find(begin)
    if start < 0:
        return text.rstrip() + "\n\n" + block + "\n"
    stop = text.find(end, start)
    if stop < 0:
        raise ValueError(f"{PERFORMANCE_MD.name}: '{begin}' has no matching '{end}'")
    return text[:start] + block + text[stop + len(end):]


def record_section(name: str, lines: list[str], path: Path = PERFORMANCE_MD,
                   argv: list[str] | None = None) -> Path:
    """Write `lines` (markdown) as the section `name` of docs/performance.md."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Performance\n"
    body = run_header(argv) + "\n\n" + "\n".join(lines)
    path.write_text(replace_section(text, name, body), encoding="utf-8")
    return path
