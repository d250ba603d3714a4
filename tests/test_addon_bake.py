"""The bake inside real Blender (bpy module, in this process) against the core run directly."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from test_addon_helpers import (
    make_grid,
    make_mesh_object,
    mesh_fingerprint,
    pin,
    require_bpy,
    set_edge_marks,
    submodule,
    world_coordinates,
)

bpy = require_bpy()
import mass_spring  # noqa: E402  (after the skip above)

FPS = 24
SUBSTEPS = 5


@pytest.fixture
def bake():
    return submodule("bake")


def configure(obj, **overrides):
    settings = obj.mass_spring
    settings.enabled = True
    settings.total_mass = 2.0
    settings.stiffness = 300.0
    settings.damping = 0.2
    settings.substeps = SUBSTEPS
    settings.integrator = 'GENERALIZED_ALPHA'
    settings.rho_inf = 0.8
    for name, value in overrides.items():
        setattr(settings, name, value)
    return settings


def core_reference(world_start, masses, pinned, edges, frames, stiffness=300.0, damping=0.2,
                   rigid=None, pin_targets=None, gravity=(0.0, 0.0, -9.81), velocities=None,
                   accuracy=0.01, locality_order=False):
    """The core run directly on the same system: positions (F, N, 3) per frame, with the
    panel's default error control (accuracy, the core's tolerance).

    Blender stores float properties in single precision: use the values it holds.
    """
    damping, rho_inf = float(np.float32(damping)), float(np.float32(0.8))
    accuracy = float(np.float32(accuracy))
    gravity = np.asarray(gravity, dtype=np.float32).astype(float)
    rigid = np.zeros(len(edges), dtype=bool) if rigid is None else rigid
    mss = mass_spring.MassSpringSystem3d.from_arrays(
        world_start, masses, fixed=pinned, velocities=velocities, springs=edges[~rigid],
        stiffness=stiffness, damping=damping, constraints=edges[rigid], gravity=np.array(gravity),
        locality_order=locality_order)
    mss.set_integrator("generalized_alpha", rho_inf=rho_inf)
    mss.tolerance = accuracy
    out = [mss.vertex_positions()]
    for k in range(1, frames):
        if pin_targets is not None:
            mss.fix_positions = pin_targets(k)[np.asarray(mss.fixed_vertices)]
        mss.simulate(1.0 / FPS, SUBSTEPS)
        out.append(mss.vertex_positions())
    return np.array(out)


def grid_edges(obj):
    pairs = np.empty(len(obj.data.edges) * 2, dtype=np.int32)
    obj.data.edges.foreach_get("vertices", pairs)
    return pairs.reshape(-1, 2).astype(np.int64)


def at_frame(scene, obj, frame):
    scene.frame_set(frame)
    return world_coordinates(obj)


# --------------------------------------------------------------------------- agreement


def test_shape_key_bake_matches_core(scene, bake):
    obj = make_grid(nx=5, ny=4, location=(0.5, -0.2, 1.0))
    obj.rotation_euler = (0.3, 0.0, 0.4)
    bpy.context.view_layer.update()
    configure(obj)
    pin(obj, [0, 4])
    start = world_coordinates(obj)

    result = bake.bake_object(scene, obj)

    n = len(start)
    pinned = np.zeros(n, dtype=bool)
    pinned[[0, 4]] = True
    reference = core_reference(start, np.full(n, 2.0 / n), pinned, grid_edges(obj), 24,
                               pin_targets=lambda k: start)
    assert result.positions.shape == (24, n, 3)
    np.testing.assert_allclose(result.positions, reference, atol=1e-9)
    for frame in (1, 2, 7, 13, 24):
        np.testing.assert_allclose(at_frame(scene, obj, frame), reference[frame - 1], atol=2e-6)
    # Outside the range the first / last state holds.
    np.testing.assert_allclose(at_frame(scene, obj, 40), reference[-1], atol=2e-6)
    # Between frames: linear interpolation of the two neighbours.
    scene.frame_set(10, subframe=0.25)
    np.testing.assert_allclose(world_coordinates(obj), 0.75 * reference[9] + 0.25 * reference[10], atol=2e-6)
    # The unpinned vertices did move (the test is not vacuous).
    assert np.abs(reference[-1] - reference[0]).max() > 0.05


def test_a_mesh_with_its_vertices_shuffled_bakes_with_its_masses_in_locality_order(scene, bake):
    """A modelled mesh's scattered vertex order: the add-on numbers its masses along space
    (locality_order="auto"), and the bake is the core's run so numbered, in vertex order."""
    n = 17
    grid = mass_spring.presets.cloth(n, n, spacing=0.05)
    perm = np.random.default_rng(2).permutation(n * n)  # grid vertex i is mesh vertex perm[i]
    verts = np.empty_like(grid.positions)
    verts[perm] = grid.positions
    obj = make_mesh_object("Shuffled", verts, faces=perm[np.asarray(grid.faces)], location=(0.0, 0.0, 1.0))
    configure(obj)
    pins = perm[[0, n - 1]]
    pin(obj, pins.tolist())
    start = world_coordinates(obj)
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    mss, _ = submodule("simulation").build_system(arrays, bake.simulation_settings(scene, obj), obj.matrix_world)
    order = np.asarray(mss.mass_vertices)
    assert not np.array_equal(order, np.sort(order))  # not vertex order

    result = bake.bake_object(scene, obj)
    frames = result.positions.shape[0]
    pinned = np.zeros(n * n, dtype=bool)
    pinned[pins] = True
    reference = core_reference(start, np.full(n * n, 2.0 / (n * n)), pinned, grid_edges(obj), frames,
                               pin_targets=lambda k: start, locality_order=True)
    np.testing.assert_allclose(result.positions, reference, atol=1e-9)
    assert np.abs(reference[-1] - reference[0]).max() > 0.05


def test_initial_linear_and_angular_velocity(scene, bake):
    obj = make_grid(nx=3, ny=3, location=(1.0, 0.0, 0.0))
    configure(obj, use_gravity=False, initial_velocity=(0.0, 0.0, 1.0),
              initial_angular_velocity=(0.0, 0.0, 2.0))
    start = world_coordinates(obj)
    result = bake.bake_object(scene, obj)
    n = len(start)
    origin = np.array([1.0, 0.0, 0.0])
    velocities = np.array([0.0, 0.0, 1.0]) + np.cross([0.0, 0.0, 2.0], start - origin)
    reference = core_reference(start, np.full(n, 2.0 / n), np.zeros(n, bool), grid_edges(obj), 24,
                               gravity=(0, 0, 0), velocities=velocities)
    np.testing.assert_allclose(result.positions, reference, atol=1e-9)
    np.testing.assert_allclose(at_frame(scene, obj, 24), reference[-1], atol=2e-6)
    # The centre rises at 1 m/s (free flight, no gravity).
    centre = at_frame(scene, obj, 24).mean(axis=0)
    assert centre[2] == pytest.approx(23 / FPS, abs=1e-4)


