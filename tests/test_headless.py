"""The headless command (scripts/bake.py) end to end, in fresh processes.

Each test runs Blender (the ``bpy`` module) in a subprocess, as a render farm would: build
a small scene, bake it with ``python scripts/bake.py``, reopen the result in another fresh
process *without* the add-on and read the evaluated vertex positions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("bpy")

REPO = Path(__file__).resolve().parent.parent
BAKE = REPO / "scripts" / "bake.py"
TIMEOUT = 600

pytestmark = pytest.mark.blender


def run_python(code: str, *args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (the same venv, so the same bpy)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def run_bake(*args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BAKE), "--addon", "repo", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def last_json(stdout: str):
    """Blender prints its own lines to stdout: the result is the last line starting with {."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON in output:\n{stdout}")


def one_error_line(stderr: str) -> str:
    """The failure is reported as one line starting with 'bake.py: error:'; no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [l for l in stderr.splitlines() if l.startswith("bake.py: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


# A scene with a small chain (built by scripts/scenes.py through the repo's add-on), a
# camera and an empty, saved to argv[1]. Prints the chain's rest positions (world space).
MAKE_SCENE = """
    import json, sys
    sys.path.insert(0, "scripts")
    import bake, bpy
    bake.load_addon("repo")
    import scenes
    scene = bpy.context.scene
    scenes.clear_scene(scene)
    scene.frame_start, scene.frame_end = 1, 24
    chain = scenes.hanging_chain(n=4, spacing=0.25, angle=60.0, stiffness=200.0,
                                 location=(0.0, 0.0, 2.0), substeps=4)
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    empty = bpy.data.objects.new("Empty", None)
    scene.collection.objects.link(empty)
    bpy.ops.wm.save_as_mainfile(filepath=sys.argv[1])
    world = [list(chain.matrix_world @ v.co) for v in chain.data.vertices]
    print(json.dumps({"rest": world}))
