"""Workers against time: the folding sheets of cloth_side_by_side.py baked by the core on
1, 2, ... workers (mass_spring.set_num_threads), with wall and CPU time of each run.

    .venv/bin/python scripts/bench_threads.py [--sizes 65 129] [--workers 1 2] [--repeats 3]

The work is the same on any number of workers (the same steps, Newton and GMRES
iterations, the same bits: tests/test_core_parallel.py), so the times compare the
parallel loops alone. CPU time is the process's, all threads: a worker that spun while
idle would show as CPU time beyond the wall time's share. Prints numbers; no pass/fail.
"""
import argparse
import time

import numpy as np

import mass_spring as ms
from bench_core import folding_sheet


def bake(n: int, frames: int = 13, fps: int = 24, substeps: int = 5):
    """Wall and CPU seconds of `frames` - 1 frames of the corner-pinned folding sheet."""
    mss = folding_sheet(n, "corners")
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(frames - 1):
        mss.simulate(1.0 / fps, substeps)
    return time.perf_counter() - wall, time.process_time() - cpu, mss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[65, 129])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()
    print(f"usable cores: {ms.usable_cores()}")
    for n in args.sizes:
        base = None
        for workers in args.workers:
            ms.set_num_threads(workers)
            runs = [bake(n) for _ in range(args.repeats)]
            wall, cpu, mss = min(runs, key=lambda r: r[0])
            st = mss.stats
            base = base or (wall, cpu, np.array(mss.positions))
            same = np.array_equal(base[2], mss.positions)
            print(f"{n}x{n} {workers} workers: wall {wall:6.2f} s ({wall / base[0]:.2f}x of the first), "
                  f"CPU {cpu:6.2f} s ({cpu / base[1]:.2f}x), CPU/wall {cpu / wall:.2f}; "
                  f"{st['steps']} steps, {st['newton_iterations']} Newton, "
                  f"{st['krylov_iterations']} GMRES; same bits: {same}", flush=True)


if __name__ == "__main__":
    main()
