"""The release core against the native one: scripts/bench_core.py --quick on each, one run.

The release wheels (manylinux_2_28, compiled by Zig's clang, libc++ linked in) must not be
slower than what this machine's compiler makes of the same sources. This runs the seeds'
structures and the sheets of bench_core.py on both builds, alternating which goes first
in each round, and prints the best time of each, their ratio and the geometric mean of
the ratios. It asserts nothing: timings on a shared machine are noisy, compare the ratio.

    python scripts/bench_wheels.py                     # release wheel from addon/wheels/
    python scripts/bench_wheels.py --rounds 3
    python scripts/bench_wheels.py --release A.whl --native B.whl

Without --native, the native wheel is built first (``pip wheel .``, build/<wheel tag>/).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import build_extension

REPO = Path(__file__).resolve().parent.parent
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
# A line of bench_core.py's output: structure, unknowns, ms per step.
ROW = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+\.\d+)\b")


def bench(site: Path) -> dict[str, float]:
    """bench_core.py --quick with the core unpacked in `site`: ms per step by structure."""
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_core.py"), "--quick"],
                         capture_output=True, text=True, check=True, env=env).stdout
    return {m.group(1): float(m.group(3)) for m in map(ROW.match, out.splitlines()) if m}


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    probe = subprocess.run([sys.executable, "-c", "import mass_spring; print(mass_spring.__file__)"],
                           capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONPATH=str(into))).stdout.strip()
    if not probe.startswith(str(into)):  # the venv's own core would shadow the wheel
        raise SystemExit(f"bench_wheels: {wheel.name} is not the core imported ({probe})")
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path, help="the release wheel (default: addon/wheels/)")
    ap.add_argument("--native", type=Path, help="the native wheel (default: built now)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each build (best kept)")
    args = ap.parse_args()
    release = args.release or next(iter(sorted(
        (REPO / "addon" / "wheels").glob(f"mass_spring-*-{TAG}-{TAG}-*.whl"))), None)
    if release is None:
        raise SystemExit(f"bench_wheels: no {TAG} wheel in addon/wheels/: run "
                         "scripts/build_extension.py first")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        native = args.native or build_extension.build_wheel(sys.executable, tmp, None)
        builds = {"native": unpack(native, tmp / "native"),
                  "release": unpack(release, tmp / "release")}
        best: dict[str, dict[str, float]] = {name: {} for name in builds}
        for round_ in range(args.rounds):
            order = list(builds) if round_ % 2 == 0 else list(reversed(builds))
            for name in order:
                for row, ms in bench(builds[name]).items():
                    best[name][row] = min(ms, best[name].get(row, math.inf))
                print(f"round {round_ + 1}: {name} done", flush=True)
    print(f"native:  {native.name}\nrelease: {release.name}\n")
    print(f"{'structure':34s} {'native ms':>10s} {'release ms':>11s} {'release/native':>15s}")
    ratios = []
    for row, ms_native in best["native"].items():
        ms_release = best["release"][row]
        ratios.append(ms_release / ms_native)
        print(f"{row:34s} {ms_native:10.3f} {ms_release:11.3f} {ratios[-1]:15.2f}")
    print(f"geometric mean of release/native: "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} (best of {args.rounds} "
          f"runs each; below 1: the release build is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
