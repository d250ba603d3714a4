"""Self-collision baked in real Blender (issue 37): a ribbon falling into folds on the
floor, checked frame by frame with Blender's own BVH overlap of the baked mesh; the
settings, the automatic distance, refusals and the command line."""

from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import make_mesh_object, require_bpy, submodule

bpy = require_bpy()
from mathutils.bvhtree import BVHTree  # noqa: E402  (after the skip above)

import mass_spring  # noqa: E402

FLOOR = [(-3, -3, 0), (3, -3, 0), (3, 3, 0), (-3, 3, 0)]


def make_floor():
    floor = make_mesh_object("Floor", FLOOR, faces=[(0, 1, 2, 3)])
    floor.modifiers.new("Collision", 'COLLISION')
    floor.collision.thickness_outer = 0.005
    return floor


def make_ribbon(self_collision, frames=48):
    """A ribbon 0.2 x 1.6 m (6 x 41 vertices, 4 cm apart) standing on end, tilted 8
    degrees, 2 cm over the floor: it falls and folds onto itself."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    strip = mass_spring.presets.cloth(nx=6, ny=41, spacing=0.04, plane="XZ")
    tilt = np.radians(8)
    x = strip.positions
    positions = np.column_stack([x[:, 0], x[:, 1] - np.sin(tilt) * x[:, 2], np.cos(tilt) * x[:, 2] + 0.02])
    obj = make_mesh_object("Ribbon", positions, faces=strip.faces)
    s = obj.mass_spring
    s.enabled = True
    s.total_mass, s.stiffness, s.shear_stiffness, s.damping = 0.3, 300.0, 30.0, 0.01
    s.bending_rigidity = 1e-4
    s.self_collision = self_collision
    return obj


def baked_frames(obj):
    """The baked shape keys' positions, (F, N, 3) in object space."""
    keys = [k for k in obj.data.shape_keys.key_blocks[1:]]
    out = np.empty((len(keys), len(obj.data.vertices) * 3), dtype=np.float32)
    for k, key in enumerate(keys):
        key.data.foreach_get("co", out[k])
    return out.reshape(len(keys), -1, 3)


def intersecting_faces(obj, positions):
    """Pairs of faces that share no vertex and intersect, by Blender's BVH overlap."""
    polygons = [tuple(p.vertices) for p in obj.data.polygons]
    tree = BVHTree.FromPolygons([tuple(map(float, p)) for p in positions], polygons, epsilon=0.0)
    return [(a, b) for a, b in tree.overlap(tree) if a < b and not set(polygons[a]) & set(polygons[b])]


def test_a_ribbon_folding_on_the_floor_never_passes_through_itself(scene):
    bake = submodule("bake")
    make_floor()
    crossed = {}
    for on in (True, False):
        ribbon = make_ribbon(on)
        bake.bake_object(scene, ribbon)
        frames = baked_frames(ribbon)
        assert frames[-1, :, 2].max() < 0.5  # it has fallen and folded
        crossed[on] = [len(intersecting_faces(ribbon, x)) for x in frames]
        bpy.data.objects.remove(ribbon)
    assert sum(crossed[True]) == 0, crossed[True]
    assert sum(crossed[False]) > 100 and sum(c > 0 for c in crossed[False]) > 10  # without: through itself


def test_the_automatic_distance_is_a_quarter_of_the_median_edge(scene):
    simulation = submodule("simulation")
    mesh_arrays = submodule("mesh_arrays")
    bake = submodule("bake")
    ribbon = make_ribbon(True)
    ribbon.scale = (2.0, 2.0, 2.0)  # world space: edges of 8 cm
    bpy.context.view_layer.update()
    arrays = mesh_arrays.mesh_to_arrays(ribbon)
    settings = bake.simulation_settings(scene, ribbon)
    world = simulation.transform_points(np.array(ribbon.matrix_world), arrays.local_positions)
    assert simulation.self_collision_distance(world, arrays, settings) == pytest.approx(0.02, rel=1e-6)
    ribbon.mass_spring.self_collision_distance = 0.005
    settings = bake.simulation_settings(scene, ribbon)
    assert simulation.self_collision_distance(world, arrays, settings) == pytest.approx(0.005, rel=1e-6)
    ribbon.mass_spring.self_collision = False
    settings = bake.simulation_settings(scene, ribbon)
    assert simulation.self_collision_distance(world, arrays, settings) == 0.0