def test_scene_gravity_switch_is_respected(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    scene.use_gravity = False
    bake.bake_object(scene, obj)
    np.testing.assert_allclose(at_frame(scene, obj, 24), at_frame(scene, obj, 1), atol=1e-6)


def test_rigid_edges_keep_their_length(scene, bake):
    # A pendulum of rods swinging down from horizontal, plus one soft spring across.
    vertices = [(0.0, 0.0, 0.0), (0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 0.3, 0.0)]
    edges = [(0, 1), (1, 2), (2, 3), (1, 3)]
    obj = make_mesh_object("Pendulum", vertices, edges=edges, location=(0, 0, 2))
    configure(obj, stiffness=50.0)
    pin(obj, [0])
    set_edge_marks(obj, "ms_rigid", [0, 1, 2])
    bake.bake_object(scene, obj)
    rods = np.array(edges[:3])
    rest = np.linalg.norm(np.diff(np.array(vertices)[rods], axis=1)[:, 0], axis=1)
    swung = False
    for frame in range(1, 25):
        x = at_frame(scene, obj, frame)
        length = np.linalg.norm(x[rods[:, 1]] - x[rods[:, 0]], axis=1)
        np.testing.assert_allclose(length, rest, rtol=1e-6)
        swung |= x[2, 2] < 1.8
    assert swung, "the pendulum should fall"


def test_rope_edges_go_slack(scene, bake):
    # A mass standing on a rope above its anchor: a rope can't push, so the mass falls
    # freely; a spring of the same stiffness would hold it up.
    obj = make_mesh_object("Rope", [(0, 0, 0), (0, 0, 1)], edges=[(0, 1)])
    configure(obj, stiffness=1000.0, damping=0.0)
    pin(obj, [0])
    set_edge_marks(obj, "ms_rope", [0])
    bake.bake_object(scene, obj)
    t = 4 / FPS
    assert at_frame(scene, obj, 5)[1, 2] == pytest.approx(1.0 - 0.5 * 9.81 * t * t, abs=1e-3)
    obj.data.attributes.remove(obj.data.attributes["ms_rope"])
    bake.bake_object(scene, obj)
    assert at_frame(scene, obj, 5)[1, 2] > 0.98


def test_pins_follow_the_animated_object(scene, bake):
    obj = make_grid(nx=4, ny=3, location=(0, 0, 1))
    configure(obj)
    pin(obj, [0, 3])
    obj.location = (0.0, 0.0, 1.0)
    obj.keyframe_insert("location", frame=1)
    obj.location = (2.0, 0.0, 1.5)
    obj.keyframe_insert("location", frame=24)
    local_pins = np.array([obj.data.vertices[i].co[:] for i in (0, 3)])
    scene.frame_set(5)  # the bake must put the frame back

    bake.bake_object(scene, obj)

    assert scene.frame_current == 5
    free_moved = False
    for frame in (1, 6, 12, 18, 24):
        x = at_frame(scene, obj, frame)
        matrix = np.array(obj.matrix_world)
        expected = local_pins @ matrix[:3, :3].T + matrix[:3, 3]
        np.testing.assert_allclose(x[[0, 3]], expected, atol=2e-6)
        free_moved |= np.abs(x[5] - (np.array(obj.data.vertices[5].co) @ matrix[:3, :3].T + matrix[:3, 3])).max() > 0.01
    assert free_moved
    # The anchors swing the grid to the right: the far edge follows.
    assert at_frame(scene, obj, 24)[10, 0] > at_frame(scene, obj, 1)[10, 0] + 1.0


def test_animated_pin_drags_a_rod_smoothly(scene, bake):
    # The pin of a rod moves 0.1 m per frame from frame 1. It must travel there during the
    # first frame, as during every other: a pin that jumped to its frame-2 place before the
    # first step stretched the rod, which the core refuses (and used to snap shut).
    obj = make_mesh_object("Swing", [(0.0, 0.0, 0.0), (0.0, 0.0, -0.5)], edges=[(0, 1)],
                           location=(0, 0, 2))
    configure(obj)
    pin(obj, [0])
    set_edge_marks(obj, "ms_rigid", [0])
    for frame in (1, 24):
        obj.location = (0.1 * (frame - 1), 0.0, 2.0)
        obj.keyframe_insert("location", frame=frame)
    for curve in _fcurves(obj):
        for point in curve.keyframe_points:
            point.interpolation = 'LINEAR'

    bake.bake_object(scene, obj)

    previous = at_frame(scene, obj, 1)
    for frame in range(2, 25):
        x = at_frame(scene, obj, frame)
        assert np.linalg.norm(x[1] - x[0]) == pytest.approx(0.5, rel=1e-6)
        # The bob lags behind its pin at first and never moves faster than a few pin speeds.
        assert np.linalg.norm(x[1] - previous[1]) < 0.3
        previous = x


def _fcurves(obj):
    """The object's location curves, in Blender 4.x and 5.x (layered actions)."""
    action = obj.animation_data.action
    if hasattr(action, "fcurves"):
        return list(action.fcurves)
    return [c for layer in action.layers for strip in layer.strips
            for bag in strip.channelbags for c in bag.fcurves]


def test_stiffness_attribute_and_mass_group(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    pin(obj, [0, 2])
    attribute = obj.data.attributes.new("stiff", 'FLOAT', 'EDGE')
    scale = np.linspace(0.5, 2.0, len(obj.data.edges)).astype(np.float32)
    attribute.data.foreach_set("value", scale)
    weights = obj.vertex_groups.new(name="Heavy")
    weights.add(list(range(9)), 1.0, 'REPLACE')
    weights.add([4], 3.0 / 1.0, 'REPLACE')  # weights are clamped to 1 by Blender
    weights.add([8], 0.5, 'REPLACE')
    obj.mass_spring.stiffness_attribute = "stiff"
    obj.mass_spring.mass_group = "Heavy"
    start = world_coordinates(obj)
    result = bake.bake_object(scene, obj)
    w = np.ones(9)
    w[8] = 0.5
    pinned = np.zeros(9, bool)
    pinned[[0, 2]] = True
    edges = grid_edges(obj)
    mss = mass_spring.MassSpringSystem3d.from_arrays(
        start, 2.0 * w / w.sum(), fixed=pinned, springs=edges, stiffness=300.0 * scale.astype(float),
        damping=float(np.float32(0.2)), gravity=np.array([0, 0, -9.81], dtype=np.float32).astype(float))
    mss.set_integrator("generalized_alpha", rho_inf=float(np.float32(0.8)))
    mss.tolerance = float(np.float32(0.01))  # the panel's default accuracy
    for _ in range(23):
        mss.simulate(1 / FPS, SUBSTEPS)
    np.testing.assert_allclose(result.positions[-1], mss.vertex_positions(), atol=1e-9)


# --------------------------------------------------------------------- outputs and state


def test_shear_springs_match_core(scene, bake):
    """Shear Stiffness adds a spring across both diagonals of every quad face."""
    nx, ny = 5, 4
    obj = make_grid(nx=nx, ny=ny, location=(0.0, 0.0, 1.0))
    configure(obj, shear_stiffness=150.0, use_scene_frame_range=False, frame_start=1,
              frame_end=12)
    pin(obj, [0, nx - 1])
    start = world_coordinates(obj)

    result = bake.bake_object(scene, obj)

    corner = np.array([j * nx + i for j in range(ny - 1) for i in range(nx - 1)])
    diagonals = np.concatenate([np.column_stack([corner, corner + nx + 1]),
                                np.column_stack([corner + 1, corner + nx])])
    edges = grid_edges(obj)
    n = len(start)
    pinned = np.zeros(n, dtype=bool)
    pinned[[0, nx - 1]] = True
    reference = core_reference(start, np.full(n, 2.0 / n), pinned,
                               np.concatenate([edges, diagonals]), 12,
                               stiffness=np.concatenate([np.full(len(edges), 300.0),
                                                         np.full(len(diagonals), 150.0)]))
    np.testing.assert_allclose(result.positions, reference, atol=1e-9)
    without = core_reference(start, np.full(n, 2.0 / n), pinned, edges, 12)
    assert np.abs(without - reference).max() > 1e-3  # the diagonals changed the motion


def test_bending_springs_match_core(scene, bake):
    """Bending Stiffness adds a spring from every vertex to the ones beyond its neighbours
    along each grid line (mass_spring.bending_pairs of the mesh's faces)."""
    nx, ny = 5, 4
    obj = make_grid(nx=nx, ny=ny, location=(0.0, 0.0, 1.0))
    configure(obj, bending_stiffness=80.0, use_scene_frame_range=False, frame_start=1,
              frame_end=12)
    pin(obj, [0, nx - 1])
    start = world_coordinates(obj)

    result = bake.bake_object(scene, obj)

    idx = np.arange(nx * ny).reshape(ny, nx)
    skips = np.concatenate([np.column_stack([idx[:, :-2].ravel(), idx[:, 2:].ravel()]),
                            np.column_stack([idx[:-2, :].ravel(), idx[2:, :].ravel()])])
    edges = grid_edges(obj)
    n = len(start)
    pinned = np.zeros(n, dtype=bool)
    pinned[[0, nx - 1]] = True
    skips = skips[~pinned[skips].all(axis=1)]
    order = np.lexsort((skips[:, 1], skips[:, 0]))  # bending_pairs come sorted
    reference = core_reference(start, np.full(n, 2.0 / n), pinned,
                               np.concatenate([edges, skips[order]]), 12,
                               stiffness=np.concatenate([np.full(len(edges), 300.0),
                                                         np.full(len(skips), 80.0)]))
    np.testing.assert_allclose(result.positions, reference, atol=1e-9)
    without = core_reference(start, np.full(n, 2.0 / n), pinned, edges, 12)
    assert np.abs(without - reference).max() > 1e-3  # the bending springs changed the motion


@pytest.mark.parametrize("shear", [0.0, 1e4])
def test_shear_springs_keep_a_quad_from_collapsing(scene, bake, shear):
    """A vertical square, one quad, held at its left edge: without diagonals it is a
    hinged parallelogram and its free side swings down by a metre; with diagonals as stiff
    as its edges it is a braced truss and sags by millimetres (m g / k = 1 mm)."""
    obj = make_mesh_object("Quad", [(0, 0, 0), (1, 0, 0), (1, 0, 1), (0, 0, 1)],
                           faces=[(0, 1, 2, 3)], location=(0.0, 0.0, 1.0))
    configure(obj, stiffness=1e4, shear_stiffness=shear, damping=2.0, use_scene_frame_range=False,
              frame_start=1, frame_end=36)
    pin(obj, [0, 3])
    start = world_coordinates(obj)

    result = bake.bake_object(scene, obj)

    drop = (start[[1, 2], 2] - result.positions[:, [1, 2], 2]).max()
    if shear:
        assert drop < 0.01
    else:
        assert drop > 0.5


def test_a_relative_pc2_path_is_the_blend_s(scene, bake, tmp_path, monkeypatch):
    # Found by an adversarial tester: "cache/x.pc2" was written under the process's working
    # folder and stored so; opened from elsewhere the cache was lost.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (tmp_path / "scene").mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene" / "pc2.blend"))
    scene = bpy.context.scene
    obj = make_grid(nx=3, ny=3)
    configure(obj, output='PC2', pc2_path="cache/grid.pc2")
    pin(obj, [0])
    bake.bake_object(scene, obj)
    assert (tmp_path / "scene" / "cache" / "grid.pc2").exists()
    assert not (elsewhere / "cache").exists()
    modifier = next(m for m in obj.modifiers if m.type == 'MESH_CACHE')
    assert modifier.filepath == "//cache/grid.pc2"


def test_pc2_output_with_mesh_cache_first_in_stack(scene, bake, tmp_path):
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "pc2.blend"))
    scene = bpy.context.scene
    obj = make_grid(nx=4, ny=4)
    configure(obj, output='PC2', pc2_path="//cache/grid.pc2")
    pin(obj, [0])
    subsurf = obj.modifiers.new("Subdivision", 'SUBSURF')
    subsurf.show_viewport = False  # compare the raw cage below
    result = bake.bake_object(scene, obj)
    assert (tmp_path / "cache" / "grid.pc2").exists()
    # the bake's motion first, then its forces (forces.py), then the user's modifiers
    assert [m.type for m in obj.modifiers] == ['MESH_CACHE', 'NODES', 'SUBSURF']
    writers = submodule("writers")
    start, rate, samples = writers.read_pc2(str(tmp_path / "cache" / "grid.pc2"))
    assert (start, rate, samples.shape) == (1.0, 1.0, (24, 16, 3))
    for frame in (1, 9, 24):
        np.testing.assert_allclose(at_frame(scene, obj, frame), result.positions[frame - 1], atol=2e-6)
    assert obj.data.shape_keys is None
    # Free Bake removes the modifier it added and nothing else.
    assert bake.free_bake(obj)
    assert [m.name for m in obj.modifiers] == ["Subdivision"]
    # Switching outputs replaces one kind of bake by the other.
    obj.mass_spring.output = 'SHAPE_KEYS'
    bake.bake_object(scene, obj)
    obj.mass_spring.output = 'PC2'
    bake.bake_object(scene, obj)
    assert obj.data.shape_keys is None and len(bpy.data.actions) == 0
    assert [m.type for m in obj.modifiers] == ['MESH_CACHE', 'NODES', 'SUBSURF']
    obj.mass_spring.output = 'SHAPE_KEYS'
    bake.bake_object(scene, obj)
    assert [m.type for m in obj.modifiers] == ['NODES', 'SUBSURF'] and len(obj.data.shape_keys.key_blocks) == 25


