#!/usr/bin/env python3
"""Record an add-on bake's core inputs, and replay them on the core alone: for measuring a
change to the solver on exactly what the add-on bakes, without Blender in the loop.

    # record (needs bpy): the scene of a .blend, or a built-in case
    .venv/bin/python scripts/replay_bake.py record --blend scene.blend --object Cloth out.pkl
    .venv/bin/python scripts/replay_bake.py record --case ball33 out.pkl
    # replay (no bpy): ms per frame and the solver's counts
    .venv/bin/python scripts/replay_bake.py replay out.pkl
    .venv/bin/python scripts/replay_bake.py replay out.pkl --spread 5 --core build_a build_b

A replay makes the same steps, Newton and Krylov iterations as the bake it recorded
(tests/test_replay_bake.py). Folding and landing sheets are chaotic: a change of the
tolerance by 1e-4 of itself moves their counts by 2-8 % (docs/performance.md, "Measuring a
change"). `--spread N` replays at N tolerances within 3e-4 of the bake's and prints the
median and range of each count, so that two builds (`--core DIR ...`, each a folder
holding a `mass_spring` package, each replay in a fresh process, the builds in turns) are
compared on their spread rather than on one chaotic run. Without `--core` the replays run
in one process after an untimed first one (a process's first replay is slower). Prints
numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time

# numpy's OpenBLAS threads spin after the recording is loaded and take a core from the
# core's workers during a timed replay (docs/performance.md, "Inelastic impulses before
# the step"): one BLAS thread, before numpy starts them. Replays in fresh processes
# inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the BLAS setting)

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
COUNTS = ("steps", "rejected_steps", "newton_iterations", "krylov_iterations")
CASES = {"ball33": 33, "ball65": 65}  # scripts/bench_contact.py's sheet onto a ball
# Tolerance factors of a spread: the bake's first, then pairs around it.
SPREAD = (1.0, 1.0001, 0.9999, 1.0003, 0.9997, 1.0002, 0.9998)


# ---------------------------------------------------------------- recording (bpy)

def record_bake(simulation_module, bake) -> dict:
    """Runs bake() (which bakes one object through the add-on) and returns what the core
    was given: the structures, the solver's settings, and per frame the pins' positions
    and the colliders where they move. The add-on's functions are wrapped only while
    bake() runs."""
    sim = simulation_module
    core = sim.import_core()
    rec: dict = {"frames": []}
    build_system, init, step = core.build_system, sim.FrameSimulation.__init__, sim.FrameSimulation.step

    def recording_build_system(structures, **kw):
        rec["structures"], rec["build"] = structures, kw
        return build_system(structures, **kw)

    def recording_init(self, *args, **kw):
        if "solver" in rec:
            raise RuntimeError("replay_bake records one simulation at a time")
        init(self, *args, **kw)
        rec["solver"] = (sim.INTEGRATORS[self.solver.integrator], self.solver.rho_inf,
                         self.solver.accuracy, self.solver.substeps, self.dt)
        rec["colliders"] = None if self.colliders is None else self._replay_colliders(0)

    def recording_step(self, stop=None):
        k = self.frames_done
        step(self, stop)
        moving = self.colliders is not None and self.colliders.moving
        rec["frames"].append({"fix_positions": np.array(self.mss.fix_positions, dtype=np.float64),
                              "colliders": self._replay_colliders(k) if moving else None})
        rec["stats"] = {key: self.mss.stats[key] for key in COUNTS}
        rec["positions"] = self.mss.vertex_positions().copy()

    def replay_colliders(self, k):
        c = self.colliders
        return (c.vertices(k) - self.origin, c.triangles, c.thickness, c.friction)

    core.build_system = recording_build_system
    sim.FrameSimulation.__init__, sim.FrameSimulation.step = recording_init, recording_step
    sim.FrameSimulation._replay_colliders = replay_colliders
    try:
        result = bake()
    finally:
        core.build_system = build_system
        sim.FrameSimulation.__init__, sim.FrameSimulation.step = init, step
        del sim.FrameSimulation._replay_colliders
    if "solver" not in rec:
        raise SystemExit(f"the bake did not run ({result})")
    return rec


def record(args) -> None:
    import bpy
    out = os.path.abspath(args.out)  # before --case moves to a scratch folder
    if args.blend and args.case:
        raise SystemExit("record: give --blend or --case, not both")

    import bake as headless  # scripts/bake.py: the add-on from the repo
    simulation = headless.addon_module("simulation", "repo")
    if args.blend:
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend))
        if args.object and args.object not in bpy.data.objects:
            raise SystemExit(f"record: {args.blend} has no object '{args.object}'")
        obj = bpy.data.objects[args.object] if args.object else next(
            (o for o in bpy.data.objects if o.type == 'MESH' and o.mass_spring.enabled), None)
        if obj is None:
            raise SystemExit(f"record: {args.blend} has no mesh with Mass–Spring enabled: give --object")
    elif args.case in CASES:
        import bench_contact
        os.chdir(__import__("tempfile").mkdtemp(prefix="replay_bake_"))
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, args.frames
        bench_contact.ball(bpy)
        obj = bench_contact.sheet(bpy, CASES[args.case], "Sheet")
        s = obj.mass_spring
        s.enabled, s.total_mass, s.stiffness, s.damping = True, 1.0, 1000.0, 0.01
    else:
        raise SystemExit(f"record: give --blend or --case ({', '.join(CASES)})")
    for o in bpy.context.selected_objects:
        o.select_set(False)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    results = []
    rec = record_bake(simulation, lambda: results.append(bpy.ops.mass_spring.bake()))
    if results != [{'FINISHED'}]:
        raise SystemExit(f"record: the bake of '{obj.name}' did not finish ({results}): nothing written")
    with open(out, "wb") as f:
        pickle.dump(rec, f)
    print(f"recorded {len(rec['frames'])} frames of '{obj.name}': {rec['stats']}")


# ---------------------------------------------------------------- replaying (core only)

def replay_once(rec: dict, tolerance_factor: float = 1.0):
    """The recorded bake run on the core: (seconds in simulate(), stats, end positions)."""
    import mass_spring as ms
    integrator, rho_inf, accuracy, substeps, dt = rec["solver"]
    mss = ms.build_system(rec["structures"], **rec["build"])
    mss.set_integrator(integrator, rho_inf=rho_inf)
    mss.tolerance = accuracy * tolerance_factor
    if rec["colliders"] is not None:
        mss.set_colliders(*rec["colliders"])
        mss.move_out_of_colliders()
    seconds = 0.0
    for frame in rec["frames"]:
        if len(frame["fix_positions"]):
            mss.fix_positions = frame["fix_positions"]
        if frame["colliders"] is not None:
            mss.set_colliders(*frame["colliders"])
        begin = time.perf_counter()
        mss.simulate(dt, substeps)
        seconds += time.perf_counter() - begin
    return seconds, {key: mss.stats[key] for key in COUNTS}, mss.vertex_positions()


def spread_rows(rec: dict, factors) -> list:
    """One row per tolerance factor: [ms per frame, *COUNTS]."""
    rows = []
    for factor in factors:
        seconds, stats, _ = replay_once(rec, factor)
        rows.append([1000 * seconds / len(rec["frames"]), *(stats[k] for k in COUNTS)])
    return rows


def summary(rows: list) -> str:
    columns = list(zip(*rows))
    parts = [f"{statistics.median(columns[0]):8.2f} ms/frame ({min(columns[0]):.2f}-{max(columns[0]):.2f})"]
    for name, values in zip(COUNTS, columns[1:]):
        parts.append(f"{name.split('_')[0]} {statistics.median(values):g} ({min(values)}-{max(values)})")
    return ", ".join(parts)


def replay(args) -> None:
    if not args.core:
        for path in args.recordings:
            with open(path, "rb") as f:
                rec = pickle.load(f)
            if not args.rows:
                replay_once(rec)  # untimed: a process's first replay is slower
            factors = SPREAD[args.factor_index:args.factor_index + 1] if args.rows else SPREAD[:args.spread]
            rows = spread_rows(rec, factors)
            if args.rows:
                import mass_spring
                print(mass_spring.__file__, pickle.dumps(rows).hex())
            else:
                print(f"{os.path.basename(path)}: {summary(rows)}; the bake: {rec.get('stats')}")
        return
    # Builds in turns, a process each (a module is loaded once per process), one tolerance
    # factor at a time, so that the machine's drift falls on every build alike.
    rows = {(path, core): [] for path in args.recordings for core in args.core}
    for run in range(args.spread):
        for path in args.recordings:
            for core in args.core:
                folder = os.path.abspath(core)
                env = {**os.environ, "PYTHONPATH": folder}
                child = subprocess.run([sys.executable, __file__, "replay", path, "--rows", "--spread", "1",
                                        "--factor-index", str(run)], env=env, capture_output=True, text=True)
                if child.returncode != 0:
                    raise SystemExit(f"replay with --core {core} failed:\n{child.stderr}")
                where, rows_hex = child.stdout.split()[-2:]
                # A folder without mass_spring would fall through to the installed build.
                if not os.path.realpath(where).startswith(os.path.realpath(folder) + os.sep):
                    raise SystemExit(f"--core {core}: that folder holds no mass_spring package "
                                     f"(the replay imported {where})")
                rows[(path, core)] += pickle.loads(bytes.fromhex(rows_hex))
    for (path, core), r in rows.items():
        print(f"{os.path.basename(path)} {core}: {summary(r)}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="bake through the add-on (bpy) and keep the core's inputs")
    r.add_argument("out")
    r.add_argument("--blend", help="a .blend whose object to bake")
    r.add_argument("--object", help="the object's name (default: the first enabled mesh)")
    r.add_argument("--case", choices=sorted(CASES), help="a built-in scene")
    r.add_argument("--frames", type=int, default=25, help="--case: frames, the first included")
    q = sub.add_parser("replay", help="run recordings on the core alone")
    q.add_argument("recordings", nargs="+")
    q.add_argument("--spread", type=int, default=1, help=f"tolerances to run each at (1-{len(SPREAD)})")
    q.add_argument("--core", nargs="+", help="folders holding a mass_spring package, compared in turns")
    q.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)
    q.add_argument("--factor-index", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.command == "record":
        record(args)
        return
    if not 1 <= args.spread <= len(SPREAD):
        raise SystemExit(f"--spread must lie in 1..{len(SPREAD)}")
    replay(args)


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else None)
