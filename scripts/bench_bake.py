#!/usr/bin/env python3
"""Benchmark of the add-on's bake: a 129×129 grid (16 641 vertices), 250 frames.

    python scripts/bench_bake.py                   # needs the bpy module and the core
    python scripts/bench_bake.py --frames 50 --output PC2
    python scripts/bench_bake.py --memory --frames 3
    blender -b --python-exit-code 1 --python scripts/bench_bake.py -- --frames 50

Prints the time spent writing the bake (the requirement: at most 2 s for 250 frames of
this grid) and the total bake time per frame (simulation + write). Exit code 1 with
--check when the write takes longer than the limit.

--memory prints the numpy memory the bake holds instead (the requirement: at most 60 MB
of frames for 250 frames of this grid), measured with tracemalloc, which traces numpy's
buffers but not the core's or Blender's own memory.

The add-on is loaded from the repo folder (or used as installed if it already is).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WRITE_LIMIT_SECONDS = 2.0
FRAMES_LIMIT_MB = 60.0  # frames held by a 250-frame bake of the 129×129 grid


def build_grid(args, size: float = 1.0):
    """``presets.cloth``: args.grid × args.grid vertices in a horizontal square of `size`
    metres, quads, the two corners of one side pinned, enabled with the bench's settings."""
    import scenes
    from mass_spring import presets
    n = args.grid
    cloth = presets.cloth(n, n, spacing=size / (n - 1), pins=[0, n - 1], total_mass=1.0,
                          stiffness=args.stiffness, shear_stiffness=args.shear_stiffness,
                          damping=0.01)
    obj = scenes.structure_object("BenchGrid", cloth, location=(0.0, 0.0, 2.0))
    return scenes.configure(obj, substeps=args.substeps, output=args.output)


def write_only(bpy, package, scene, obj, args) -> int:
    """Time the write path of the bake (world → local, shape keys or PC2 + modifier) on a
    synthetic wave, for when the physics would take too long to wait for."""
    import numpy as np
    writers = importlib.import_module(package.__name__ + ".writers")
    simulation = importlib.import_module(package.__name__ + ".simulation")
    mesh_arrays = importlib.import_module(package.__name__ + ".mesh_arrays")
    local = mesh_arrays.vertex_positions(obj.data)
    matrix = np.array(obj.matrix_world)
    world0 = simulation.transform_points(matrix, local)
    frames = np.arange(1, args.frames + 1)
    t = (frames - 1)[:, None] / 24.0
    world = np.repeat(world0[None], len(frames), axis=0)
    world[:, :, 2] += 0.1 * np.sin(2 * np.pi * (t - world0[None, :, 0]))
    matrices = np.repeat(matrix[None], len(frames), axis=0)
    begin = time.perf_counter()
    positions = simulation.world_to_local(world, matrices)
    if args.output == "PC2":
        path = bpy.path.abspath("//bench.pc2")
        writers.write_pc2(path, 1, positions)
        record = writers.add_mesh_cache(obj, "//bench.pc2", 1)
    else:
        record = writers.write_shape_keys(obj, frames, positions)
    writers.commit(obj, record, None)
    seconds = time.perf_counter() - begin
    print(f"write:    {seconds:.3f} s for {len(frames)} frames of synthetic motion "
          f"({seconds / len(frames) * 1000:.2f} ms/frame; limit {WRITE_LIMIT_SECONDS:g} s "
          f"{'OK' if seconds <= WRITE_LIMIT_SECONDS else 'EXCEEDED'})")
    scene.frame_set(100 if len(frames) >= 100 else len(frames))
    shown = np.empty(len(local) * 3, np.float32)
    obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.vertices.foreach_get("co", shown)
    error = np.abs(shown.reshape(-1, 3) - positions[scene.frame_current - 1]).max()
    print(f"check:    frame {scene.frame_current} plays back with max error {error:.1e}")
    return 1 if args.check and seconds > WRITE_LIMIT_SECONDS else 0