def test_automatic_distance_stays_below_parts_modelled_close(scene):
    """Two separate rows of a mesh 1 cm apart, edges 10 cm long: the automatic distance is
    half of the 1 cm, not a quarter of 10 cm (that the mesh could not hold at rest)."""
    simulation = submodule("simulation")
    mesh_arrays = submodule("mesh_arrays")
    bake = submodule("bake")
    vertices = [(0.1 * i, 0, 1) for i in range(6)] + [(0.1 * i, 0, 1.01) for i in range(6)]
    edges = [(i, i + 1) for i in range(5)] + [(6 + i, 7 + i) for i in range(5)]
    obj = make_mesh_object("Rows", vertices, edges=edges)
    obj.mass_spring.enabled = True
    obj.mass_spring.self_collision = True
    arrays = mesh_arrays.mesh_to_arrays(obj)
    settings = bake.simulation_settings(scene, obj)
    world = simulation.transform_points(np.array(obj.matrix_world), arrays.local_positions)
    assert simulation.self_collision_distance(world, arrays, settings) == pytest.approx(0.005, rel=1e-4)


def test_parts_nearly_touching_are_named(scene):
    """Two rows of 10 cm edges modelled 20 micrometres apart: an automatic distance of half
    that would stall the bake (the core refuses one under a thousandth of the median edge).
    Refused before anything is written, naming the parts; 1 cm apart, they bake."""
    bake = submodule("bake")
    errors = submodule("errors")
    def rows(gap):
        vertices = [(0.1 * i, 0, 1) for i in range(6)] + [(0.1 * i, 0, 1 + gap) for i in range(6)]
        edges = [(i, i + 1) for i in range(5)] + [(6 + i, 7 + i) for i in range(5)]
        obj = make_mesh_object(f"Rows{gap}", vertices, edges=edges)
        obj.mass_spring.enabled = True
        obj.mass_spring.self_collision = True
        return obj
    close = rows(2e-5)
    scene.frame_start, scene.frame_end = 1, 3
    with pytest.raises(errors.BakeError, match=r"self-collision: (vertex|edge) [\d-]+ and (vertex|edge) [\d-]+ share "
                                               r"no vertex but are only 2e-05 m apart as modelled.*stall the bake"):
        bake.bake_object(scene, close)
    assert close.data.shape_keys is None
    bake.bake_object(scene, rows(0.01))


def test_a_distance_the_mesh_cannot_hold_is_refused_and_nothing_is_written(scene):
    bake = submodule("bake")
    errors = submodule("errors")
    ribbon = make_ribbon(True, frames=5)
    # Parts that are not neighbours in the mesh (two rows of quads apart) are 8 cm apart.
    ribbon.mass_spring.self_collision_distance = 0.09
    with pytest.raises(errors.BakeError, match=r"self-collision distance 0\.09 m is more than the mesh can hold: "
                                               r"vertex \d+ and triangle [\d-]+ share no vertex but are 0\.08"):
        bake.bake_object(scene, ribbon)
    assert ribbon.data.shape_keys is None


def test_the_command_line_turns_self_collision_on_and_off(scene):
    cli = submodule("cli")
    parser = cli.build_parser()
    obj = make_ribbon(False, frames=5)
    obj.mass_spring.self_collision_distance = 0.003
    args = cli.check_args(parser.parse_args(["--self-collision", "in.blend", "--self-friction", "0.5"]), parser)
    assert args.input == "in.blend"  # a flag: it takes no value from the next word
    overrides = cli.bake_overrides(scene, obj, args)
    assert overrides["self_collision"] is True and "self_collision_distance" not in overrides
    assert overrides["self_friction"] == 0.5
    args = cli.check_args(parser.parse_args(["in.blend", "--self-collision-distance", "0.004"]), parser)
    overrides = cli.bake_overrides(scene, obj, args)
    assert overrides["self_collision"] is True and overrides["self_collision_distance"] == 0.004
    args = cli.check_args(parser.parse_args(["in.blend", "--no-self-collision"]), parser)
    assert cli.bake_overrides(scene, obj, args)["self_collision"] is False
    for bad in (["--self-collision-distance", "-1"], ["--self-friction", "-0.1"],
                ["--self-collision-distance", "0.01", "--no-self-collision"],
                ["--self-collision", "--no-self-collision"]):
        with pytest.raises(SystemExit):
            cli.check_args(parser.parse_args(["in.blend", *bad]), parser)


