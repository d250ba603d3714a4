"""What every example shares: arguments, add-on loading, the bake, reading it back, render.

An example module defines

    NAME           file stem of its picture: docs/example_<NAME>.png
    TITLE          caption rendered into the picture
    FRAMES         default frame count (1..FRAMES at 24 fps)
    RENDER_FRAME   default frame of the still (decorate() may choose it: key "frame")
    build(**params) -> list of objects     the structure(s), through scripts/scenes.py
    decorate(scene, objects, results) -> dict
                   after the bake: trails, labels, props. Returns the framing for
                   scenes.add_stage() (center, width, height) plus optional "subtitle",
                   "title" and "frame" (the still's frame)

and ends with ``if __name__ == "__main__": sys.exit(_common.main(sys.modules[__name__]))``.
The flow (``main``): load the add-on, empty the scene, build, bake every structure with
the add-on's own bake function (the user's path: a mesh with a pin group and marked edges),
decorate, render a Workbench still, optionally save the .blend.

Run with a Python that has the ``bpy`` module, or inside Blender:

    python scripts/examples/hanging_chain.py [--frames N] [--out DIR] [--blend [PATH]]
    blender -b --python-exit-code 1 --python scripts/examples/hanging_chain.py -- --frames 48
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent
SCRIPTS = EXAMPLES.parent
REPO = SCRIPTS.parent
for _path in (str(SCRIPTS), str(EXAMPLES)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import bpy  # noqa: E402  (after the path set-up; needs Blender or the bpy module)

import render  # noqa: E402  scripts/render.py: stills and videos
import scenes  # noqa: E402  scripts/scenes.py: one builder per structure
from addon_loader import SOURCES, addon_module  # noqa: E402  the one add-on loader
from script_args import script_argv  # noqa: E402  arguments after "--" inside Blender

FPS = 24
DEFAULT_RESOLUTION = (960, 540)
TRAIL_MATERIAL = "MS Trail"


def say(message: str) -> None:
    print(f"[example] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- arguments

def parse_args(example, argv=None) -> argparse.Namespace:
    name = example.NAME
    p = argparse.ArgumentParser(
        prog=f"{name}.py",
        description=f"Example '{name}': build the scene, bake it through the add-on, "
                    f"render docs/example_{name}.png.")
    p.add_argument("--frames", type=int, default=example.FRAMES, metavar="N",
                   help=f"bake frames 1..N at {FPS} fps (default {example.FRAMES})")
    p.add_argument("--out", default=str(REPO / "docs"), metavar="DIR",
                   help="folder for the picture (default: docs/ of the repository)")
    p.add_argument("--blend", nargs="?", const="", default=None, metavar="PATH",
                   help=f"also save the baked scene (default path: out/example_{name}.blend)")
    p.add_argument("--render-frame", type=int, default=None, metavar="F",
                   help="frame of the still (default: the example's own choice)")
    p.add_argument("--resolution", default=None, metavar="WxH",
                   help=f"picture size (default {DEFAULT_RESOLUTION[0]}x{DEFAULT_RESOLUTION[1]})")
    p.add_argument("--no-render", action="store_true", help="bake (and save) only")
    p.add_argument("--forces", action="store_true",
                   help=f"colour every member by its force (blue pushes, red pulls), rendered "
                        f"with Cycles into docs/example_{name}_forces.png")
    p.add_argument("--addon", choices=SOURCES, default="repo",
                   help="the repo's addon/ folder (default) or an installed extension")
    args = p.parse_args(script_argv() if argv is None else argv)
    if args.frames < 2:
        p.error("--frames must be at least 2")
    if args.resolution:
        args.resolution = render.parse_resolution(args.resolution, p)
    else:
        args.resolution = DEFAULT_RESOLUTION
    return args


# ----------------------------------------------------------------------------- add-on, bake

def new_scene(frames: int, fps: int = FPS):
    """The current scene emptied, frames 1..`frames` at `fps`."""
    scene = bpy.context.scene
    scenes.clear_scene(scene)
    for text in [c for c in bpy.data.curves if c.users == 0]:
        bpy.data.curves.remove(text)
    scene.frame_start, scene.frame_end = 1, int(frames)
    scene.frame_current = 1
    scene.render.fps, scene.render.fps_base = int(fps), 1.0
    scene.use_gravity = True
    scene.gravity = (0.0, 0.0, -9.81)
    return scene


def bake_all(bake_module, scene, objects, together=()) -> dict:
    """Bake each object alone, but those named in `together` in one go, as Bake with them
    selected does (with Self Collision on, as one simulation: they collide with each
    other); {object name: BakeResult}. (Baked together, objects share one solver's steps:
    unrelated ones cost each other's.)"""
    batches = [[obj] for obj in objects if obj.name not in together]
    batches += [[obj for obj in objects if obj.name in together]] if together else []
    results = {}
    for batch in (bake_module.Batch(scene, group) for group in batches):
        for run in batch.runs:
            t0 = time.perf_counter()
            bake_module.run_job(run)
            ms = (run.jobs[0] if hasattr(run, "jobs") else run).obj.mass_spring
            how = "baked together" if hasattr(run, "jobs") else "baked"
            say(f"{run.object_name}: {how} frames {run.frames[0]}..{run.frames[-1]} "
                f"({ms.integrator.lower()}, {ms.substeps} substeps) in {time.perf_counter() - t0:.2f} s")
        results.update({result.object_name: result for result in batch.finish()})
    for name, result in results.items():
        for warning in result.warnings:
            say(f"{name}: warning: {warning}")
    return results


def build_and_bake(example, frames: int, addon: str = "repo", fps: int = FPS, **params):
    """Load the add-on, empty the scene (frames 1..`frames` at `fps`), build the example
    (with `params` overriding its defaults) and bake it. Returns (scene, objects, results)."""
    bake_module = addon_module("bake", addon)
    scene = new_scene(frames, fps)
    objects = example.build(**params)
    # New objects' matrix_world is only computed by a depsgraph update; the bake reads it.
    bpy.context.view_layer.update()
    results = bake_all(bake_module, scene, objects, getattr(example, "BAKED_TOGETHER", ()))
    return scene, objects, results


# ----------------------------------------------------------------------------- read back

def baked_positions(scene, obj, frames=None) -> np.ndarray:
    """World positions (F, N, 3) of `obj`'s vertices as Blender shows them at each frame:
    the evaluated mesh after `frame_set`, i.e. what the bake stored (shape keys or PC2),
    not what the simulation returned. The edge-visuals modifier (tubes and balls) is
    switched off while reading so the vertices are the structure's own."""
    frames = range(scene.frame_start, scene.frame_end + 1) if frames is None else frames
    visuals = obj.modifiers.get(scenes.VISUALS_MODIFIER)
    shown = visuals.show_viewport if visuals is not None else None
    if visuals is not None:
        visuals.show_viewport = False
    frame_before = scene.frame_current
    out = []
    try:
        for frame in frames:
            scene.frame_set(int(frame))
            depsgraph = bpy.context.evaluated_depsgraph_get()
            evaluated = obj.evaluated_get(depsgraph)
            mesh = evaluated.data
            co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
            mesh.vertices.foreach_get("co", co)
            matrix = np.array(evaluated.matrix_world, dtype=np.float64)
            out.append(co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3])
    finally:
        if visuals is not None:
            visuals.show_viewport = shown
        scene.frame_set(frame_before)
    return np.array(out)


