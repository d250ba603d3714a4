"""Speed of the compiled core: ms per step on the seeds' structures and on square grids.

Prints numbers; it asserts nothing (timings on shared machines are noisy: compare the
ratios measured in one run). The course's reference code needs 116 ms per step for the
100-mass chain and 1530 ms per step for the 20x10 braced bridge (dense matrices).

    python scripts/bench_core.py [--quick] [--folding]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import mass_spring as ms
from mass_spring import presets


def chain(n=100):
    """n masses of 1 kg in a horizontal line from a pin, 1 m apart, springs of 1000 N/m."""
    structure = presets.chain(n=n, spacing=1.0, angle=90.0, mass=1.0, stiffness=1000.0)
    return ms.build_system(structure)


def bridge(W=20, H=10, k=1000.0):
    """The seeds' braced bridge: W x H lattice, both diagonals, fixed at the two top ends."""
    structure = presets.bridge(width=W, height=H, spacing=1.0, cross=True, mass=0.2,
                               stiffness=k, damping=0.0, pins="corners")
    return ms.build_system(structure)


def grid_structure(n, total_mass=1.0, k=2000.0, pinned="corners"):
    """n x n hanging cloth of ``presets.cloth`` with structural and shear springs, the two
    top corners pinned (or, with pinned="edge", the whole top edge: a curtain)."""
    top = np.arange((n - 1) * n, n * n)
    pins = top[[0, -1]] if pinned == "corners" else top
    return presets.cloth(n, n, spacing=1.0 / (n - 1), plane="XZ", pins=pins,
                         total_mass=total_mass, stiffness=k, shear_stiffness=k, damping=0.01)


def grid(n, total_mass=1.0, k=2000.0, pinned="corners"):
    """The system of `grid_structure`."""
    return ms.build_system(grid_structure(n, total_mass, k, pinned))


