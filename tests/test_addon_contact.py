"""Bakes that meet the scene's Collision objects, in real Blender, against the core run
directly on the same colliders."""

from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import make_mesh_object, pin, require_bpy, submodule

bpy = require_bpy()
import mass_spring  # noqa: E402  (after the skip above)

FPS, SUBSTEPS = 24, 5
PLANE = [(-2, -2, 0), (2, -2, 0), (2, 2, 0), (-2, 2, 0)]


@pytest.fixture
def bake():
    return submodule("bake")


def make_collider(name, vertices, faces, location=(0, 0, 0), thickness=0.02, friction=0.3):
    obj = make_mesh_object(name, vertices, faces=faces, location=location)
    obj.modifiers.new("Collision", 'COLLISION')
    obj.collision.thickness_outer = thickness
    obj.mass_spring_collision.friction = friction
    return obj


def make_chain(links=10, height=0.5):
    vertices = [(0.1 * i, 0.0, height) for i in range(links + 1)]
    obj = make_mesh_object("Chain", vertices, edges=[(i, i + 1) for i in range(links)])
    settings = obj.mass_spring
    settings.enabled = True
    settings.total_mass = 0.5
    settings.stiffness = 500.0
    settings.damping = 0.5
    settings.substeps = SUBSTEPS
    return obj


def f32(x):
    return float(np.float32(x))


def core_chain(obj, colliders, frames, move_out=False):
    """The chain's bake run on the core directly: (F, N, 3) world positions. `colliders`:
    (vertices at frame k, triangles, thickness, friction) for k = 0, 1, ...; `move_out`:
    moved out of the colliders' thickness at the start."""
    settings = obj.mass_spring
    n = len(obj.data.vertices)
    start = np.array([v.co for v in obj.data.vertices], dtype=np.float32).astype(float)
    links = np.array([e.vertices[:] for e in obj.data.edges])
    mss = mass_spring.MassSpringSystem3d.from_arrays(
        start, f32(settings.total_mass) / n, springs=links, stiffness=f32(settings.stiffness),
        damping=f32(settings.damping),
        gravity=np.array(bpy.context.scene.gravity, dtype=np.float32).astype(float))
    mss.set_integrator("generalized_alpha", rho_inf=f32(settings.rho_inf))
    mss.tolerance = f32(settings.accuracy)
    mss.set_colliders(*colliders(0))
    if move_out:
        mss.move_out_of_colliders()
    out = [mss.vertex_positions()]
    for k in range(1, frames):
        mss.set_colliders(*colliders(k))
        mss.simulate(1 / FPS, SUBSTEPS)
        out.append(mss.vertex_positions())
    return np.array(out)