def edge_mask(obj, attribute: str) -> np.ndarray:
    """A boolean edge attribute (ms_rigid, ms_rope) as a mask; False where absent."""
    mesh = obj.data
    mask = np.zeros(len(mesh.edges), dtype=bool)
    attr = mesh.attributes.get(attribute)
    if attr is not None:
        attr.data.foreach_get("value", mask)
    return mask


def edges(obj) -> np.ndarray:
    pairs = np.empty(len(obj.data.edges) * 2, dtype=np.int32)
    obj.data.edges.foreach_get("vertices", pairs)
    return pairs.reshape(-1, 2).astype(np.int64)


def vertex_masses(obj) -> np.ndarray:
    """The mass of each vertex as the add-on assigns it (total mass spread evenly, or by
    the mass vertex group), in the single precision Blender stores."""
    ms = obj.mass_spring
    n = len(obj.data.vertices)
    if not ms.mass_group:
        return np.full(n, ms.total_mass / n)
    group = obj.vertex_groups[ms.mass_group]
    w = np.zeros(n)
    for v in obj.data.vertices:
        for g in v.groups:
            if g.group == group.index:
                w[v.index] = g.weight
    return ms.total_mass * w / w.sum()


def velocities(positions: np.ndarray, dt: float) -> np.ndarray:
    """Velocities at frames 2..F-3 from baked positions (F, N, 3) by the fourth-order
    central difference (error ~ (ω dt)^4 / 30)."""
    p = positions
    return (p[:-4] - 8.0 * p[1:-3] + 8.0 * p[3:-1] - p[4:]) / (12.0 * dt)


# ----------------------------------------------------------------------------- looks

