"""The forces of a bake (addon/forces.py): ms_strain and ms_force on the evaluated mesh at
every frame, the rods' tensions as the core computed them, Show Forces, and a baked file
reopened and rendered without the add-on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from test_addon_helpers import (blender_env, make_grid, make_mesh_object, mesh_fingerprint,
                                pin, require_bpy, run_python, set_edge_marks)

bpy = require_bpy()


@pytest.fixture
def bake(addon):
    import addon_loader
    return addon_loader.addon_module("bake", "repo")


@pytest.fixture
def forces(addon):
    import addon_loader
    return addon_loader.addon_module("forces", "repo")


def evaluated_edges(obj, frame):
    """(local positions, edges, {attribute: values}) of the evaluated mesh at `frame`."""
    bpy.context.scene.frame_set(frame)
    mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    co = np.empty(len(mesh.vertices) * 3, np.float32)
    mesh.vertices.foreach_get("co", co)
    edges = np.empty(len(mesh.edges) * 2, np.int32)
    mesh.edges.foreach_get("vertices", edges)
    values = {}
    for name in ("ms_strain", "ms_force", "ms_force_level"):
        attribute = mesh.attributes[name]
        assert attribute.domain == 'EDGE'
        data = np.empty(len(mesh.edges), np.float32)
        attribute.data.foreach_get("value", data)
        values[name] = data.astype(np.float64)
    return co.reshape(-1, 3).astype(np.float64), edges.reshape(-1, 2), values


def lengths(positions, edges):
    return np.linalg.norm(positions[edges[:, 1]] - positions[edges[:, 0]], axis=1)


@pytest.mark.parametrize("output", ['SHAPE_KEYS', 'PC2'])
def test_strain_and_spring_force_follow_the_evaluated_mesh(scene, bake, output, tmp_path):
    """A sheet falling into folds, rotated and scaled 2×: at any frame ms_strain is
    |e|/L0 - 1 of the evaluated edges (1e-6), ms_force is k (|e| - L0) in world units,
    ropes never push, and edges between two pins carry nothing."""
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "forces.blend"))
    obj = make_grid(nx=6, ny=5, spacing=0.2)
    obj.rotation_euler = (0.3, 0.0, 0.5)
    obj.scale = (2.0, 2.0, 2.0)
    pin(obj, [0, 1, 5])  # edge 0-1 joins two pins
    set_edge_marks(obj, "ms_rope", [3, 7, 11])
    s = obj.mass_spring
    s.enabled, s.stiffness, s.output, s.frame_start, s.frame_end = True, 150.0, output, 1, 20
    s.use_scene_frame_range = False
    s.pc2_path = "//forces.pc2"
    bake.bake_object(scene, obj)
    base = np.array([v.co for v in obj.data.vertices], np.float64)
    edges = np.array([e.vertices for e in obj.data.edges])
    rest = lengths(base, edges)
    rope = np.zeros(len(edges), bool)
    rope[[3, 7, 11]] = True
    between_pins = np.isin(edges, [0, 1, 5]).all(axis=1)
    assert between_pins.any()
    pulled = pushed = 0
    for frame in (1, 7, 20):
        co, evaluated_edges_, values = evaluated_edges(obj, frame)
        np.testing.assert_array_equal(evaluated_edges_, edges)
        length = lengths(co, edges)
        np.testing.assert_allclose(values["ms_strain"], length / rest - 1.0, rtol=0, atol=1e-6)
        # world lengths are 2× the object-space ones: k (|e| - L0) in newtons
        expected = 150.0 * 2.0 * (length - rest)
        expected[rope] = np.maximum(expected[rope], 0.0)
        expected[between_pins] = 0.0
        np.testing.assert_allclose(values["ms_force"], expected, rtol=0, atol=1e-6 * 150.0 * 2 * 0.2)
        assert (values["ms_force"][rope] >= 0).all()
        assert np.abs(values["ms_force_level"]).max() <= 1.0
        pulled += (values["ms_force"] > 1e-3).sum()
        pushed += (values["ms_force"] < -1e-3).sum()
    assert pulled and pushed  # the sheet folds: both kinds occur


def two_rod_hanger(theta_deg=35.0, length=1.0):
    """Two pins at ±θ from the vertical above a mass hung from both on rods."""
    theta = math.radians(theta_deg)
    x, z = length * math.sin(theta), length * math.cos(theta)
    obj = make_mesh_object("Hanger", [(-x, 0, z), (x, 0, z), (0, 0, 0)], edges=[(0, 2), (1, 2)])
    pin(obj, [0, 1])
    set_edge_marks(obj, "ms_rigid", [0, 1])
    s = obj.mass_spring
    s.enabled, s.total_mass, s.use_scene_frame_range, s.frame_start, s.frame_end = True, 3.0, False, 1, 30
    return obj, theta


def test_rods_hold_a_hung_mass_with_the_static_tension_at_every_frame(scene, bake):
    """A mass hung at rest from two rods at ±θ: ms_force of each rod is m g / (2 cos θ)
    within 1e-6 (relative) at every frame, the first included."""
    obj, theta = two_rod_hanger()
    result = bake.bake_object(scene, obj)
    arrays = result.simulation_inputs[0]
    g = -float(result.simulation_inputs[1].gravity[2])
    m = float(arrays.masses[2])
    expected = m * g / (2 * math.cos(theta))
    assert g > 9 and m > 0
    for frame in range(1, 31):
        _, _, values = evaluated_edges(obj, frame)
        np.testing.assert_allclose(values["ms_force"], expected, rtol=1e-6)
    # between and beyond the baked frames: the nearest baked frame's tension
    scene.frame_set(40)
    _, _, values = evaluated_edges(obj, 40)
    np.testing.assert_allclose(values["ms_force"], expected, rtol=1e-6)


def test_a_compressed_rod_pushes(scene, bake):
    """A wall bracket: a horizontal strut and a diagonal tie hold a mass. The tie pulls
    with m g √2, the strut pushes with m g (negative)."""
    obj = make_mesh_object("Bracket", [(0, 0, 0), (0, 0, 1), (1, 0, 0)], edges=[(0, 2), (1, 2)])
    pin(obj, [0, 1])
    set_edge_marks(obj, "ms_rigid", [0, 1])
    s = obj.mass_spring
    s.enabled, s.total_mass, s.use_scene_frame_range, s.frame_start, s.frame_end = True, 2.0, False, 1, 10
    result = bake.bake_object(scene, obj)
    m, g = float(result.simulation_inputs[0].masses[2]), 9.81
    for frame in (1, 5, 10):
        _, _, values = evaluated_edges(obj, frame)
        strut, tie = values["ms_force"]
        assert strut == pytest.approx(-m * g, rel=1e-5)
        assert tie == pytest.approx(m * g * math.sqrt(2), rel=1e-5)
        assert values["ms_force_level"][1] == pytest.approx(1.0, rel=1e-6)  # the largest


def test_show_forces_adds_and_removes_only_its_modifier_and_material(scene, bake, forces):
    obj = make_grid(nx=4, ny=3)
    pin(obj, [0, 3])
    obj.mass_spring.enabled = True
    obj.mass_spring.frame_end = 10
    obj.mass_spring.use_scene_frame_range = False
    bake.bake_object(scene, obj)
    before = mesh_fingerprint(obj)
    slots = [slot.material for slot in obj.material_slots]
    obj.mass_spring.show_forces = True
    assert [m.name for m in obj.modifiers] == [forces.DATA_MODIFIER, forces.DISPLAY_MODIFIER]
    assert bpy.data.materials.get(forces.MATERIAL) is not None
    scene.frame_set(5)
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    assert [m.name for m in evaluated.materials] == [forces.MATERIAL]
    assert evaluated.attributes["ms_force_color"].domain == 'POINT'
    obj.mass_spring.show_forces = False
    scene.frame_set(before["frame"])
    assert mesh_fingerprint(obj) == before
    assert [slot.material for slot in obj.material_slots] == slots
    assert bpy.data.materials.get(forces.MATERIAL) is None
    # on before the bake: the bake shows them; Free Bake removes everything it added
    obj.mass_spring.show_forces = True
    bake.bake_object(scene, obj)
    assert forces.shown(obj)
    assert bake.free_bake(obj)
    assert not obj.modifiers and not any(a.name.startswith(("ms_", ".ms_rod")) for a in obj.data.attributes)


REOPEN = r"""
import bpy, numpy as np
RESULT = {"addon": hasattr(bpy.types.Object, "mass_spring")}
bpy.ops.wm.open_mainfile(filepath="{blend}")
scene = bpy.context.scene
obj = bpy.data.objects["Bracket"]
scene.frame_set(6)
mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
RESULT["force"] = [a.value for a in mesh.attributes["ms_force"].data]
RESULT["strain"] = [a.value for a in mesh.attributes["ms_strain"].data]
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
cam.location, cam.rotation_euler = (0.5, -4.0, 0.5), (1.5708, 0.0, 0.0)
scene.camera = cam
scene.render.resolution_x = scene.render.resolution_y = 96
scene.render.film_transparent = True
colours = {}
for engine in ("BLENDER_WORKBENCH", "CYCLES"):
    scene.render.engine = engine
    if engine == "CYCLES":
        scene.cycles.samples, scene.cycles.device = 4, "CPU"
        world = bpy.data.worlds.new("W"); scene.world = world
        world.color = (1.0, 1.0, 1.0)
    else:
        scene.display.shading.color_type = 'VERTEX'
        scene.display.shading.light = 'FLAT'
    scene.render.filepath = "{out}_" + engine + ".png"
    bpy.ops.render.render(write_still=True)
    image = bpy.data.images.load(scene.render.filepath)
    px = np.array(image.pixels[:]).reshape(-1, 4)
    px = px[px[:, 3] > 0.5]
    r, g, b = px[:, 0], px[:, 1], px[:, 2]
    red = int(((r > b + 0.1) & (r > g)).sum())
    blue = int(((b > r + 0.1) & (b > g)).sum())
    colours[engine] = [red, blue]