def memory(bake, scene, obj, args) -> int:
    """Bake the grid and print the numpy memory the bake held: the frame buffer grows
    with the frame count, so a few frames and the buffer's size at --full-frames tell
    what a full bake holds without waiting for it."""
    import tracemalloc

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = bake.bake_object(scene, obj)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    frames, points, _ = result.local_positions.shape
    buffer_mb = result.local_positions.nbytes / 1e6
    full_mb = buffer_mb * args.full_frames / frames
    print(f"memory:   frame buffer {frames} × {points} × 3 {result.local_positions.dtype} = "
          f"{buffer_mb:.1f} MB; numpy peak during the bake {peak / 1e6:.1f} MB (tracemalloc)")
    print(f"          at {args.full_frames} frames the buffer is {full_mb:.1f} MB "
          f"(limit {FRAMES_LIMIT_MB:g} MB {'OK' if full_mb <= FRAMES_LIMIT_MB else 'EXCEEDED'}); "
          f"peak minus buffer {(peak - result.local_positions.nbytes) / 1e6:.1f} MB")
    return 0


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=int, default=129, help="vertices per side (129)")
    parser.add_argument("--frames", type=int, default=250, help="frames to bake (250)")
    parser.add_argument("--substeps", type=int, default=5,
                        help="integrator steps per frame (5, like Cloth's default quality)")
    parser.add_argument("--stiffness", type=float, default=1000.0, help="N/m per edge (1000)")
    parser.add_argument("--shear-stiffness", type=float, default=0.0,
                        help="N/m of the springs across quad diagonals (0: none, the default)")
    parser.add_argument("--output", choices=("SHAPE_KEYS", "PC2"), default="SHAPE_KEYS")
    parser.add_argument("--write-only", action="store_true",
                        help="skip the physics: time only the writing of synthetic motion")
    parser.add_argument("--memory", action="store_true",
                        help="print the numpy memory the bake holds (use few --frames)")
    parser.add_argument("--full-frames", type=int, default=250,
                        help="frame count --memory extrapolates the frame buffer to (250)")
    parser.add_argument("--accuracy", type=float, default=None,
                        help="the bake's error control (default: the panel's; 0: fixed steps)")
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the numbers into docs/performance.md (section bench_bake)")
    parser.add_argument("--check", action="store_true",
                        help=f"exit 1 if writing takes more than {WRITE_LIMIT_SECONDS:g} s")
    args = parser.parse_args(argv)

    import bpy
    sys.path.insert(0, str(REPO / "scripts"))
    import addon_loader
    package = addon_loader.register_addon("auto")
    bake = importlib.import_module(package.__name__ + ".bake")

    bpy.ops.wm.read_factory_settings(use_empty=True)
    package = addon_loader.register_addon("auto")  # again: factory settings disable an installed one
    workdir = tempfile.mkdtemp(prefix="msb_bench_")  # the .blend (for '//' paths) and PC2 file
    atexit.register(shutil.rmtree, workdir, True)
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(workdir, "bench.blend"))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, args.frames
    obj = build_grid(args)
    if args.accuracy is not None:
        obj.mass_spring.accuracy = args.accuracy

    print(f"bench_bake: {len(obj.data.vertices)} vertices, {len(obj.data.edges)} edges, "
          f"{args.frames} frames, {args.substeps} substep(s), shear stiffness "
          f"{args.shear_stiffness:g}, output {args.output}, "
          f"Blender {bpy.app.version_string}", flush=True)
    if args.write_only:
        return write_only(bpy, package, scene, obj, args)
    if args.memory:
        return memory(bake, scene, obj, args)
    begin = time.perf_counter()
    last = [begin]

    def progress(frame, done, total):
        now = time.perf_counter()
        if now - last[0] > 5.0:
            last[0] = now
            print(f"  frame {frame}: {done}/{total} simulated, {(now - begin) / max(done, 1) * 1000:.0f} ms/frame",
                  flush=True)

    result = bake.bake_object(scene, obj, progress=progress)
    total = time.perf_counter() - begin
    frames = result.frame_count
    print(f"simulate: {result.simulate_seconds:.2f} s ({result.simulate_seconds / (frames - 1) * 1000:.1f} ms/frame)")
    print(f"write:    {result.write_seconds:.3f} s for {frames} frames "
          f"({result.write_seconds / frames * 1000:.2f} ms/frame; limit {WRITE_LIMIT_SECONDS:g} s "
          f"{'OK' if result.write_seconds <= WRITE_LIMIT_SECONDS else 'EXCEEDED'})")
    print(f"total:    {total:.2f} s ({total / frames * 1000:.1f} ms/frame)")

    # Playback cost of the result.
    t = time.perf_counter()
    for frame in range(1, min(frames, 50) + 1):
        scene.frame_set(frame)
        bpy.context.evaluated_depsgraph_get()
    playback = (time.perf_counter() - t) / min(frames, 50) * 1000
    print(f"playback: {playback:.2f} ms/frame")
    totals = result.totals()
    print(f"solver:   {totals['substeps'] / (frames - 1):.1f} steps/frame, "
          f"{totals['newton_iterations'] / max(totals['substeps'], 1):.1f} Newton iterations/step, "
          f"{totals['linear_iterations'] / max(totals['newton_iterations'], 1):.1f} linear "
          "iterations/Newton iteration")
    if args.write_docs:
        import perf_doc
        lines = [
            f"The add-on's bake of a {args.grid}×{args.grid} grid ({len(obj.data.vertices)} "
            f"vertices) released flat, pinned at two corners, {frames} frames, "
            f"{args.substeps} (minimum) substeps, accuracy {obj.mass_spring.accuracy:g}, "
            f"output {args.output}, Blender {bpy.app.version_string}:",
            "",
            "| part | time |", "|---|---|",
            f"| simulate | {result.simulate_seconds / (frames - 1) * 1000:.1f} ms/frame "
            f"({totals['substeps'] / (frames - 1):.1f} steps, "
            f"{totals['newton_iterations'] / max(totals['substeps'], 1):.1f} Newton iterations "
            "per step) |",
            f"| write | {result.write_seconds:.3f} s for {frames} frames |",
            f"| playback | {playback:.2f} ms/frame |",
        ]
        print(f"wrote {perf_doc.record_section('bench_bake', lines)}")
    if args.check and result.write_seconds > WRITE_LIMIT_SECONDS:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
