#!/usr/bin/env python3
"""Mass–Spring Baker against Blender's Cloth on a sheet draped over a ball, in one process.

The contact case of ../shared/bench/cloth_side_by_side.py: an N x N sheet (1 m square,
quads, nothing pinned) falls from 15 cm above a UV sphere of radius 0.3 m that has
Physics ▸ Collision (thickness 0.02 m, the default). Blender's Cloth (its defaults,
quality 5, collisions with objects on) is timed by stepping the frames; the same sheet is
then baked by the add-on (`bpy.ops.mass_spring.bake()`, the add-on's defaults unless
--set says otherwise: total mass 1 kg, 1000 N/m per edge, damping 0.01). Prints
milliseconds per frame for both, their ratio, and for ours the deepest any vertex got
into the ball's thickness. Timings on a shared machine are noisy: compare the ratio.

    .venv/bin/python scripts/bench_contact.py                   # 33 and 65, 49 frames
    .venv/bin/python scripts/bench_contact.py --grid 65 --frames 25 --set shear_stiffness=1000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPTS)

RADIUS, THICKNESS, DROP = 0.3, 0.02, 0.15


def sheet(bpy, n, name):
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    co = np.stack([i.ravel() / (n - 1) - 0.5, j.ravel() / (n - 1) - 0.5, np.zeros(n * n)], 1)
    a = (j[:-1, :-1] * n + i[:-1, :-1]).ravel()
    quads = np.stack([a, a + 1, a + n + 1, a + n], 1)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(co.tolist(), [], quads.tolist())
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = (0, 0, RADIUS + DROP)
    return obj


def ball(bpy):
    bpy.ops.mesh.primitive_uv_sphere_add(segments=32, ring_count=16, radius=RADIUS)
    obj = bpy.context.object
    obj.modifiers.new("Collision", 'COLLISION')
    obj.collision.thickness_outer = THICKNESS
    return obj


def parse_value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def run_case(bpy, n, frames, settings):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    ball(bpy)
    cloth_obj = sheet(bpy, n, "ClothSheet")
    mod = cloth_obj.modifiers.new("Cloth", 'CLOTH')
    mod.point_cache.frame_end = frames
    begin = time.perf_counter()
    for frame in range(1, frames + 1):
        scene.frame_set(frame)
    cloth = (time.perf_counter() - begin) / (frames - 1)
    bpy.data.objects.remove(cloth_obj)
    scene.frame_set(1)

    obj = sheet(bpy, n, "MassSpringSheet")
    s = obj.mass_spring
    s.enabled = True
    s.total_mass, s.stiffness, s.damping = 1.0, 1000.0, 0.01
    for key, value in settings.items():
        if not hasattr(s, key):
            sys.exit(f"obj.mass_spring has no setting {key!r}")
        setattr(s, key, value)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    begin = time.perf_counter()
    result = bpy.ops.mass_spring.bake()
    ours = (time.perf_counter() - begin) / (frames - 1)
    if result != {'FINISHED'}:
        return cloth, None, None
    deepest = 0.0
    for frame in range(1, frames + 1):
        scene.frame_set(frame)
        mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
        world = co.reshape(-1, 3) + np.array(obj.location)
        deepest = max(deepest, RADIUS + THICKNESS - np.linalg.norm(world, axis=1).min())
    return cloth, ours, deepest


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", type=int, nargs="+", default=[33, 65])
    p.add_argument("--frames", type=int, default=49, help="frames, the first included (49 = 2 s)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="an obj.mass_spring setting for our bake, e.g. rho_inf=0.8")
    args = p.parse_args(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else None)
    settings = dict((kv.split("=", 1)[0], parse_value(kv.split("=", 1)[1])) for kv in args.set)

    import bpy
    import bake as headless  # scripts/bake.py: the add-on from the repo
    bpy.ops.wm.read_factory_settings(use_empty=True)
    headless.load_addon("repo")
    os.chdir(tempfile.mkdtemp(prefix="bench_contact_"))
    print(f"Blender {bpy.app.version_string}; ours: {settings or 'add-on defaults'}; "
          f"{args.frames} frames; ball r = {RADIUS} m, thickness {THICKNESS} m")
    print(f"{'grid':>6} {'cloth ms/frame':>15} {'ours ms/frame':>14} {'ours/cloth':>11} "
          f"{'ours deepest (mm)':>18}")
    for n in args.grid:
        cloth, ours, deepest = run_case(bpy, n, args.frames, settings)
        if ours is None:
            print(f"{n:>4}^2 {cloth * 1e3:15.1f} {'bake failed':>14}", flush=True)
            continue
        print(f"{n:>4}^2 {cloth * 1e3:15.1f} {ours * 1e3:14.1f} {ours / cloth:11.2f} "
              f"{deepest * 1e3:18.2f}", flush=True)


if __name__ == "__main__":
    main()