RESULT["colours"] = colours
"""


def test_baked_forces_play_and_render_without_the_addon(scene, bake, tmp_path):
    """Saved, then reopened in a fresh Blender without the add-on: the attributes are
    computed there, and the forces render red (the tie) and blue (the strut) in Workbench
    and in Cycles."""
    obj = make_mesh_object("Bracket", [(0, 0, 0), (0, 0, 0.5), (1, 0, 0)], edges=[(0, 2), (1, 2)])
    pin(obj, [0, 1])
    set_edge_marks(obj, "ms_rigid", [0, 1])
    s = obj.mass_spring
    s.enabled, s.total_mass, s.use_scene_frame_range, s.frame_start, s.frame_end = True, 2.0, False, 1, 10
    s.show_forces = True
    bake.bake_object(scene, obj)
    scene.frame_set(6)
    _, _, here = evaluated_edges(obj, 6)
    blend = tmp_path / "bracket.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    out = run_python(REOPEN.replace("{blend}", str(blend)).replace("{out}", str(tmp_path / "render")),
                     blender_env(tmp_path / "home"), timeout=600)
    assert out["addon"] is False
    # (the mesh's two edges come first; the tubes of Show Forces follow them)
    np.testing.assert_allclose(out["force"][:2], here["ms_force"][:2], rtol=1e-6)
    np.testing.assert_allclose(out["strain"][:2], here["ms_strain"][:2], atol=1e-7)
    assert here["ms_force"][0] < 0 < here["ms_force"][1]
    for engine, (red, blue) in out["colours"].items():
        assert red >= 5 and blue >= 5, (engine, red, blue)