def test_objects_whose_names_clean_alike_bake_to_separate_pc2_files(scene, bake, tmp_path):
    # 'Cube.001' and 'Cube_001' both defaulted to //Cube_001.pc2: the second bake
    # overwrote the first, and both objects played the same motion.
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "names.blend"))
    scene = bpy.context.scene
    results = {}
    for name, x in (("Cube.001", 0.0), ("Cube_001", 3.0)):
        obj = make_grid(nx=3, ny=3, location=(x, 0.0, 1.0))
        obj.name = name
        configure(obj, output='PC2', frame_start=1, frame_end=6)
        pin(obj, [0] if name == "Cube.001" else [0, 2])
        results[name] = bake.bake_object(scene, obj)
    paths = {m.filepath for o in scene.objects for m in o.modifiers if m.type == 'MESH_CACHE'}
    assert paths == {"//Cube_001.pc2", "//" + bake.default_pc2_name("Cube.001")}
    assert bake.default_pc2_name("Cube.001").startswith("Cube_001_")
    writers = submodule("writers")
    for name, result in results.items():
        stored = bpy.data.objects[name].modifiers[0].filepath
        _, _, samples = writers.read_pc2(bpy.path.abspath(stored))
        np.testing.assert_allclose(samples[-1], result.local_positions[-1], atol=1e-6)


