"""The step solve's Newton matrix, measured: projected (the default), exact, on demand.

Issue 15 asked for a step solve that cannot stall or pick the wrong root on buckling
sheets. This prints, for each choice of Newton's matrix (the hidden `_newton_matrix`):
  - folding sheets as the add-on bakes them (Add > Grid, two corners pinned, error
    control at Accuracy 0.01, 5 substeps at least): ms per frame, steps, rejected steps,
    Newton and Krylov iterations, or the error that stopped the run;
  - the same 33x33 sheet with fixed steps (the seeds' simulate) at rho_inf 0.8: the same,
    and the largest rise of the total energy above its start, as a fraction of m g L;
  - the von Mises truss at half its critical load, one step per 0.5 s under error control:
    whether it stays on its upper, stable branch.
Prints numbers; asserts nothing (docs/performance.md, "The step solve").

    python scripts/bench_step_solve.py [--grids 33 65] [--frames 24]
"""
from __future__ import annotations

import argparse
import math
import time

import mass_spring as ms
from mass_spring import presets

MATRICES = ("projected", "exact", "on_demand")


def folding_sheet(n, matrix, tolerance=0.01, rho=0.5):
    sheet = presets.cloth(n, spacing=1.0 / (n - 1), pins=[0, n - 1])
    mss = ms.build_system(sheet)
    mss.set_integrator("generalized_alpha", rho_inf=rho)
    mss.tolerance = tolerance
    mss._newton_matrix = matrix
    return mss


def energy(mss):
    return mss.energy()


def run_sheet(n, matrix, frames, tolerance, rho):
    mss = folding_sheet(n, matrix, tolerance, rho)
    mass = sum(m.mass for m in mss.masses)
    scale = mass * 9.81 * 1.0  # m g L, L = the sheet's size (1 m)
    start, rise = energy(mss), 0.0
    t0 = time.perf_counter()
    failure = ""
    try:
        for _ in range(frames):
            mss.simulate(1 / 24, 5)
            rise = max(rise, (energy(mss) - start) / scale)
    except ms.SimulationError as error:
        failure = str(error).split(".")[0][:60]
    elapsed = time.perf_counter() - t0
    st = mss.stats
    return (f"{1000 * elapsed / frames:9.1f} {st['steps']:6d} {st['rejected_steps']:5d} "
            f"{st['newton_iterations']:7d} {st['krylov_iterations']:7d} {rise:10.2e}  {failure}")


def truss_stays_up(matrix):
    rise, k, mass = 0.1, 1e4, 1.0
    length = math.hypot(1.0, rise)
    ys = [rise * i / 10000 for i in range(1, 10001)]
    critical = max(2 * k * (length - math.hypot(1, y)) * y / math.hypot(1, y) for y in ys)
    load = 0.52 * critical
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0.0, -load / mass]
    left, right = mss.add(ms.Fix([-1.0, 0.0])), mss.add(ms.Fix([1.0, 0.0]))
    apex = mss.add(ms.Mass(mass, [0.0, rise]))
    mss.add(ms.Spring(length, k, (left, apex), 5.0))
    mss.add(ms.Spring(length, k, (right, apex), 5.0))
    mss.tolerance = 1e-2
    mss._newton_matrix = matrix
    lowest = rise
    for _ in range(10):
        mss.simulate(0.5, 1)
        lowest = min(lowest, mss.masses[0].pos[1])
    return lowest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", type=int, nargs="+", default=[33, 65])
    parser.add_argument("--frames", type=int, default=48)
    args = parser.parse_args()
    head = f"{'matrix':>10} {'case':>26} {'ms/frame':>9} {'steps':>6} {'rej':>5} {'newton':>7} {'krylov':>7} {'E rise/mgL':>10}"
    print(head)
    cases = [(f"{n}^2 folds, Accuracy 0.01", n, 0.01, 0.5) for n in args.grids]
    cases.append(("33^2 folds, fixed, rho 0.8", 33, 0.0, 0.8))
    for label, n, tolerance, rho in cases:
        for matrix in MATRICES:
            print(f"{matrix:>10} {label:>26} {run_sheet(n, matrix, args.frames, tolerance, rho)}", flush=True)
    for matrix in MATRICES:
        print(f"{matrix:>10} von Mises truss: lowest apex height {truss_stays_up(matrix):+.4f} m "
              "(starts at +0.1000; the unstable middle branch is near +0.03)")


if __name__ == "__main__":
    main()