"""

# Open argv[1] WITHOUT registering the add-on, print world positions of argv[2] per frame.
READ_POSITIONS = """
    import json, sys
    import bpy
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
    assert not hasattr(bpy.types.Object, "mass_spring"), "the add-on must not be loaded here"
    scene = bpy.context.scene
    obj = bpy.data.objects[sys.argv[2]]
    out = {"frames": {}, "shape_keys": 0, "modifiers": [m.type for m in obj.modifiers]}
    if obj.data.shape_keys is not None:
        out["shape_keys"] = len(obj.data.shape_keys.key_blocks)
    for frame in map(int, sys.argv[3].split(",")):
        scene.frame_set(frame)
        dg = bpy.context.evaluated_depsgraph_get()
        ev = obj.evaluated_get(dg)
        mesh = ev.to_mesh()
        out["frames"][frame] = [list(ev.matrix_world @ v.co) for v in mesh.vertices]
        ev.to_mesh_clear()
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def small_scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("scene") / "small.blend"
    proc = run_python(MAKE_SCENE, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path, last_json(proc.stdout)["rest"]


def read_positions(blend: Path, obj: str, frames) -> dict:
    proc = run_python(READ_POSITIONS, str(blend), obj, ",".join(map(str, frames)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return last_json(proc.stdout)


def _max_abs_diff(a, b) -> float:
    return max(abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q))


# ----------------------------------------------------------------------------- bake

def test_headless_bake_small_scene(small_scene, tmp_path):
    scene_path, rest = small_scene
    out = tmp_path / "baked.blend"
    proc = run_bake(scene_path, "--output", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file()
    # Progress: frame, simulated steps per second, time left.
    assert "frames/s" in proc.stderr and "left" in proc.stderr and "frame" in proc.stderr

    data = read_positions(out, "Chain", [1, 6, 12, 24])
    frames = {int(k): v for k, v in data["frames"].items()}
    # The first frame is the mesh as modelled; later frames moved; the pin stays put.
    assert _max_abs_diff(frames[1], rest) < 1e-5
    assert _max_abs_diff(frames[12], rest) > 0.05
    for f in (6, 12, 24):
        assert _max_abs_diff([frames[f][0]], [rest[0]]) < 1e-5
    # Released 60 degrees from vertical, the chain swings down: the tip ends lower.
    assert frames[12][-1][2] < rest[-1][2] - 0.05
    # The input file is untouched by the bake.
    untouched = read_positions(scene_path, "Chain", [12])
    assert _max_abs_diff(untouched["frames"]["12"], rest) < 1e-6


def test_headless_bake_overrides_and_pc2(small_scene, tmp_path):
    scene_path, rest = small_scene
    out = tmp_path / "pc2" / "baked.blend"
    proc = run_bake(scene_path, "--output", out, "--objects", "Chain", "--mode", "pc2",
                    "--frame-start", "1", "--frame-end", "12", "--integrator", "implicit_euler",
                    "--substeps", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "frames 1..12, implicit_euler, 3 substeps" in proc.stderr
    assert list(out.parent.glob("*.pc2")), f"no PC2 file beside the .blend: {list(out.parent.iterdir())}"
    data = read_positions(out, "Chain", [1, 12])
    assert "MESH_CACHE" in data["modifiers"]
    assert _max_abs_diff(data["frames"]["1"], rest) < 1e-5
    assert _max_abs_diff(data["frames"]["12"], rest) > 0.05


# Open the input argv[1] with the repo's add-on: the Chain simulated with the overrides
# argv[3] (JSON) and with its own settings; then the baked output argv[2]: its stored
# settings and the positions the bake plays, frames 1..len(simulated).
CHECK_OVERRIDES = """
    import json, sys
    import numpy as np
    sys.path.insert(0, "scripts")
    import bake, bpy
    bake_module = bake.load_addon("repo")
    simulation = sys.modules[bake_module.__package__ + ".simulation"]

    def simulate(overrides):
        job = bake_module.BakeJob(bpy.context.scene, bpy.data.objects["Chain"], overrides)
        while not job.step(1.0):  # reads the animation: the matrices
            pass
        return simulation.simulate_world_positions(
            job.arrays, job.settings, job.simulation.matrices, job.frames)

    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
    overridden = simulate(json.loads(sys.argv[3]))
    own = simulate(None)[:len(overridden)]
    bpy.ops.wm.open_mainfile(filepath=sys.argv[2])
    scene, chain = bpy.context.scene, bpy.data.objects["Chain"]
    baked = []
    for frame in range(1, len(overridden) + 1):
        scene.frame_set(frame)
        ev = chain.evaluated_get(bpy.context.evaluated_depsgraph_get())
        mesh = ev.to_mesh()
        baked.append([list(ev.matrix_world @ v.co) for v in mesh.vertices])
        ev.to_mesh_clear()
    baked = np.array(baked)
    ms = chain.mass_spring
    print(json.dumps({
        "stored": [ms.integrator, ms.substeps, ms.use_scene_frame_range, ms.output],
        "shape_keys": len(chain.data.shape_keys.key_blocks),
        "vs_overridden": float(np.abs(baked - overridden).max()),
        "vs_own": float(np.abs(baked - own).max()),
    }))
"""


def test_overrides_change_the_bake_not_the_saved_settings(small_scene, tmp_path):
    """--integrator, --substeps and the frame range change the bake only: reopened in a
    fresh process, the saved file keeps the chain's own settings, and its baked motion is
    the add-on's simulation with the overrides (not with the stored settings)."""
    scene_path, _ = small_scene
    out = tmp_path / "baked.blend"
    proc = run_bake(scene_path, "--output", out, "--integrator", "newmark", "--substeps", "2",
                    "--frame-start", "1", "--frame-end", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
    overrides = {"enabled": True, "integrator": "NEWMARK", "substeps": 2,
                 "use_scene_frame_range": False, "frame_start": 1, "frame_end": 12}
    proc = run_python(CHECK_OVERRIDES, str(scene_path), str(out), json.dumps(overrides))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = last_json(proc.stdout)
    assert data["stored"] == ["GENERALIZED_ALPHA", 4, True, "SHAPE_KEYS"]
    assert data["shape_keys"] == 1 + 12  # the basis and one key per baked frame
    assert data["vs_overridden"] < 1e-5
    assert data["vs_own"] > 1e-3  # the overrides did change the motion


# ----------------------------------------------------------------------------- failures

def test_headless_forces_are_shown_in_the_saved_file(small_scene, tmp_path):
    """--forces: the saved file has Show Forces on (display modifier after the data one),
    and without the add-on its evaluated chain carries ms_force: springs pull (> 0)."""
    scene_path, _ = small_scene
    out = tmp_path / "forces.blend"
    proc = run_bake(scene_path, "--output", out, "--forces", "--no-render")
    assert proc.returncode == 0, proc.stderr[-3000:]
    code = """
        import json, sys, bpy
        bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
        obj = bpy.data.objects["Chain"]
        bpy.context.scene.frame_set(12)
        mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
        force = [a.value for a in mesh.attributes["ms_force"].data][:len(obj.data.edges)]
        print(json.dumps({"modifiers": [m.name for m in obj.modifiers], "force": force}))
    """
    proc = run_python(code, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = last_json(proc.stdout)
    assert data["modifiers"] == ["Mass–Spring Forces", "Mass–Spring Force Colours"]
    assert min(data["force"]) > 0  # a hanging chain's springs all pull


def test_a_bake_in_a_fresh_process_does_not_import_numpy_ma():
    """np.median imports numpy.ma on its first call, 13-22 ms of a small bake in a new
    Blender session (docs/performance.md, "The bake"): the add-on takes mass_spring.median.
    A zero-length test with np.median brought it back once."""
    proc = run_python("""
        import sys
        sys.path.insert(0, "scripts")
        import bake, bpy
        bake.load_addon("repo")
        import scenes
        scene = bpy.context.scene
        scenes.clear_scene(scene)
        scene.frame_start, scene.frame_end = 1, 3
        cloth = scenes.falling_cloth(vertices=5)
        before = "numpy.ma" in sys.modules
        bpy.context.view_layer.objects.active = cloth
        cloth.select_set(True)
        assert bpy.ops.mass_spring.bake() == {"FINISHED"}
        print("{" + f'"before": {str(before).lower()}, "after": {str("numpy.ma" in sys.modules).lower()}' + "}")
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = last_json(proc.stdout)
    if found["before"]:
        pytest.skip("this numpy or Blender imports numpy.ma itself")
    assert found == {"before": False, "after": False}


def test_missing_file_fails_with_one_line(tmp_path):
    proc = run_bake(tmp_path / "missing.blend", "--output", tmp_path / "x.blend")
    assert proc.returncode != 0
    line = one_error_line(proc.stderr)
    assert "not found" in line and "missing.blend" in line
    assert not (tmp_path / "x.blend").exists()


def test_not_a_mesh_fails_with_one_line(small_scene, tmp_path):
    scene_path, _ = small_scene
    proc = run_bake(scene_path, "--objects", "Camera", "--output", tmp_path / "x.blend")
    assert proc.returncode != 0
    line = one_error_line(proc.stderr)
    assert "'Camera'" in line and "not a mesh" in line
    assert not (tmp_path / "x.blend").exists()


def test_render_without_a_camera_fails_before_the_bake(small_scene, tmp_path):
    # Before: a traceback, after the whole simulation had run and the .blend was saved.
    scene_path, _ = small_scene
    no_camera = tmp_path / "no_camera.blend"
    proc = run_python("""
        import sys, bpy
        bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
        bpy.data.objects.remove(bpy.data.objects["Camera"])
        bpy.ops.wm.save_as_mainfile(filepath=sys.argv[2])
        """, str(scene_path), str(no_camera))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_bake(no_camera, "--output", tmp_path / "x.blend", "--render", tmp_path / "x.png")
    assert proc.returncode != 0
    line = one_error_line(proc.stderr)
    assert "no camera" in line
    assert "vertices" not in proc.stderr  # refused before the bake announced the object
    assert not (tmp_path / "x.blend").exists() and not (tmp_path / "x.png").exists()


def test_no_such_object_fails_with_one_line(small_scene, tmp_path):
    scene_path, _ = small_scene
    proc = run_bake(scene_path, "--objects", "Nope", "--output", tmp_path / "x.blend")
    assert proc.returncode != 0
    line = one_error_line(proc.stderr)
    assert "no such object" in line and "'Nope'" in line


def test_diverging_bake_names_the_frame(small_scene, tmp_path):
    """Explicit Euler on a stiff chain with one step per frame blows up."""
    scene_path, _ = small_scene
    out = tmp_path / "x.blend"
    proc = run_bake(scene_path, "--integrator", "explicit_euler", "--substeps", "1",
                    "--output", out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = one_error_line(proc.stderr)
    assert "'Chain'" in line and "frame" in line
    assert not out.exists()


def test_help_exits_zero():
    proc = subprocess.run([sys.executable, str(BAKE), "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert proc.returncode == 0
    for option in ("--objects", "--frame-start", "--frame-end", "--output", "--mode",
                   "--integrator", "--rho-inf", "--substeps", "--render", "--video"):
        assert option in proc.stdout


# ----------------------------------------------------------------------------- arguments

def test_arguments_inside_blender_come_after_double_dash():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import bake
    finally:
        sys.path.pop(0)
    blender = ["blender", "--background", "scene.blend", "--python-exit-code", "1",
               "--python", "scripts/bake.py", "--", "--objects", "Chain", "--frame-end", "10"]
    assert bake.script_argv(blender) == ["--objects", "Chain", "--frame-end", "10"]
    assert bake.blend_given_to_blender(blender) == "scene.blend"
    assert bake.script_argv(["blender", "-b", "--python", "scripts/bake.py"]) == []
    module = ["scripts/bake.py", "in.blend", "--output", "o.blend"]
    assert bake.script_argv(module) == ["in.blend", "--output", "o.blend"]
    assert bake.blend_given_to_blender(module) is None
    args = bake.parse_args(["in.blend", "--objects", "A,B", "--objects", "C",
                            "--integrator", "NEWMARK", "--resolution", "320x200"])
    assert bake.addon_cli("repo").object_names(args.objects) == ["A", "B", "C"]
    assert args.integrator == "newmark" and args.resolution == (320, 200)


# ----------------------------------------------------------------------------- builders

CHECK_BUILDERS = """
    import json, sys
    import numpy as np
    sys.path.insert(0, "scripts")
    import bake, bpy
    bake_module = bake.load_addon("repo")
    import scenes
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    report = {}
    for name, builder in scenes.STRUCTURES.items():
        scenes.clear_scene(scene)
        made = builder()
        objects = made if isinstance(made, list) else [made]
        for obj in objects:
            mesh = obj.data
            pins = obj.vertex_groups.get(obj.mass_spring.pin_group)
            pinned = np.zeros(len(mesh.vertices), bool)
            for v in mesh.vertices:
                for g in v.groups:
                    if pins is not None and g.group == pins.index and g.weight > 0.5:
                        pinned[v.index] = True
            edges = np.array([tuple(e.vertices) for e in mesh.edges])
            rigid = np.zeros(len(edges), bool)
            if "ms_rigid" in mesh.attributes:
                a = mesh.attributes["ms_rigid"]
                assert (a.domain, a.data_type) == ("EDGE", "BOOLEAN")
                a.data.foreach_get("value", rigid)
            co = np.array([v.co[:] for v in mesh.vertices])
            free = {int(v): i for i, v in enumerate(np.flatnonzero(~pinned))}
            rows = []
            for (a, b) in edges[rigid]:
                n = (co[b] - co[a]) / np.linalg.norm(co[b] - co[a])
                row = np.zeros(3 * len(free))
                for v, s in ((a, -1), (b, 1)):
                    if int(v) in free:
                        row[3 * free[int(v)]:3 * free[int(v)] + 3] = s * n
                rows.append(row)
            rank = int(np.linalg.matrix_rank(np.array(rows))) if rows else 0
            result = bake_module.bake_object(scene, obj)
            report[obj.name] = {
                "enabled": obj.mass_spring.enabled, "pins": int(pinned.sum()),
                "both_pinned": int((pinned[edges[:, 0]] & pinned[edges[:, 1]]).sum()),
                "rods": len(rows), "rank": rank,
                "moved": float(np.abs(result.positions[-1] - result.positions[0]).max()),
            }
    print(json.dumps(report))
"""


def test_scene_builders_make_valid_structures():
    """Every builder of scripts/scenes.py makes a mesh the add-on bakes: pinned, enabled,
    no edge between two pins, rigid edges independent (a redundant rod makes the system
    singular), and it moves."""
    proc = run_python(CHECK_BUILDERS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = last_json(proc.stdout)
    assert len(report) >= 12, report  # 6 single structures + 6 integrator copies
    for name, r in report.items():
        assert r["enabled"] and r["pins"] >= 1 and r["both_pinned"] == 0, (name, r)
        assert r["rank"] == r["rods"], (name, r)
        assert r["moved"] > 1e-4, (name, r)


# ----------------------------------------------------------------------------- demo

def test_demo_on_a_short_frame_range(tmp_path):
    """The demo command's path: build the demo scene (every Add-menu preset), bake a few
    frames, save, render."""
    out, png = tmp_path / "demo.blend", tmp_path / "demo.png"
    proc = run_bake("--frame-end", "6", "--output", out, "--render", png,
                    "--render-frame", "6", "--resolution", "320x160")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file() and png.is_file() and png.stat().st_size > 1000
    assert "EGL" not in proc.stderr + proc.stdout  # render.GPU_NOISE, filtered
    code = """
        import json, sys, bpy
        bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
        names = [o.name for o in bpy.context.scene.objects
                 if o.type == "MESH" and o.data.shape_keys is not None]
        print(json.dumps({"baked": names, "camera": bpy.context.scene.camera is not None}))
    """
    proc = run_python(code, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = last_json(proc.stdout)
    assert data["camera"]
    for name in ("Chain", "Pendulum", "Double Pendulum", "Bridge", "Cloth", "Spinning Ring", "Crane",
                 "Free Chain", "Falling Cloth"):
        assert name in data["baked"], data


def test_the_demo_prints_no_gpu_noise():
    """render.without_gpu_noise drops Blender's harmless EGL_BAD_MATCH lines from what the
    process writes to stderr during a render, passes every other line on, and keeps them
    when the render fails."""
    code = """
        import os, sys
        sys.path.insert(0, "scripts")
        import render
        with render.without_gpu_noise():
            os.write(2, b"EGL Error (0x3009): EGL_BAD_MATCH: Arguments are inconsistent\\n")
            os.write(2, b"a real warning\\n")
        try:
            with render.without_gpu_noise():
                os.write(2, b"said before a failure\\n")
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        print("after", file=sys.stderr)
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EGL" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line in ("a real warning", "said before a failure", "after")]
    assert lines == ["a real warning", "said before a failure", "after"], proc.stderr


@pytest.mark.slow
def test_demo_full_with_video(tmp_path):
    """The demo as scripts/demo.sh runs it (full-size still), plus a short video."""
    out, png, video = tmp_path / "demo.blend", tmp_path / "demo.png", tmp_path / "demo.mp4"
    proc = run_bake("--output", out, "--render", png, "--video", video, "--video-scale", "20",
                    "--frame-end", "48", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file() and png.is_file()
    assert video.is_file() and video.stat().st_size > 10_000