def make_net_and_rope(rope_collides=True, frames=24):
    """Two objects: a net of wires (11 x 11 vertices 10 cm apart, no faces) pinned at its
    corners, and a rope (40 segments, 1.2 m) 10 cm above it, both with Self Collision on
    at 1 cm (the rope's as asked)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    n = 11
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    idx = np.arange(n * n).reshape(n, n)
    net_edges = np.vstack([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                           np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
    net = make_mesh_object("Net", np.column_stack([i.ravel() * 0.1 - 0.5, j.ravel() * 0.1 - 0.5, np.zeros(n * n)]),
                           edges=net_edges)
    net.vertex_groups.new(name="Pins").add([0, n - 1, n * n - n, n * n - 1], 1.0, 'REPLACE')
    t = np.linspace(0, 1, 41)[:, None]
    rope = make_mesh_object("Rope", (-0.6, 0.03, 0.1) + t * (1.2, 0.12, 0), edges=[(k, k + 1) for k in range(40)])
    for obj, mass in ((net, 0.3), (rope, 0.2)):
        s = obj.mass_spring
        s.enabled = True
        s.total_mass, s.stiffness, s.damping = mass, 2000.0, 0.2
        s.self_collision, s.self_collision_distance = True, 0.01
    net.mass_spring.pin_group = "Pins"
    rope.mass_spring.self_collision = rope_collides
    return net, rope, net_edges, np.array([(k, k + 1) for k in range(40)])


def test_objects_baked_together_collide_with_each_other(scene):
    """A rope dropped across a pinned net, the two baked in one go: it never passes
    through the net (checked at every baked frame) and lies in it; each object writes its
    own bake. Without the rope's self-collision the two are baked apart: it falls through."""
    from test_core_self_contact import closest_unrelated_segments
    bake = submodule("bake")
    net, rope, net_edges, rope_edges = make_net_and_rope()
    results = {r.object_name: r for r in bake.bake_scene(scene)}
    assert set(results) == {"Net", "Rope"}
    both = np.concatenate([results["Net"].world_positions(), results["Rope"].world_positions()], axis=1)
    for x in both:
        assert closest_unrelated_segments(x.astype(np.float64), net_edges, rope_edges + 121) >= 0.005
    assert both[-1, 60, 2] < -0.01  # the net sags under the rope ...
    # ... which lies in it: its middle may dip into a 10 cm cell between wires, not
    # through it (baked alone, it falls through, to below -1 m)
    assert both[-1, 121 + 20, 2] > both[-1, :121, 2].min() - 0.05
    for obj in (net, rope):
        assert len(obj.data.shape_keys.key_blocks) == 1 + 24
    # the rope's bake is its share of the simulation of both: simulated again, the same
    exact = results["Rope"].positions
    np.testing.assert_allclose(exact, results["Rope"].world_positions(), atol=2e-6)
    for obj in (net, rope):
        bake.free_bake(obj)
    rope.mass_spring.self_collision = False
    fell = {r.object_name: r for r in bake.bake_scene(scene)}["Rope"]
    assert fell.world_positions()[-1, 20, 2] < -1.0  # baked alone, it fell through


def test_the_bake_button_bakes_the_selected_objects_together(scene):
    """Bake with the net active and the rope selected: both baked, as one simulation (the
    same frames as the scene's bake of the two)."""
    bake = submodule("bake")
    net, rope, _, _ = make_net_and_rope(frames=8)
    expected = {r.object_name: r.local_positions for r in bake.bake_scene(scene)}
    for obj in (net, rope):
        bake.free_bake(obj)
    bpy.ops.object.select_all(action='DESELECT')
    rope.select_set(True)
    net.select_set(True)
    bpy.context.view_layer.objects.active = net
    assert bpy.ops.mass_spring.bake() == {'FINISHED'}
    for obj in (net, rope):
        np.testing.assert_array_equal(baked_frames(obj), expected[obj.name])


def test_the_command_bakes_enabled_objects_together(scene, tmp_path, capfd):
    """The headless command bakes every enabled object; the two with Self Collision on as
    one simulation: the saved file, reopened, plays the rope lying in the net."""
    from test_core_self_contact import closest_unrelated_segments
    net, rope, net_edges, rope_edges = make_net_and_rope(frames=12)
    path = tmp_path / "net.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    out = tmp_path / "baked.blend"
    assert submodule("cli").execute([str(path), "--output", str(out)]) == 0
    assert "Net, Rope: 162 vertices" in capfd.readouterr().err
    bpy.ops.wm.open_mainfile(filepath=str(out))
    net, rope = bpy.data.objects["Net"], bpy.data.objects["Rope"]
    x = np.concatenate([baked_frames(net)[-1], baked_frames(rope)[-1]]).astype(np.float64)
    assert closest_unrelated_segments(x, net_edges, rope_edges + 121) >= 0.005
    assert x[121:, 2].min() < 0.05  # the rope has come down onto the net