@pytest.mark.parametrize("how", ["object", "collection", "excluded"])
def test_an_animated_object_blender_does_not_evaluate_is_refused(scene, bake, how):
    # Before: Disabled in Viewports or in a disabled/excluded collection, its animation was
    # not evaluated, the pins stood still and the bake "succeeded". Hidden (H) objects
    # are evaluated and bake as usual.
    obj = make_grid(nx=3, ny=3, location=(0.0, 0.0, 1.0))
    configure(obj, frame_start=1, frame_end=6)
    pin(obj, [0])
    animate_location_and_rotation(obj)
    collection = bpy.data.collections.new("Hidden")
    scene.collection.children.link(collection)
    scene.collection.objects.unlink(obj)
    collection.objects.link(obj)
    if how == "object":
        obj.hide_viewport = True
    elif how == "collection":
        collection.hide_viewport = True
    else:
        bpy.context.view_layer.layer_collection.children["Hidden"].exclude = True
    with pytest.raises(bake.BakeError, match="does not evaluate it.*Enable it"):
        bake.bake_object(scene, obj)
    assert obj.data.shape_keys is None
    obj.hide_viewport = collection.hide_viewport = False
    bpy.context.view_layer.layer_collection.children["Hidden"].exclude = False
    obj.hide_set(True)  # merely hidden: evaluated, so it bakes
    bake.bake_object(scene, obj)
    assert obj.data.shape_keys is not None


def test_refuses_zero_scale(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj)
    obj.scale = (1, 1, 1)
    obj.keyframe_insert("scale", frame=1)
    obj.scale = (1, 0, 1)
    obj.keyframe_insert("scale", frame=24)
    assert_refused(bake, scene, obj, "frame 24", "scale of 0")


def test_free_bake_restores_the_original(scene, bake):
    obj = make_grid(nx=4, ny=3)
    configure(obj)
    pin(obj, [0])
    obj.modifiers.new("Subdivision", 'SUBSURF')
    before = mesh_fingerprint(obj)
    start = world_coordinates(obj)
    bake.bake_object(scene, obj)
    assert obj.data.shape_keys is not None and bake.has_bake(obj)
    assert mesh_fingerprint(obj) != before
    assert bake.free_bake(obj)
    assert mesh_fingerprint(obj) == before
    np.testing.assert_allclose(at_frame(scene, obj, 20), start, atol=1e-7)
    assert not bake.free_bake(obj)  # nothing left to free


def test_bake_again_replaces_the_previous_bake(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    pin(obj, [0])
    bake.bake_object(scene, obj)
    first = at_frame(scene, obj, 24)
    obj.mass_spring.stiffness = 30.0
    scene.frame_end = 12
    bake.bake_object(scene, obj)
    assert len(obj.data.shape_keys.key_blocks) == 1 + 12
    assert len(bpy.data.actions) == 1
    assert not np.allclose(at_frame(scene, obj, 12), first)
    # Switching output replaces the shape keys by a cache, not both.
    bake.free_bake(obj)
    assert obj.data.shape_keys is None and len(bpy.data.actions) == 0


@pytest.mark.parametrize("copy_actions", [True, False])
@pytest.mark.parametrize("then", ["bake", "free"])
def test_rebaking_a_duplicate_keeps_the_originals_bake(scene, bake, then, copy_actions):
    # A copy (Shift+D) keeps the original's bake record, which names the original's action,
    # while its own shape keys play a copy of that action (or, with Duplicate Data's Action
    # off, the same one): baking or freeing the copy removed the original's action and froze
    # it (found by an adversarial test).
    edit = bpy.context.preferences.edit
    if not hasattr(edit, "use_duplicate_action"):
        pytest.skip("this Blender has no Duplicate Data preference for actions")
    kept, edit.use_duplicate_action = edit.use_duplicate_action, copy_actions
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    pin(obj, [0])
    bake.bake_object(scene, obj)
    frame_12 = at_frame(scene, obj, 12)
    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj
    try:
        assert bpy.ops.object.duplicate() == {'FINISHED'}
    finally:
        edit.use_duplicate_action = kept
    copy = bpy.context.active_object
    assert copy is not obj and copy.data is not obj.data
    if then == "bake":
        copy.mass_spring.stiffness = 30.0
        bake.bake_object(scene, copy)
    else:
        assert bake.free_bake(copy) and copy.data.shape_keys is None
    playing = obj.data.shape_keys.animation_data.action
    assert playing is not None and playing.users >= 1
    np.testing.assert_allclose(at_frame(scene, obj, 12), frame_12, atol=1e-6)
    assert all(action.users > 0 for action in bpy.data.actions)  # the copy's own left no orphan
    if then == "bake":
        assert copy.data.shape_keys.animation_data.action not in (None, playing)
        assert not np.allclose(at_frame(scene, copy, 12), frame_12)


def test_cancel_leaves_no_trace(scene, bake):
    obj = make_grid(nx=4, ny=4)
    configure(obj)
    pin(obj, [0])
    before = mesh_fingerprint(obj)
    calls = []
    with pytest.raises(bake.BakeCancelled):
        bake.bake_object(scene, obj, should_cancel=lambda: calls.append(1) or True, budget_seconds=0.0)
    assert calls and mesh_fingerprint(obj) == before

    # With a previous bake the old one stays as it was.
    bake.bake_object(scene, obj)
    baked = mesh_fingerprint(obj)
    obj.mass_spring.stiffness = 10.0
    with pytest.raises(bake.BakeCancelled):
        bake.bake_object(scene, obj, should_cancel=lambda: True, budget_seconds=0.0)
    assert mesh_fingerprint(obj) == baked


def animate_location_and_rotation(obj):
    """Keyframes that move and turn `obj` over frames 1–24: its object space differs
    from world space, and from frame to frame."""
    obj.keyframe_insert("location", frame=1)
    obj.keyframe_insert("rotation_euler", frame=1)
    obj.location = (1.5, -0.5, 2.0)
    obj.rotation_euler = (0.2, 0.0, 1.2)
    obj.keyframe_insert("location", frame=24)
    obj.keyframe_insert("rotation_euler", frame=24)


@pytest.mark.parametrize("output", ['SHAPE_KEYS', 'PC2'])
def test_writers_get_the_float32_object_space_buffer(scene, bake, monkeypatch, tmp_path, output):
    """Each frame goes into one float32 object-space buffer as it is simulated; the
    writers get that buffer itself (no conversion pass over all frames)."""
    if output == 'PC2':
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "stream.blend"))
        scene = bpy.context.scene
    obj = make_grid(nx=4, ny=3, location=(0.0, 0.0, 1.0))
    configure(obj, output=output)
    pin(obj, [0, 3])
    animate_location_and_rotation(obj)
    writers = submodule("writers")
    received = []
    for name in ("write_shape_keys", "stage_pc2"):
        original = getattr(writers, name)

        def spy(*args, original=original):
            received.append(args[-1])
            return original(*args)
        monkeypatch.setattr(writers, name, spy)

    job = bake.BakeJob(scene, obj)
    while not job.step(0.0):
        pass
    buffer = job.simulation.local_positions
    result = job.finish()

    assert len(received) == 1 and received[0] is buffer and result.local_positions is buffer
    assert buffer.dtype == np.float32 and buffer.flags.c_contiguous and buffer.shape == (24, 12, 3)
    moved = False
    for frame in (1, 8, 24):
        scene.frame_set(frame)
        matrix = np.array(obj.matrix_world)
        world = result.positions[frame - 1]
        local = (world - matrix[:3, 3]) @ np.linalg.inv(matrix[:3, :3]).T
        np.testing.assert_allclose(buffer[frame - 1], local, atol=1e-6)
        np.testing.assert_allclose(at_frame(scene, obj, frame), world, atol=2e-6)
        moved |= np.abs(local - world).max() > 0.5
    assert moved  # object space is not world space here: the test can tell them apart