def add_trail(name, points, *, color=(0.15, 0.45, 0.85), radius=0.008, collection=None):
    """A thin tube through `points` (world space): the path a mass took during the bake.
    A Bézier curve with automatic handles, so a path sampled once per frame reads smooth."""
    points = np.asarray(points, dtype=np.float64)
    curve = bpy.data.curves.new(name, "CURVE")
    curve.dimensions = "3D"
    curve.bevel_depth = radius
    curve.bevel_resolution = 2
    curve.resolution_u = 6
    spline = curve.splines.new("BEZIER")
    spline.bezier_points.add(len(points) - 1)
    flat = points.ravel()
    spline.bezier_points.foreach_set("co", flat)
    spline.bezier_points.foreach_set("handle_left", flat)
    spline.bezier_points.foreach_set("handle_right", flat)
    for point in spline.bezier_points:  # enum values differ between versions: set by name
        point.handle_left_type = point.handle_right_type = "AUTO"
    mat = bpy.data.materials.get(f"{TRAIL_MATERIAL} {name}") or scenes.material(
        f"{TRAIL_MATERIAL} {name}", color)
    curve.materials.append(mat)
    obj = bpy.data.objects.new(name, curve)
    (collection or bpy.context.scene.collection).objects.link(obj)
    return obj


def add_title(text, subtitle, stage: dict, aspect: float = 16 / 9):
    """Caption at the top of the frame that add_stage() will frame: the title, and under
    it the subtitle (parameters, what the colours mean). Examples leave the top 17 % of
    the frame free for it."""
    cx, cy, cz = stage.get("center", (0.0, 0.0, 1.6))
    width = max(stage.get("width", 12.0), stage.get("height", 4.5) * aspect)
    height = width / aspect
    size = 0.045 * width
    top = cz + 0.5 * height
    # In front of the structures (and of pillars or posts standing at y = 0).
    y = cy - 0.6
    scenes.add_label(text, (cx, y, top - 1.3 * size), size=size, align="CENTER")
    if subtitle:
        scenes.add_label(subtitle, (cx, y, top - 1.95 * size), size=0.36 * size,
                         align="CENTER")


def render_still(scene, path: Path, frame: int, resolution, engine="BLENDER_WORKBENCH") -> None:
    scenes.set_render_defaults(scene, resolution=resolution, engine=engine, samples=24)
    if engine == "CYCLES":  # the forces' colours as they are, not desaturated by AgX
        scene.view_settings.view_transform = "Standard"
    # Workbench's stencil shadows need closed meshes: the open backdrop sheet of
    # scenes.add_stage() shades itself grey except for a lit wedge. Cavity stays on.
    scene.display.shading.show_shadows = False
    render.render_still(scene, str(path), int(frame))


# ----------------------------------------------------------------------------- main

def main(example, argv=None) -> int:
    args = parse_args(example, argv)
    t_start = time.perf_counter()
    scene, objects, results = build_and_bake(example, args.frames, args.addon)
    for obj in objects:
        scenes.add_edge_visuals(obj, radius=getattr(example, "TUBE_RADIUS", 0.02),
                                forces=args.forces)
    stage = example.decorate(scene, objects, results) or {}
    stage = dict(stage)
    title = stage.pop("title", getattr(example, "TITLE", example.NAME))
    chosen_frame = stage.pop("frame", None)
    subtitle = stage.pop("subtitle", "")
    if args.forces:
        title += ": forces"
        subtitle = (f"blue pushes, white carries nothing, red pulls "
                    f"{largest_force(objects):.3g} N (the bake's largest)")
    add_title(title, subtitle, stage, args.resolution[0] / args.resolution[1])
    scenes.add_stage(scene, resolution=args.resolution, **stage)

    frame = args.render_frame if args.render_frame is not None else chosen_frame
    if frame is None:
        frame = example.RENDER_FRAME
        frame = frame(args.frames) if callable(frame) else min(int(frame), args.frames)
    out = Path(args.out)
    if not args.no_render:
        stem = f"example_{example.NAME}" + ("_forces" if args.forces else "")
        render_still(scene, (out / f"{stem}.png").resolve(), frame, args.resolution,
                     "CYCLES" if args.forces else "BLENDER_WORKBENCH")
    scene.frame_set(int(frame))
    if args.blend is not None:
        blend = Path(args.blend or REPO / "out" / f"example_{example.NAME}.blend").resolve()
        blend.parent.mkdir(parents=True, exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=str(blend), check_existing=False)
        say(f"saved {blend}")
    say(f"done in {time.perf_counter() - t_start:.1f} s")
    return 0


def largest_force(objects) -> float:
    """The largest |force| of the objects' bakes (newtons), as the forces colours use it."""
    records = (addon_module("writers").bake_record(obj) or {} for obj in objects)
    return max(((r.get("forces") or {}).get("range", 0.0) for r in records), default=0.0)


def exact_pendulum_period(length: float, theta0_deg: float, g: float = 9.81) -> float:
    """T = 2π √(L/g) / AGM(1, cos(θ0/2)), the exact large-amplitude period."""
    a, b = 1.0, math.cos(math.radians(theta0_deg) / 2.0)
    while abs(a - b) > 1e-15:
        a, b = 0.5 * (a + b), math.sqrt(a * b)
    return 2.0 * math.pi * math.sqrt(length / g) / a