def test_chain_lands_on_a_collision_plane(scene, bake):
    make_collider("Floor", PLANE, [(0, 1, 2, 3)], thickness=0.02, friction=0.3)
    chain = make_chain()
    result = bake.bake_object(scene, chain)
    world = result.world_positions()
    thickness = f32(0.02)
    assert world[:, :, 2].min() >= 0.99 * thickness  # never through the floor
    np.testing.assert_allclose(world[-1, :, 2], thickness, atol=1e-3 * thickness)  # lying on it
    plane = np.array(PLANE, float), np.array([[0, 1, 2], [0, 2, 3]]), thickness, f32(0.3)
    expected = core_chain(chain, lambda k: plane, len(world))
    np.testing.assert_allclose(result.positions, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(world, expected, rtol=0, atol=1e-6)
    assert list(submodule("writers").bake_record(chain)["colliders"]) == ["Floor"]


def test_a_mass_too_fast_for_a_floor_gets_one_cure(scene, bake):
    # The core's message names the collider's thickness as the cure; the add-on added its
    # own generic one after it (found by an adversarial test).
    make_collider("Floor", PLANE, [(0, 1, 2, 3)], thickness=0.02, friction=0.3)
    chain = make_chain(height=0.3)
    chain.mass_spring.initial_velocity = (0.0, 0.0, -1000.0)
    with pytest.raises(bake.BakeError) as info:
        bake.bake_object(scene, chain)
    message = str(info.value)
    assert "would pass through a collider" in message and "thicker collider" in message
    assert message.count("Likely cure") == 1 and "more substeps" not in message


def test_a_chain_modelled_within_a_floors_thickness_starts_on_it(scene, bake):
    # A chain modelled 5 mm over a floor 2 cm thick starts just beyond the thickness (1 %:
    # Colliders::kWayOutMargin; before, the penalty threw it 0.5 m up); the bake says so.
    # Pinned, it cannot be moved, and the warning says that. Lying at the thickness, or
    # far above, it starts without a warning.
    make_collider("Floor", PLANE, [(0, 1, 2, 3)], thickness=0.02)
    inside = make_chain(height=0.005)
    result = bake.bake_object(scene, inside)
    named = [w for w in result.warnings if "thickness" in w]
    assert named == ["'Chain': 11 vertices modelled within a collider's thickness (Collision ▸ Thickness "
                     "Outer), so the bake starts with the object moved 1.52 cm out of it; to start from the "
                     "modelled shape, model the object at least that thickness away from the collider's "
                     "surface, or lower the thickness"]
    world = result.world_positions()
    out = 1.01 * f32(0.02)
    np.testing.assert_allclose(world[0, :, 2], out, rtol=0, atol=1e-6)
    assert world[:, :, 2].max() <= out + 1e-6  # no jump
    plane = np.array(PLANE, float), np.array([[0, 1, 2], [0, 2, 3]]), f32(0.02), f32(0.3)
    np.testing.assert_allclose(world, core_chain(inside, lambda k: plane, len(world), move_out=True),
                               rtol=0, atol=1e-6)
    pin(inside, [0, 1, 2])
    named = [w for w in bake.bake_object(scene, inside).warnings if "thickness" in w]
    assert len(named) == 1 and "'Chain': 8 vertices inside a collider's thickness" in named[0] and "pin" in named[0]
    for height in (0.02, 0.5):
        chain = make_chain(height=height)
        assert not [w for w in bake.bake_object(scene, chain).warnings if "thickness" in w]


def test_collisions_off_or_collider_disabled_fall_through(scene, bake):
    floor = make_collider("Floor", PLANE, [(0, 1, 2, 3)])
    chain = make_chain()
    off = bake.bake_object(scene, chain, overrides={"use_collisions": False})
    assert off.world_positions()[-1, :, 2].max() < -0.5  # fell 2.8 m in 23 frames
    floor.modifiers.remove(floor.modifiers["Collision"])
    assert bake.bake_object(scene, chain).world_positions()[-1, :, 2].max() < -0.5
    floor.modifiers.new("Collision", 'COLLISION')
    floor.hide_viewport = True  # Disabled in Viewports: Blender does not evaluate it
    assert bake.bake_object(scene, chain).world_positions()[-1, :, 2].max() < -0.5
    floor.hide_viewport = False
    assert bake.bake_object(scene, chain).world_positions()[-1, :, 2].min() > 0.0


def test_animated_collider_pushes_a_pinned_pendulum(scene, bake):
    # A bob hangs 1 m under a pinned vertex on a rigid edge; a box slides along x into it.
    half, speed = 0.1, 1.0
    corners = [(x, y, z) for x in (-half, half) for y in (-half, half) for z in (-half, half)]
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    box = make_collider("Box", corners, quads, location=(-0.4, 0, 0), thickness=0.02, friction=0.0)
    box.keyframe_insert("location", frame=1)
    box.location.x += speed * 23 / FPS
    box.keyframe_insert("location", frame=24)
    pendulum = make_mesh_object("Pendulum", [(0, 0, 1), (0, 0, 0)], edges=[(0, 1)])
    settings = pendulum.mass_spring
    settings.enabled = True
    settings.total_mass = 1.0
    settings.substeps = SUBSTEPS
    pin(pendulum, [0])
    rigid = pendulum.data.attributes.new("ms_rigid", 'BOOLEAN', 'EDGE')
    rigid.data[0].value = True
    make_collider("Floor", [(x, y, -3) for x, y, _ in PLANE], [(0, 1, 2, 3)])  # static
    result = bake.bake_object(scene, pendulum)
    colliders = result.simulation_inputs[4]  # the static floor kept once, the box per frame
    assert len(colliders.static_vertices) == 4 and len(colliders.moving_vertices) == 24
    assert all(len(v) == 8 for v in colliders.moving_vertices)
    assert list(submodule("writers").bake_record(pendulum)["colliders"]) == ["Box", "Floor"]
    world = result.world_positions()
    box_x = []
    for frame in range(1, 25):
        scene.frame_set(frame)
        box_x.append(box.matrix_world.translation.x)
    # Never within the box grown by its thickness (it may slide over the top as it swings up).
    offset = np.abs(world[:, 1] - np.column_stack([box_x, np.zeros((24, 2))]))
    distance = np.linalg.norm(np.maximum(offset - half, 0.0), axis=1)  # to the box, outside
    assert (distance >= 0.98 * f32(0.02)).all()
    assert world[-1, 1, 0] > 0.05  # pushed aside
    assert np.abs(np.linalg.norm(world[:, 1] - world[:, 0], axis=1) - 1).max() < 1e-5


def test_a_collider_that_changes_its_topology_stops_the_bake_with_a_message(scene, bake):
    """A moving collider may move and deform, not gain or lose faces: a Subdivision Surface
    whose levels are animated stops the bake, naming the collider and the frame, and the
    structure keeps no bake."""
    box = make_collider("Growing", [(-1, -1, -1), (1, -1, -1), (1, 1, -1), (-1, 1, -1)], [(0, 1, 2, 3)])
    subdivision = box.modifiers.new("Subdivision", 'SUBSURF')
    subdivision.levels = 0
    subdivision.keyframe_insert("levels", frame=1)
    subdivision.levels = 2
    subdivision.keyframe_insert("levels", frame=5)
    box.modifiers.move(box.modifiers.find("Subdivision"), 0)  # before Collision
    chain = make_chain()
    with pytest.raises(submodule("errors").BakeError, match=r"collider 'Growing' changes its number of vertices or faces at frame \d+"):
        bake.bake_object(scene, chain)
    assert chain.data.shape_keys is None and chain.animation_data is None


def uv_sphere(radius=0.5, segments=24, rings=12):
    """A UV sphere's vertices and faces (quads, triangle fans at the poles)."""
    vertices = [(0.0, 0.0, radius)]
    for j in range(1, rings):
        theta = np.pi * j / rings
        vertices += [(radius * np.sin(theta) * np.cos(2 * np.pi * i / segments),
                      radius * np.sin(theta) * np.sin(2 * np.pi * i / segments), radius * np.cos(theta))
                     for i in range(segments)]
    vertices.append((0.0, 0.0, -radius))
    ring = lambda j, i: 1 + j * segments + i % segments  # noqa: E731
    faces = [(0, ring(0, i), ring(0, i + 1)) for i in range(segments)]
    faces += [(ring(j, i), ring(j + 1, i), ring(j + 1, i + 1), ring(j, i + 1))
              for j in range(rings - 2) for i in range(segments)]
    faces += [(ring(rings - 2, i), len(vertices) - 1, ring(rings - 2, i + 1)) for i in range(segments)]
    return vertices, faces


def test_collider_triangles_come_in_one_order(scene, bake):
    """The same ball given with its faces in another order bakes a cloth draping over it
    to the same bits: the colliders'
    triangles are put in one order before the core sees them (Blender's loop triangles
    came in another order from one process to the next, and a draping cloth turned the
    round-off into centimetres)."""
    colliders = submodule("colliders")
    rng = np.random.default_rng(4)
    tris = np.array([rng.choice(50, 3, replace=False) for _ in range(40)])
    shuffled = np.roll(tris[rng.permutation(40)], 1, axis=1)  # turned: the same triangles
    np.testing.assert_array_equal(colliders.canonical_triangles(tris), colliders.canonical_triangles(shuffled))
    vertices, faces = uv_sphere()
    baked = []
    for order in (faces, faces[::-1]):  # (a quad's corners turned would cut it the other way)
        ball = make_collider("Ball", vertices, order, location=(0, 0, 0.5), friction=0.3)
        n = 7
        sheet = make_mesh_object("Cloth", [(0.15 * (i - 3), 0.15 * (j - 3), 1.1) for j in range(n) for i in range(n)],
                                 faces=[(j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i)
                                        for j in range(n - 1) for i in range(n - 1)])
        settings = sheet.mass_spring
        settings.enabled, settings.total_mass, settings.stiffness = True, 0.2, 300.0
        baked.append(bake.bake_object(scene, sheet).positions)
        assert baked[-1][-1, :, 2].min() < 1.0  # it fell onto the ball
        for obj in (ball, sheet):
            bpy.data.objects.remove(obj)
    np.testing.assert_array_equal(baked[0], baked[1])


def test_a_collider_beyond_reach_is_named(scene, bake):
    # Found by an adversarial tester: the core's message counted vertices over every
    # collider ("collider vertex 6") and named no object.
    make_collider("AFloor", PLANE, [(0, 1, 2, 3)])
    table = make_collider("BTable", PLANE, [(0, 1, 2, 3)], location=(0, 0, -1))
    table.data.vertices[2].co = (2e9, 0, 0)
    chain = make_chain()
    with pytest.raises(bake.BakeError, match=r"Collision object 'BTable': vertex 2 is at \(2000000000"):
        bake.bake_object(scene, chain)
    assert chain.data.shape_keys is None


def test_a_collider_narrower_than_the_edges_is_named(scene, bake):
    # Found by an adversarial tester: a rope of 20 cm links fell through a 4 cm bar between
    # two of its vertices without a word. Collisions stop vertices, not edges: the bake
    # says so where an edge is longer than the collider is wide. A floor is not narrow.
    s = 0.02
    make_collider("Bar", [(-s, -1, 0.3 - s), (s, -1, 0.3 - s), (s, 1, 0.3 - s), (-s, 1, 0.3 - s),
                          (-s, -1, 0.3 + s), (s, -1, 0.3 + s), (s, 1, 0.3 + s), (-s, 1, 0.3 + s)],
                  [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (2, 3, 7, 6), (1, 2, 6, 5), (0, 4, 7, 3)],
                  thickness=0.01)
    rope = make_mesh_object("Rope", [(-1.1 + 0.2 * i, 0.0, 0.5) for i in range(11)],
                            edges=[(i, i + 1) for i in range(10)])
    rope.mass_spring.enabled, rope.mass_spring.stiffness = True, 500.0
    warnings = bake.bake_object(scene, rope).warnings
    assert any("collider 'Bar' is 0.06 m across" in w and "longest edge of 'Rope' (0.2 m)" in w
               for w in warnings), warnings
    bake.free_bake(rope)
    bpy.data.objects.remove(bpy.data.objects["Bar"])
    make_collider("Floor", PLANE, [(0, 1, 2, 3)])
    assert not any("narrowest" in w for w in bake.bake_object(scene, rope).warnings)