def test_bake_holds_no_float64_copy_of_the_frames(scene, bake):
    """The numpy memory a bake allocates (tracemalloc traces numpy's buffers) stays well
    below the float32 frames plus a float64 copy of them."""
    import tracemalloc

    obj = make_grid(nx=20, ny=20)
    configure(obj, use_scene_frame_range=False, frame_start=1, frame_end=60)
    pin(obj, [0, 19])
    frames_bytes = 60 * 400 * 3 * np.dtype(np.float32).itemsize
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = bake.bake_object(scene, obj)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert result.local_positions.nbytes == frames_bytes
    assert frames_bytes <= peak < 2 * frames_bytes, (peak, frames_bytes)


def test_cancel_halfway_leaves_no_trace(scene, bake, tmp_path):
    """Cancelled after half the frames of an animated object: the previous bake, the
    mesh, the PC2 file and the scene's frame are as before."""
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "cancel.blend"))
    scene = bpy.context.scene
    obj = make_grid(nx=4, ny=4, location=(0.0, 0.0, 1.0))
    configure(obj, output='PC2', pc2_path="//grid.pc2")
    pin(obj, [0])
    animate_location_and_rotation(obj)
    bake.bake_object(scene, obj)
    pc2 = (tmp_path / "grid.pc2").read_bytes()
    played = at_frame(scene, obj, 12)
    scene.frame_set(7)
    baked = mesh_fingerprint(obj)
    obj.mass_spring.stiffness = 10.0
    reached = []

    def halfway():
        reached.append(job_progress[-1])
        return job_progress[-1][0] >= job_progress[-1][1] // 2

    job_progress = []
    with pytest.raises(bake.BakeCancelled):
        bake.bake_object(scene, obj, budget_seconds=0.0, should_cancel=halfway,
                         progress=lambda frame, done, total: job_progress.append((done, total)))
    done, total = reached[-1]
    assert total == 23 and done == total // 2  # cancelled in the middle of the simulation
    assert mesh_fingerprint(obj) == baked
    assert (tmp_path / "grid.pc2").read_bytes() == pc2
    np.testing.assert_allclose(at_frame(scene, obj, 12), played, atol=0)


