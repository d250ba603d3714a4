"""Live preview against the bake, per frame, on one sheet (issue 39).

Plays the frames of a sheet in order with Live Preview on (each frame change computes one
frame and shows it, as Blender's timeline does; the evaluated mesh is read back each
frame, as a viewport draws it), then bakes the same sheet, and prints milliseconds per
frame for both, their ratio and the frames per second the preview plays at. Timings on a
shared machine are noisy: compare the ratio.

    .venv/bin/python scripts/bench_live.py [--grid 33] [--frames 48] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import addon_loader  # noqa: E402
import bpy  # noqa: E402


def sheet(scene, n: int):
    from mass_spring import presets
    cloth = presets.cloth(n, n, spacing=1.0 / (n - 1))
    mesh = bpy.data.meshes.new("Sheet")
    mesh.from_pydata([tuple(p) for p in cloth.positions], [], [tuple(f) for f in cloth.faces])
    obj = bpy.data.objects.new("Sheet", mesh)
    obj.location = (0.0, 0.0, 1.0)
    scene.collection.objects.link(obj)
    group = obj.vertex_groups.new(name="Pins")
    group.add([0, n - 1], 1.0, 'REPLACE')
    s = obj.mass_spring
    s.enabled, s.pin_group, s.stiffness = True, "Pins", 1000.0
    return obj


def shown(obj) -> np.ndarray:
    mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=int, default=33)
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    addon_loader.register_addon("repo")
    bake = addon_loader.addon_module("bake", "repo")
    live_ms, bake_ms = [], []
    for _ in range(args.rounds):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end, scene.frame_current = 1, args.frames, 1
        obj = sheet(scene, args.grid)
        obj.mass_spring.live_preview = True
        begin = time.perf_counter()
        for frame in range(2, args.frames + 1):
            scene.frame_set(frame)
            shown(obj)
        live_ms.append((time.perf_counter() - begin) * 1000 / (args.frames - 1))
        obj.mass_spring.live_preview = False
        begin = time.perf_counter()
        bake.bake_object(scene, obj)
        bake_ms.append((time.perf_counter() - begin) * 1000 / (args.frames - 1))
    live, baked = min(live_ms), min(bake_ms)
    print(f"{args.grid}^2 sheet, {args.frames} frames, best of {args.rounds}: live {live:.1f} ms per frame "
          f"({1000 / live:.0f} frames per second), bake {baked:.1f} ms per frame, live/bake {live / baked:.2f}")


if __name__ == "__main__":
    main()