def test_a_failed_bake_of_objects_together_leaves_both_as_they_were(scene):
    """The net's distance (20 cm) more than its own wires hold (10 cm apart): the bake of
    the two together fails naming it, and both keep their previous bakes untouched."""
    bake = submodule("bake")
    net, rope, _, _ = make_net_and_rope(frames=6)
    bake.bake_scene(scene)
    before = {obj.name: baked_frames(obj).copy() for obj in (net, rope)}
    net.mass_spring.self_collision_distance = 0.2
    with pytest.raises(bake.BakeError, match=r"'Net', 'Rope' \(baked together\).*distance 0\.2 m is more than"):
        bake.bake_scene(scene)
    for obj in (net, rope):
        np.testing.assert_array_equal(baked_frames(obj), before[obj.name])


def test_live_previews_of_objects_together_collide_as_their_bake(scene):
    """Live Preview on for the rope over the net, both with Self Collision on: the two
    previews are one simulation, as their bake is, so each shows the frames its bake then
    writes (the bake takes the previews' simulation over, and a bake from scratch gives
    the same frames), and the rope lies in the net. With the net's preview off, the rope's
    preview is of the rope alone: it falls through."""
    from test_addon_helpers import local_coordinates
    bake, live = submodule("bake"), submodule("live")
    net, rope, _, _ = make_net_and_rope()
    for obj in (net, rope):
        obj.mass_spring.live_preview = True
    for frame in range(1, 25):
        scene.frame_set(frame)
    shown = {obj.name: local_coordinates(obj) for obj in (net, rope)}
    assert live.status(rope) == live.status(net) == "24 of 24 frames cached"
    assert live._previews[live.key(rope)].together is live._previews[live.key(net)].together is not None
    assert shown["Rope"][20, 2] > shown["Net"][:, 2].min() - 0.05  # in the net, not through it
    batch = bake.Batch(scene, [net, rope])
    assert batch.runs[0].simulated  # it takes the previews' simulation over: nothing to compute again
    results = {r.object_name: r for r in batch.finish()}
    for name in ("Net", "Rope"):
        np.testing.assert_array_equal(results[name].local_positions[-1], shown[name])
    fresh = {r.object_name: r for r in bake.bake_scene(scene)}  # baked anew, the same frames
    for name in ("Net", "Rope"):
        np.testing.assert_array_equal(fresh[name].local_positions, results[name].local_positions)
    for obj in (net, rope):
        bake.free_bake(obj)
    rope.mass_spring.live_preview = True  # the bake switched both off; the net's stays off
    for frame in (1, 24):
        scene.frame_set(frame)
    assert live._previews[live.key(rope)].together is None
    assert local_coordinates(rope)[20, 2] < -1.0


def test_a_bake_of_half_played_previews_together_computes_the_rest_the_same(scene):
    """Previews of the rope and the net played to frame 12 of 24: their bake goes on from
    their simulation (the same object, not computed again) and writes what a bake from
    scratch writes."""
    bake, live = submodule("bake"), submodule("live")
    net, rope, _, _ = make_net_and_rope()
    for obj in (net, rope):
        obj.mass_spring.live_preview = True
    scene.frame_set(12)
    previewed = live._previews[live.key(net)].together.simulation
    assert previewed.frames_done == 12
    batch = bake.Batch(scene, [net, rope])
    assert batch.runs[0].simulation is previewed and not batch.runs[0].simulated
    bake.run_job(batch.runs[0])
    results = {r.object_name: r for r in batch.finish()}
    fresh = {r.object_name: r for r in bake.bake_scene(scene)}
    for name in ("Net", "Rope"):
        np.testing.assert_array_equal(fresh[name].local_positions, results[name].local_positions)


def make_layer(name, height, n=5, spacing=0.1):
    """A flat n x n sheet of quads at `height`, Self Collision on with the automatic distance."""
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    idx = np.arange(n * n).reshape(n, n)
    faces = np.column_stack([idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()])
    obj = make_mesh_object(name, np.column_stack([i.ravel() * spacing, j.ravel() * spacing, np.full(n * n, height)]),
                           faces=faces)
    s = obj.mass_spring
    s.enabled, s.total_mass, s.stiffness, s.self_collision = True, 0.1, 500.0, True
    return obj