def ms_per_step(make, h, steps, per_call=1, repeats=3):
    """Best of `repeats` runs, each on a fresh system from make(): the machine's noise only
    ever adds time. Returns (ms per step, the last run's system)."""
    best = float("inf")
    for _ in range(repeats):
        mss = make()
        mss.simulate(h, 1)  # pattern analysis, first factorization, consistent start
        t0 = time.perf_counter()
        for _ in range(steps // per_call):
            mss.simulate(h * per_call, per_call)
        best = min(best, 1e3 * (time.perf_counter() - t0) / steps)
    return best, mss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--big", action="store_true",
                    help="also 257x257 with multigrid (about a minute): the scaling once "
                         "every level's data has left the CPU cache")
    ap.add_argument("--curtain", action="store_true",
                    help="also a 129x129 sheet pinned along its top edge, step by step for "
                         "0.1 s: time, Newton iterations, halvings (about 20 s)")
    ap.add_argument("--folding", action="store_true",
                    help="also folding sheets as the add-on builds them, 33x33 and 129x129, "
                         "at its defaults, with shear and with bending springs (issue 15's "
                         "growth, the core alone; about two minutes)")
    ap.add_argument("--write-docs", action="store_true",
                    help="also write the table into docs/performance.md (section bench_core)")
    args = ap.parse_args()
    table = ["| structure | unknowns | ms per step (direct / multigrid) | Newton iterations per "
             "step | the course's reference code |", "|---|---|---|---|---|"]
    steps = 50 if args.quick else 200
    grid_steps = 12 if args.quick else 24
    h = 1.0 / 120.0  # 24 fps, 5 substeps

    print("structure                      unknowns   ms/step   (reference code)")
    for name, make, ref in (("chain, 100 masses", chain, 116),
                            ("bridge 20x10, 712 springs", bridge, 1530)):
        t, mss = ms_per_step(make, h, steps)
        print(f"{name:30s} {mss.num_unknowns:8d} {t:9.3f}   ({ref} ms)")
        table.append(f"| {name} | {mss.num_unknowns} | {t:.3f} | "
                     f"{newton_per_step(mss):.1f} | {ref} ms |")

    # Square grids with each preconditioner of Newton's linear systems ("auto" picks
    # multigrid from ms.MULTIGRID_MIN_MASSES masses on, for systems without rods), hanging
    # from their two top corners and from their whole top edge (a curtain). The corner
    # grids get harder with n: the same weight hangs from two points while the springs get
    # shorter, so the corner springs stretch more. The curtain's strains do not depend on n.
    exponents = []
    for pinned in ("corners", "edge"):
        sizes, times = [], {"direct": [], "multigrid": []}
        for n in (33, 65, 129):
            sizes.append(n * n)
            newton = {}
            for solver in times:
                def make():
                    mss = grid(n, pinned=pinned)
                    mss.linear_solver = solver
                    return mss
                # The same simulated time on every grid (0.1 s, or 0.2 s without --quick):
                # how hard a step is changes as the sheet falls.
                t, mss = ms_per_step(make, h, grid_steps, per_call=grid_steps // 2)
                times[solver].append(t)
                st = mss.stats
                print(f"grid {n}x{n} {pinned:7s} {solver:9s} {mss.num_unknowns:8d} {t:9.3f}   "
                      f"{st['factorizations']} factorizations/setups "
                      f"({1e3 * st['factor_seconds']:.0f} ms), {st['krylov_iterations']} "
                      f"GMRES iterations, solves {1e3 * st['solve_seconds']:.0f} ms, over "
                      f"{st['steps']} steps", flush=True)
                newton[solver] = newton_per_step(mss)
            table.append(f"| {n}×{n} sheet, structural + shear springs, {PINNED[pinned]} | "
                         f"{mss.num_unknowns} | {times['direct'][-1]:.2f} / "
                         f"{times['multigrid'][-1]:.2f} | {newton['direct']:.1f} / "
                         f"{newton['multigrid']:.1f} | – |")
        auto = [times["multigrid" if s >= ms.MULTIGRID_MIN_MASSES else "direct"][i]
                for i, s in enumerate(sizes)]
        for name, t in (*times.items(), ("auto", auto)):
            slope = np.polyfit(np.log(sizes), np.log(t), 1)[0]
            print(f"growth exponent of time per step in vertex count, {pinned}, {name}: "
                  f"{slope:.2f} (1 = linear)")
            exponents.append(f"{PINNED[pinned]}, {name}: n^{slope:.2f}")
        if pinned == "corners":
            corner_multigrid_129 = times["multigrid"][-1]
    if args.big:
        def make():
            mss = grid(257)
            mss.linear_solver = "multigrid"
            return mss
        # the same steps as the smaller grids, so that the exponent compares like with like
        t, mss = ms_per_step(make, h, grid_steps, per_call=grid_steps // 2, repeats=1)
        print(f"grid 257x257 multigrid {mss.num_unknowns:8d} {t:9.3f}   "
              f"{mss.stats['krylov_iterations']} GMRES iterations over {mss.stats['steps']} "
              f"steps")
        slope = np.log(t / corner_multigrid_129) / np.log(257**2 / 129**2)
        print(f"growth exponent from 129x129 to 257x257, multigrid: {slope:.2f}")
        table.append(f"| 257×257 sheet, {PINNED['corners']} | {mss.num_unknowns} | – / {t:.1f} | "
                     f"– / {newton_per_step(mss):.1f} | – |")
        exponents.append(f"129² to 257², {PINNED['corners']}, multigrid: n^{slope:.2f}")
    if args.curtain:
        curtain(h)
    if args.folding:
        folding_growth()
    if args.write_docs:
        import perf_doc
        window = f"{grid_steps} steps of 1/120 s ({grid_steps / 120:.1f} s of falling from rest)"
        lines = table + ["", f"Sheets: best of three runs, {window}. Growth of the time per "
                         "step with the vertex count from 33² to 129²: "
                         + "; ".join(exponents) + "."]
        print(f"wrote {perf_doc.record_section('bench_core', lines)}")


PINNED = {"corners": "hanging from 2 corners", "edge": "hanging from its top edge"}


# The settings of issue 15's table: the add-on's defaults, shear springs, bending springs.
FOLDING_SETTINGS = {"defaults": {}, "shear 1000": {"shear_stiffness": 1000.0},
                    "bending 100": {"bending_stiffness": 100.0}}


def folding_sheet(n, pinned, **springs):
    """The sheet of ../shared/bench/cloth_side_by_side.py as the add-on builds it with its
    defaults: 1 m, 1 kg, structural springs of 1000 N/m (and `springs`: shear_stiffness,
    bending_stiffness), lying flat, pinned at the two corners of one side or along that
    side, generalized-alpha (rho_inf 0.5) under error control (Accuracy 0.01)."""
    pins = [0, n - 1] if pinned == "corners" else list(range(n))
    mss = ms.build_system(presets.cloth(n, n, spacing=1.0 / (n - 1), pins=pins, total_mass=1.0,
                                        stiffness=1000.0, damping=0.01, **springs))
    mss.set_integrator("generalized_alpha", rho_inf=0.5)
    mss.tolerance = 0.01
    return mss


def folding_growth(repeats=3, fps=24, substeps=5):
    """Issue 15's growth measure for the core alone: ms per frame of folding sheets at 33²
    (25 frames) and 129² (13 frames, as cloth_side_by_side.py), best of `repeats`, and the
    exponent of the growth in the vertex count between them, for the six sheets of the
    issue's table."""
    for setting, springs in FOLDING_SETTINGS.items():
        for pinned in ("corners", "edge"):
            best = {}
            for n, frames in ((33, 25), (129, 13)):
                best[n] = float("inf")
                for _ in range(repeats):
                    mss = folding_sheet(n, pinned, **springs)
                    t0 = time.perf_counter()
                    for _ in range(frames - 1):
                        mss.simulate(1.0 / fps, substeps)
                    best[n] = min(best[n], 1e3 * (time.perf_counter() - t0) / (frames - 1))
                st = mss.stats
                print(f"folding {n}x{n} {pinned:7s} {setting:11s} {best[n]:8.1f} ms/frame   "
                      f"{st['steps']} steps, {st['newton_iterations']} Newton, "
                      f"{st['krylov_iterations']} GMRES iterations, {st['factorizations']} setups",
                      flush=True)
            slope = np.log(best[129] / best[33]) / np.log(129**2 / 33**2)
            print(f"growth exponent of folding sheets from 33x33 to 129x129, {pinned}, {setting}: "
                  f"{slope:.3f}", flush=True)


def newton_per_step(mss) -> float:
    st = mss.stats
    return st["newton_iterations"] / max(st["steps"], 1) if "newton_iterations" in st else float("nan")


def curtain(h, n=129, steps=12):
    mss = grid(n, pinned="edge")
    before = mss.stats
    for i in range(steps):
        t0 = time.perf_counter()
        mss.simulate(h, 1)
        st = mss.stats
        print(f"curtain {n}x{n} step {i}: {time.perf_counter() - t0:7.2f} s, "
              f"{mss.last_newton_iterations} Newton iterations, "
              f"{st['halved_steps'] - before['halved_steps']} halvings, "
              f"{st['krylov_iterations'] - before['krylov_iterations']} GMRES iterations",
              flush=True)
        before = st

if __name__ == "__main__":
    main()
