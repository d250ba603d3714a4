#!/usr/bin/env python3
"""Self-collision against Blender's Cloth, side by side in one process (issue 37).

Four cases, each baked by Cloth (its defaults, quality 5, Self Collision on) and by the
add-on (`bpy.ops.mass_spring.bake()`, Self Collision on, the same distance):

- ribbon: a ribbon standing on end, tilted, 2 cm over a floor with Collision: it falls
  and folds onto itself on the floor;
- dropped: the 33^2 sheet of cloth_side_by_side.py, not pinned, dropped flat from 30 cm
  onto the floor: it never touches itself (what self-collision costs where nothing
  touches: ours is also baked without it, as in the two cases below);
- edge: that sheet pinned along one edge 2 m up, which swings down like a curtain,
  touching itself only where its free edge crumples;
- corners: that sheet pinned at two corners, which folds onto itself as it swings.

Prints milliseconds per frame and the ratios; the numbers go to docs/performance.md. Run
from the project's root with the project's venv (bpy as a module):

    .venv/bin/python scripts/bench_self_collision.py
    .venv/bin/python scripts/bench_self_collision.py --ribbon 10 80 0.025 --frames 72

Ours: total mass 1 kg, 1000 N/m per edge, damping 0.01, as cloth_side_by_side.py. A
ratio below 1 means faster than Cloth. Timings on a shared machine are noisy: compare the
ratios measured in one run, not the times.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def grid_mesh(bpy, name, nx, ny, spacing, plane):
    i, j = np.meshgrid(np.arange(nx), np.arange(ny))
    u, v = i.ravel() * spacing, j.ravel() * spacing
    co = np.stack([u, v, 0 * u] if plane == "XY" else [u, 0 * u, v], 1)
    a = (j[:-1, :-1] * nx + i[:-1, :-1]).ravel()
    quads = np.stack([a, a + 1, a + nx + 1, a + nx], 1)
    me = bpy.data.meshes.new(name)
    me.from_pydata(co.tolist(), [], quads.tolist())
    me.update()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def ribbon(bpy, name, nx, ny, spacing):
    """Standing on end in XZ, tilted 8 degrees about x, its lower edge 2 cm over the floor."""
    ob = grid_mesh(bpy, name, nx, ny, spacing, "XZ")
    ob.location = (-0.5 * (nx - 1) * spacing, 0.0, 0.02)
    ob.rotation_euler = (np.radians(8), 0, 0)
    ob.vertex_groups.new(name="Pins")
    return ob


def sheet(bpy, name, n, pin):
    """Pinned ("edge", "corners") 2 m up, or not pinned ("none") 30 cm over the floor."""
    ob = grid_mesh(bpy, name, n, n, 1.0 / (n - 1), "XY")
    ob.location = (0, 0, 0.3 if pin == "none" else 2)
    pins = {"corners": [0, n - 1], "edge": list(range(n)), "none": []}[pin]
    ob.vertex_groups.new(name="Pins").add(pins, 1.0, 'REPLACE')
    return ob


def floor(bpy):
    bpy.ops.mesh.primitive_plane_add(size=10, location=(0, 0, 0))
    plane = bpy.context.active_object
    plane.name = "Floor"
    plane.modifiers.new("Collision", 'COLLISION')


def time_cloth(bpy, make, frames, distance):
    scene = bpy.context.scene
    ob = make("ClothCase")
    mod = ob.modifiers.new("Cloth", 'CLOTH')
    mod.settings.vertex_group_mass = "Pins"
    mod.point_cache.frame_end = frames
    mod.collision_settings.use_self_collision = True
    mod.collision_settings.self_distance_min = distance
    t = time.perf_counter()
    for f in range(1, frames + 1):
        scene.frame_set(f)
    seconds = (time.perf_counter() - t) / (frames - 1)
    bpy.data.objects.remove(ob)
    scene.frame_set(1)
    return seconds


def time_ours(bpy, make, frames, distance):
    ob = make("MassSpringCase")
    s = ob.mass_spring
    s.enabled = True
    s.pin_group = "Pins"
    s.total_mass, s.stiffness, s.damping = 1.0, 1000.0, 0.01
    s.self_collision = distance > 0
    s.self_collision_distance = distance
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    t = time.perf_counter()
    result = bpy.ops.mass_spring.bake()
    seconds = (time.perf_counter() - t) / (frames - 1)
    bpy.data.objects.remove(ob)
    return seconds if result == {'FINISHED'} else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ribbon", nargs=3, type=float, default=[8, 60, 0.03], metavar=("NX", "NY", "SPACING"))
    p.add_argument("--sheet", type=int, default=33, help="vertices per side of the sheets")
    p.add_argument("--frames", type=int, default=48)
    p.add_argument("--distance", type=float, default=0.015, help="self-collision distance, m (Cloth's default)")
    args = p.parse_args(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else None)

    import bpy
    import bake as headless
    bpy.ops.wm.read_factory_settings(use_empty=True)
    headless.load_addon("repo")
    os.chdir(tempfile.mkdtemp(prefix="bench_self_collision_"))
    nx, ny, spacing = int(args.ribbon[0]), int(args.ribbon[1]), args.ribbon[2]
    print(f"Blender {bpy.app.version_string}; {args.frames} frames; self-collision distance {args.distance} m")
    print(f"{'case':>28} {'cloth ms/frame':>15} {'ours ms/frame':>14} {'ours/cloth':>11}")

    def fresh(frames):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, frames

    fresh(args.frames)
    floor(bpy)
    make = lambda name: ribbon(bpy, name, nx, ny, spacing)  # noqa: E731
    cloth = time_cloth(bpy, make, args.frames, args.distance)
    ours = time_ours(bpy, make, args.frames, args.distance)
    label = f"ribbon {nx}x{ny} folding"
    print(f"{label:>28} {cloth * 1e3:15.1f} {ours * 1e3:14.1f} {ours / cloth:11.2f}", flush=True)

    for pin, what in (("none", "dropped flat"), ("edge", "swinging"), ("corners", "folding")):
        fresh(args.frames)
        if pin == "none":
            floor(bpy)
        make = lambda name: sheet(bpy, name, args.sheet, pin)  # noqa: E731
        cloth = time_cloth(bpy, make, args.frames, args.distance)
        ours = time_ours(bpy, make, args.frames, args.distance)
        without = time_ours(bpy, make, args.frames, 0.0)
        label = f"sheet {args.sheet}^2 {pin} {what}"
        print(f"{label:>28} {cloth * 1e3:15.1f} {ours * 1e3:14.1f} {ours / cloth:11.2f}   "
              f"ours with/without self-collision {ours / without:.2f} ({without * 1e3:.1f} ms without)", flush=True)

if __name__ == "__main__":
    main()