def test_layered_objects_bake_together_with_automatic_distances(scene):
    """Two sheets of 10 cm quads modelled 1 cm apart: alone, each would keep a quarter of its
    edge (2.5 cm), which the two together could not hold; baked together, the automatic
    distance of each is half their gap, and the bake runs."""
    simulation = submodule("simulation")
    mesh_arrays = submodule("mesh_arrays")
    bake = submodule("bake")
    scene.frame_start, scene.frame_end = 1, 4
    lower, upper = make_layer("Lower", 1.0), make_layer("Upper", 1.01)
    parts = []
    for obj in (lower, upper):
        arrays = mesh_arrays.mesh_to_arrays(obj)
        world = simulation.transform_points(np.array(obj.matrix_world), arrays.local_positions)
        parts.append((arrays, bake.simulation_settings(scene, obj), world))
        assert simulation.self_collision_distance(world, arrays, parts[-1][1]) == pytest.approx(0.025, rel=1e-6)
    assert simulation.self_collision_distances(parts) == pytest.approx([0.005, 0.005], rel=1e-4)
    upper.mass_spring.self_collision_distance = 0.004  # the user's own is kept; the other's still fits
    parts[1] = (parts[1][0], bake.simulation_settings(scene, upper), parts[1][2])
    assert simulation.self_collision_distances(parts) == pytest.approx([0.005, 0.004], rel=1e-4)
    upper.mass_spring.integrator, upper.mass_spring.use_gravity = 'IMPLICIT_EULER', False
    results = {r.object_name: r for r in bake.bake_scene(scene)}
    gap = results["Upper"].world_positions()[:, :, 2] - results["Lower"].world_positions()[:, :, 2]
    assert gap.min() > 0.004  # they fall side by side, apart
    assert gap.max() < 0.0101  # the upper one falls too: one simulation has the first's gravity ...
    assert results["Upper"].warnings == [  # ... and says so
        "'Upper' was baked together with 'Lower', with the integrator and gravity of 'Lower' (one simulation "
        "has one solver)"]
    assert results["Lower"].warnings == []


def test_objects_of_different_sizes_bake_together(scene):
    """A sheet of 1 mm quads and one of 1 m quads with more edges, baked together: each
    keeps a quarter of its own edge, and the fine one's is not measured against the coarse
    one's edges (the core refused it: 'a thousandth of the median edge, 1 m')."""
    bake = submodule("bake")
    scene.frame_start, scene.frame_end = 1, 3
    make_layer("Fine", 1.0, n=4, spacing=0.001)
    make_layer("Coarse", 1.0, n=8, spacing=1.0).location = (2, 2, 0)
    results = {r.object_name: r for r in bake.bake_scene(scene)}
    assert sorted(results) == ["Coarse", "Fine"]
    for name, size in (("Fine", 0.003), ("Coarse", 7.0)):
        z = results[name].world_positions()[:, :, 2]
        assert z[-1].max() < z[0].min()  # both fell, each whole
        assert np.ptp(results[name].world_positions()[-1, :, 0]) == pytest.approx(size, rel=1e-3)


def test_group_errors_name_the_object_and_its_vertex(scene):
    """The core numbers the vertices of objects simulated together one after the other; a
    failure names each object's own: the rope's vertex, not the system's."""
    simulation = submodule("simulation")
    parts = [("Net", 121), ("Rope", 41)]
    assert simulation.name_parts("vertex 125 and edge 3-4 share no vertex", parts) == \
        "vertex 4 of 'Rope' and edge 3-4 of 'Net' share no vertex"
    assert simulation.name_parts("edge 130-131 and triangle 0-1-12", parts) == \
        "edge 9-10 of 'Rope' and triangle 0-1-12 of 'Net'"
    assert simulation.name_parts("vertices 120, 121 are held", parts) == "vertices 120 of 'Net', 0 of 'Rope' are held"
    assert simulation.name_parts("between vertices 130 and 131", parts) == \
        "between vertices 9 of 'Rope' and 10 of 'Rope'"
    for other in ("collider triangle 5 uses vertex 200 (collider vertices 3)",  # numbers not of the parts
                  "edge 150 is marked both rigid and rope", "vertex 170", "mass 130 would pass through"):
        assert simulation.name_parts(other, parts) == other
    bake = submodule("bake")
    net, rope, _, _ = make_net_and_rope(frames=6)
    rope.mass_spring.self_collision_distance = 0.09  # its 3 cm segments cannot hold it
    with pytest.raises(bake.BakeError, match=r"\(baked together\).*distance 0\.09 m is more than the mesh can hold: "
                                             r"(vertex|edge) [\d-]+ of 'Rope' and edge [\d-]+ of 'Rope' share no vertex"):
        bake.bake_scene(scene)