def test_progress_reports_frames(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    seen = []
    bake.bake_object(scene, obj, progress=lambda frame, done, total: seen.append((frame, done, total)),
                     budget_seconds=0.0)
    assert seen[-1] == (24, 23, 23)
    assert [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)


def test_bake_job_steps_like_the_modal_operator(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    job = bake.BakeJob(scene, obj)
    fractions = []
    while not job.step(0.0):
        fractions.append(job.fraction)
        assert "Esc to cancel" in job.status()
    result = job.finish()
    assert fractions == sorted(fractions) and result.frame_count == 24


class _ModalBake:
    """The modal Bake's own methods (modal, cancel and what they call, bound when the
    add-on is registered) on an object that stands for the running operator: Blender runs
    a modal operator only with a window, which the bpy module has not. The events are the
    timer's ticks and Esc."""
    _timer = _thread = _shown = None

    def __init__(self, bake, scene, objects):
        operator = bpy.types.MASS_SPRING_OT_bake
        for name in ("modal", "cancel", "_advance", "_stop_thread", "_show_status", "_end"):
            setattr(type(self), name, getattr(operator, name))
        self._job = bake.Batch(scene, objects)
        self.reports, self.statuses = [], []

    def report(self, kind, text):
        self.reports.append((kind, text))

    def event(self, kind) -> set:
        import types
        result = self.modal(bpy.context, types.SimpleNamespace(type=kind, value='PRESS', is_repeat=False))
        if self._shown is not None and self._shown not in self.statuses:
            self.statuses.append(self._shown)
        return result

    def run(self) -> set:
        import time
        while (result := self.event('TIMER')) == {'RUNNING_MODAL'}:
            time.sleep(0.001)
        return result


def test_the_modal_bake_simulated_in_a_thread_is_the_synchronous_bake(scene, bake):
    obj = make_grid(nx=4, ny=4)
    configure(obj)
    pin(obj, [0, 3])
    modal = _ModalBake(bake, scene, [obj])
    assert modal.run() == {'FINISHED'}
    percents = [percent for percent, _ in modal.statuses]
    assert percents == sorted(percents) and all("Esc to cancel" in text for _, text in modal.statuses)
    threaded = [np.array([v.co[:] for v in key.data]) for key in obj.data.shape_keys.key_blocks]
    assert bpy.ops.mass_spring.bake() == {'FINISHED'}
    synchronous = [np.array([v.co[:] for v in key.data]) for key in obj.data.shape_keys.key_blocks]
    assert len(threaded) == len(synchronous) == 25
    for a, b in zip(threaded, synchronous):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(threaded[1], threaded[-1])  # it moved


def _long_frame_bake(bake, scene):
    """A bake whose first frame (20 000 substeps) takes tens of seconds, its thread
    started."""
    obj = make_grid(nx=24, ny=24)
    configure(obj, substeps=20000, accuracy=0.0)
    pin(obj, [0, 23])
    modal = _ModalBake(bake, scene, [obj])
    while modal._thread is None:
        assert modal.event('TIMER') == {'RUNNING_MODAL'}
    return obj, modal


@pytest.mark.parametrize("how", ["esc", "cancel"])
def test_esc_stops_the_modal_bake_within_a_long_frame(scene, bake, how):
    # The modal Bake looked at Esc between frames only, and the window froze during a
    # frame. Its thread (SimulationThread) now ends at the core's next step, on Esc as
    # when Blender ends the operator (cancel: the file closed), and the object stays as
    # it was.
    import time
    obj, modal = _long_frame_bake(bake, scene)
    before = mesh_fingerprint(obj)
    time.sleep(0.5)
    assert modal.event('TIMER') == {'RUNNING_MODAL'} and modal._thread.running  # the tick returns at once
    thread, asked = modal._thread, time.perf_counter()
    if how == "esc":
        assert modal.event('ESC') == {'CANCELLED'}
        assert modal.reports == [({'INFO'}, "Mass–Spring bake cancelled: nothing was changed")]
    else:
        modal.cancel(bpy.context)
    assert time.perf_counter() - asked < 2.0 and not thread.running
    assert modal._thread is None and modal._job.runs[0].simulation is None
    assert mesh_fingerprint(obj) == before and obj.data.shape_keys is None


def test_a_stop_asked_while_the_simulation_is_built_ends_it_before_its_first_step(scene, bake):
    import time
    obj = make_grid(nx=4, ny=4)
    configure(obj)
    batch = bake.Batch(scene, [obj])
    while not batch.prepare(time.perf_counter() + 1.0):
        pass
    with pytest.raises(KeyboardInterrupt):
        batch.simulate(stop=lambda: True)
    assert batch.runs[0].simulation.frames_done == 1  # built, not stepped


def test_an_error_in_the_modal_bakes_thread_reaches_its_tick(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj, integrator='EXPLICIT_EULER', stiffness=1e6, substeps=1)
    pin(obj, [0])
    modal = _ModalBake(bake, scene, [obj])
    assert modal.run() == {'CANCELLED'}
    [(kind, text)] = modal.reports
    assert kind == {'ERROR'} and re.match(r"'Grid': frame \d+: the simulation diverged", text)
    assert obj.data.shape_keys is None and modal._thread is None


def test_operators_bake_and_free(scene):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    assert bpy.ops.mass_spring.bake() == {'FINISHED'}
    assert len(obj.data.shape_keys.key_blocks) == 25
    assert bpy.ops.mass_spring.free_bake() == {'FINISHED'}
    assert obj.data.shape_keys is None
    assert not bpy.ops.mass_spring.free_bake.poll()
    # INVOKE in background (no event loop) runs the bake synchronously.
    assert bpy.ops.mass_spring.bake('INVOKE_DEFAULT') == {'FINISHED'}


def test_undo_restores(scene):
    """Undo after Bake and after Free Bake.

    With the bpy module (background mode) Blender does not push the undo step that an
    operator with bl_options {'UNDO'} gets in the UI, so the test pushes it where the
    window manager would (right after the operator finishes) and then undoes through
    the real undo system (memfile undo, as in the UI).
    """
    assert 'UNDO' in bpy.types.MASS_SPRING_OT_bake.bl_options
    assert 'UNDO' in bpy.types.MASS_SPRING_OT_free_bake.bl_options
    assert 'UNDO' in bpy.types.MASS_SPRING_OT_mark_edges.bl_options
    window = bpy.context.window_manager.windows[0]
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    before = mesh_fingerprint(obj)
    with bpy.context.temp_override(window=window):
        bpy.ops.ed.undo_push(message="before bake")
        assert bpy.ops.mass_spring.bake() == {'FINISHED'}
        bpy.ops.ed.undo_push(message="Bake Mass–Spring")
        baked = mesh_fingerprint(bpy.data.objects["Grid"])
        assert baked != before
        bpy.ops.ed.undo()
        assert mesh_fingerprint(bpy.data.objects["Grid"]) == before
        bpy.ops.ed.redo()
        assert mesh_fingerprint(bpy.data.objects["Grid"]) == baked
        bpy.context.view_layer.objects.active = bpy.data.objects["Grid"]
        assert bpy.ops.mass_spring.free_bake() == {'FINISHED'}
        bpy.ops.ed.undo_push(message="Free Bake")
        assert mesh_fingerprint(bpy.data.objects["Grid"]) == before
        bpy.ops.ed.undo()
        assert mesh_fingerprint(bpy.data.objects["Grid"]) == baked
        obj = bpy.data.objects["Grid"]
        bpy.context.scene.frame_set(24)  # undo replaced every data-block: look them up again
        assert not np.allclose(world_coordinates(obj), np.array(before["co"]))  # still plays


# --------------------------------------------------------------------------- edge marks


def test_mark_operators_in_edit_mode(scene):
    obj = make_grid(nx=3, ny=2)
    bpy.ops.object.mode_set(mode='EDIT')
    bpy.ops.mesh.select_all(action='DESELECT')
    import bmesh
    bm = bmesh.from_edit_mesh(obj.data)
    bm.edges.ensure_lookup_table()
    for index in (0, 1):
        bm.edges[index].select = True
    bmesh.update_edit_mesh(obj.data)
    assert bpy.ops.mass_spring.mark_edges(mark='RIGID') == {'FINISHED'}
    overlay = submodule("overlay")
    assert overlay.marked_edge_counts(obj) == {"ms_rigid": 2}
    assert bpy.ops.mass_spring.mark_edges(mark='ROPE') == {'FINISHED'}  # rope replaces rigid
    bm = bmesh.from_edit_mesh(obj.data)
    bm.edges.ensure_lookup_table()
    bm.edges[0].select = False
    bmesh.update_edit_mesh(obj.data)
    assert bpy.ops.mass_spring.mark_edges(mark='ROPE', clear=True) == {'FINISHED'}
    bpy.ops.object.mode_set(mode='OBJECT')
    rigid = np.zeros(len(obj.data.edges), bool)
    rope = np.zeros(len(obj.data.edges), bool)
    obj.data.attributes["ms_rigid"].data.foreach_get("value", rigid)
    obj.data.attributes["ms_rope"].data.foreach_get("value", rope)
    assert not rigid.any() and rope.tolist() == [True] + [False] * (len(rope) - 1)
    assert not bpy.ops.mass_spring.mark_edges.poll()  # Object Mode: nothing to mark
    # The overlay draws the marked edge where it is, in world space.
    segments = overlay.marked_edge_segments(obj, bpy.context.evaluated_depsgraph_get())
    e = obj.data.edges[0].vertices
    matrix = np.array(obj.matrix_world)
    expected = np.array([obj.data.vertices[i].co[:] for i in e]) @ matrix[:3, :3].T + matrix[:3, 3]
    np.testing.assert_allclose(segments["ms_rope"], expected, atol=1e-6)


# ---------------------------------------------------------------------------- bad input


def assert_refused(bake, scene, obj, *words):
    before = mesh_fingerprint(obj) if obj is not None and obj.type == 'MESH' else None
    with pytest.raises(bake.BakeError) as info:
        bake.bake_object(scene, obj)
    message = str(info.value)
    for word in words:
        assert word.lower() in message.lower(), message
    if before is not None:
        assert mesh_fingerprint(obj) == before
    return message


def test_refuses_non_mesh(scene, bake):
    empty = bpy.data.objects.new("Empty", None)
    scene.collection.objects.link(empty)
    assert_refused(bake, scene, empty, "mesh object")
    assert_refused(bake, scene, None, "mesh object")


def test_refuses_mesh_without_edges(scene, bake):
    obj = make_mesh_object("Points", [(0, 0, 0), (1, 0, 0)])
    configure(obj)
    assert_refused(bake, scene, obj, "no edges")


def test_refuses_zero_length_edge(scene, bake):
    obj = make_mesh_object("Doubled", [(0, 0, 0), (1, 0, 0), (1, 0, 0)], edges=[(0, 1), (1, 2)])
    configure(obj)
    assert_refused(bake, scene, obj, "zero length", "edge 1", "merge by distance")


def test_a_vertex_far_astray_is_no_zero_length_edge(scene, bake):
    # Zero length was relative to the mesh's extent: one vertex 1e10 m away made every
    # edge of the grid "zero length" (found by an adversarial test).
    obj = make_grid(nx=4, ny=4)
    configure(obj)
    obj.data.vertices[3].co = (1e10, 0.0, 0.0)
    message = assert_refused(bake, scene, obj, "position beyond")
    assert "zero length" not in message


def test_refuses_non_finite_position(scene, bake):
    """Refused before the simulation, naming the vertex (NaN lengths would slip past the
    zero-length check)."""
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    obj.data.vertices[4].co = (float("nan"), 0.0, 0.0)
    with pytest.raises(bake.BakeError, match="not finite numbers.*vertex 4"):
        bake.bake_object(scene, obj)
    assert obj.data.shape_keys is None


@pytest.mark.parametrize("setting, name", [("shear_stiffness", "Shear Stiffness"),
                                           ("self_collision_distance", "Distance"),
                                           ("stiffness", "Stiffness")])
def test_refuses_settings_that_are_not_numbers(scene, bake, setting, name):
    # Found by an adversarial test: NaN Shear Stiffness baked as 0, a NaN self-collision
    # distance as the automatic one, a NaN Stiffness was named by the core's spring number.
    obj = make_grid(nx=3, ny=3)
    configure(obj, self_collision=True)
    before = mesh_fingerprint(obj)
    setattr(obj.mass_spring, setting, float("nan"))
    with pytest.raises(bake.BakeError, match=f"'{obj.name}': .*{name}.* (is not a number|are not numbers)"):
        bake.bake_object(scene, obj)
    assert mesh_fingerprint(obj) == before


def test_vertices_no_spring_holds_are_named(scene, bake):
    # A Stiffness Group weighted only on the pinned row left every spring between free
    # vertices at 0 N/m, and a pin group with no weight pinned nothing, without a word
    # (found by an adversarial test).
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    top = [6, 7, 8]
    pin(obj, top)
    obj.vertex_groups.new(name="Stiff").add(top, 1.0, 'REPLACE')
    obj.mass_spring.stiffness_group = "Stiff"
    warnings = bake.bake_object(scene, obj).warnings
    assert any("3 free vertex(es) (first: vertex 0) have no spring with stiffness" in w
               and "Stiffness Group 'Stiff'" in w for w in warnings), warnings
    bake.free_bake(obj)
    obj.mass_spring.stiffness_group = ""
    obj.vertex_groups.new(name="Nothing")
    obj.mass_spring.pin_group = "Nothing"
    warnings = bake.bake_object(scene, obj).warnings
    assert any("Pin Group 'Nothing' pins no vertex" in w for w in warnings), warnings
    assert not any("no spring with stiffness" in w for w in warnings)
    bake.free_bake(obj)
    obj.mass_spring.stiffness = 0.0  # no spring holds any vertex: the mesh falls as dust
    warnings = bake.bake_object(scene, obj).warnings
    assert any("9 free vertex(es) (first: vertex 0) have no spring with stiffness" in w
               and "the stiffness of their edges is 0" in w for w in warnings), warnings


def test_a_linked_object_is_refused_before_simulating(scene, bake, tmp_path):
    # Found by an adversarial tester: a linked object was simulated, then its write failed
    # with "'NoneType' object has no attribute 'interface'".
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    pin(obj, [0, 2])
    library, name = tmp_path / "library.blend", obj.name
    bpy.ops.wm.save_as_mainfile(filepath=str(library))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with bpy.data.libraries.load(str(library), link=True) as (_, into):
        into.objects = [name]
    linked = into.objects[0]
    scene = bpy.context.scene
    scene.collection.objects.link(linked)
    with pytest.raises(bake.BakeError, match="linked from .*library.blend.*Make Local"):
        bake.bake_object(scene, linked)
    assert linked.data.shape_keys is None and not linked.modifiers


def test_refuses_all_pinned(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj)
    pin(obj, range(4))
    assert_refused(bake, scene, obj, "every vertex is pinned", "Pins")


def test_refuses_missing_vertex_group(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj, pin_group="Anchors")
    assert_refused(bake, scene, obj, "'Anchors' does not exist")
    obj.mass_spring.pin_group = ""
    obj.mass_spring.mass_group = "Weights"
    assert_refused(bake, scene, obj, "mass vertex group 'Weights'")
    obj.mass_spring.mass_group = ""
    obj.mass_spring.stiffness_attribute = "nope"
    assert_refused(bake, scene, obj, "stiffness attribute 'nope'")
    attribute = obj.data.attributes.new("stiff", 'FLOAT', 'EDGE')
    attribute.data.foreach_set("value", [1.0, float("inf"), 1.0, 1.0])
    obj.mass_spring.stiffness_attribute = "stiff"
    assert_refused(bake, scene, obj, "negative, infinite or not a number on 1 edge(s) (first: edge 1)")


def test_refuses_free_vertex_without_mass(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj, mass_group="Light")
    group = obj.vertex_groups.new(name="Light")
    group.add([0, 1, 2], 1.0, 'REPLACE')
    assert_refused(bake, scene, obj, "vertex 3", "mass")
    pin(obj, [3])  # pinned vertices need no mass
    bake.bake_object(scene, obj)


def test_refuses_edit_mode(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj)
    bpy.ops.object.mode_set(mode='EDIT')
    with pytest.raises(bake.BakeError, match="Edit Mode"):
        bake.bake_object(scene, obj)
    assert not bpy.ops.mass_spring.bake.poll()
    bpy.ops.object.mode_set(mode='OBJECT')
    assert obj.data.shape_keys is None


def test_refuses_existing_shape_keys(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    obj.shape_key_add(name="Basis")
    smile = obj.shape_key_add(name="Smile")
    smile.data[0].co = (0.0, 0.0, 0.5)
    assert_refused(bake, scene, obj, "already has shape keys", "'Smile'")
    assert obj.data.shape_keys.key_blocks["Smile"].data[0].co[2] == pytest.approx(0.5)


def test_refuses_shared_mesh_for_shape_keys(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj)
    twin = bpy.data.objects.new("Twin", obj.data)
    scene.collection.objects.link(twin)
    assert_refused(bake, scene, obj, "shared by 2 objects")
    obj.mass_spring.output = 'PC2'
    assert_refused(bake, scene, obj, "has not been saved")  # PC2 is per object but needs a file


def test_refuses_not_enabled(scene, bake):
    obj = make_grid(nx=2, ny=2)
    assert_refused(bake, scene, obj, "not enabled")


def test_refuses_rigid_edges_with_explicit_integrator(scene, bake):
    obj = make_grid(nx=2, ny=2)
    configure(obj, integrator='RK2')
    set_edge_marks(obj, "ms_rigid", [0])
    assert_refused(bake, scene, obj, "rigid", "Generalized-α")


def test_diverging_simulation_names_frame_and_cure(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj, integrator='EXPLICIT_EULER', stiffness=1e6, substeps=1)
    pin(obj, [0])
    message = assert_refused(bake, scene, obj, "frame", "substeps")
    assert scene.frame_current == 1
    assert not math.isnan(len(message))


def test_modifiers_are_kept_and_work_on_the_baked_cage(scene, bake):
    obj = make_grid(nx=3, ny=3)
    configure(obj)
    pin(obj, [0, 2])
    obj.modifiers.new("Subdivision", 'SUBSURF')
    armature = obj.modifiers.new("Armature", 'ARMATURE')
    result = bake.bake_object(scene, obj)
    assert any("Armature" in w for w in result.warnings)
    assert [m.name for m in obj.modifiers] == ["Mass–Spring Forces", "Subdivision", "Armature"]
    scene.frame_set(24)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    assert len(obj.evaluated_get(depsgraph).data.vertices) > 9  # subdivided
    obj.modifiers.remove(armature)
    obj.modifiers["Subdivision"].show_viewport = False
    np.testing.assert_allclose(at_frame(scene, obj, 24), result.positions[-1], atol=2e-6)


def test_transform_set_by_a_script_without_update_is_used(scene, bake):
    """A script sets the rotation and bakes at once (no depsgraph update in between): the
    bake must use the new transform, not the stale matrix_world. A horizontal rod rotated
    by 90 degrees about Y hangs straight down and must stay there."""
    obj = make_mesh_object("Rod", [(0, 0, 0), (1, 0, 0)], [(0, 1)], location=(0, 0, 2))
    configure(obj, total_mass=1.0)
    pin(obj, [0])
    set_edge_marks(obj, "ms_rigid", [0])
    obj.rotation_euler = (0.0, math.pi / 2, 0.0)  # local +X now points down (-Z)
    result = bake.bake_object(scene, obj)
    bob = result.positions[:, 1]
    # (Blender keeps the rotation in single precision: cos(pi/2) = -4e-8.)
    np.testing.assert_allclose(bob, np.tile([0.0, 0.0, 1.0], (len(bob), 1)), atol=1e-6)


def test_world_positions_from_the_written_frames_match_the_core(scene, bake):
    """BakeResult.world_positions() maps the float32 frames back to world space through
    each frame's matrix: the core's float64 positions to float32 precision."""
    obj = make_grid(nx=4, ny=3, location=(0.5, -0.2, 1.0))
    obj.rotation_euler = (0.3, 0.0, 0.4)
    configure(obj, use_scene_frame_range=False, frame_start=1, frame_end=8)
    pin(obj, [0, 3])
    result = bake.bake_object(scene, obj)
    world = result.world_positions()
    assert world.shape == result.positions.shape and world.dtype == np.float64
    np.testing.assert_allclose(world, result.positions, rtol=0, atol=2e-6)


def test_flat_rod_plate_names_the_cause(scene, bake):
    # A flat triangulated plate, every edge a rod, hung from two corners. Before: "Likely
    # cure: more substeps", and 20 or 100 substeps failed as well. Under error control it
    # may swing on its pins for some frames first; the message names it as it started.
    n = 5
    vertices = [(0.25 * i, 0.25 * j, 0.0) for j in range(n) for i in range(n)]
    faces = [f for j in range(n - 1) for i in range(n - 1)
             for f in ((j * n + i, j * n + i + 1, (j + 1) * n + i + 1),
                       (j * n + i, (j + 1) * n + i + 1, (j + 1) * n + i))]
    obj = make_mesh_object("Plate", vertices, faces=faces, location=(0, 0, 2))
    configure(obj)
    pin(obj, [0, n - 1])
    set_edge_marks(obj, "ms_rigid", range(len(obj.data.edges)))
    before = mesh_fingerprint(obj)
    with pytest.raises(bake.BakeError, match=r"held only by rods that (lie|lay) in one plane.*, a "
                                             r"flat rod network.*give the structure some depth") as err:
        bake.bake_object(scene, obj)
    assert "more substeps" not in str(err.value)
    assert mesh_fingerprint(obj) == before


def test_the_least_accuracy_bakes_and_a_smaller_one_is_named(scene, bake):
    # Found by an adversarial tester: the panel's 1e-9 is stored as 9.99999997e-10, and the
    # core refused it as "tolerance must be 0 (fixed steps) or at least 1e-9, got 1e-09".
    obj = make_grid(nx=2, ny=2)
    configure(obj)
    pin(obj, [0, 1])
    obj.mass_spring.accuracy = 1e-9
    scene.frame_end = 2
    assert np.isfinite(bake.bake_object(scene, obj).positions).all()
    bake.free_bake(obj)
    obj.mass_spring.accuracy = 1e-10
    assert_refused(bake, scene, obj, "Accuracy must be 0 (fixed steps) or at least 1e-09, got 1e-10")
