"""The bake knows no absolute length (issue 34): an object scaled down to 5e-5, or standing
2e7 m from the origin, bakes the motion it bakes at scale 1 at the origin (real bpy).

What is physically the same: moving the scene is an exact symmetry (same gravity). Scaling
every length by s at the same frame rate scales every acceleration by s, so the motion is
the same in object space when gravity and the initial velocities scale by s too, and the
masses, stiffnesses (N/m: force per length) and dampings (N·s/m) stay.
"""

from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import make_mesh_object, pin, require_bpy, set_edge_marks, submodule

bpy = require_bpy()

SCALE = 5e-5
FAR = (2.0e7, 0.0, 0.0)
GRAVITY = (0.0, 0.0, -9.81)


@pytest.fixture
def bake():
    return submodule("bake")


def chain(name="Chain", location=(0.0, 0.0, 0.0), scale=1.0):
    """A pinned chain of five links 60° from straight down, the middle link a rod: it
    swings, stretches its springs and keeps its rod."""
    from mass_spring import presets
    structure = presets.chain(n=5, spacing=0.2, angle=60.0)
    edges = structure.edges.tolist()
    obj = make_mesh_object(name, structure.positions, edges=edges, location=location)
    obj.scale = (scale, scale, scale)
    bpy.context.view_layer.update()
    settings = obj.mass_spring
    settings.enabled = True
    settings.total_mass = 0.3
    settings.stiffness = 400.0
    settings.damping = 0.05
    pin(obj, [0])
    set_edge_marks(obj, "ms_rigid", [2])
    return obj


def baked_local(bake, scene, obj, gravity=GRAVITY) -> np.ndarray:
    """(F, N, 3) object-space positions of a bake of `obj` alone under `gravity`."""
    scene.gravity = gravity
    result = bake.bake_object(scene, obj)
    assert result.local_positions.shape == (24, len(obj.data.vertices), 3)
    return result.local_positions.astype(np.float64)


def moves(local: np.ndarray) -> float:
    return float(np.abs(local[-1] - local[0]).max())


def test_a_tiny_object_bakes_the_motion_of_a_big_one(scene, bake):
    """Scale 5e-5 under 5e-5 × gravity: the object-space motion of scale 1.

    The two runs differ by the round-off of multiplying by 5e-5 (1e-16 relative), which
    the core's tolerances, all relative to the structure's size, do not amplify; the
    bake stores float32, whose ulp at the chain's coordinates (up to 1 m) is 6e-8 m: a
    few ulp, 2e-7 m, bound the difference."""
    big = chain("Big")
    reference = baked_local(bake, scene, big)
    bpy.data.objects.remove(big)
    tiny = chain("Tiny", scale=SCALE)
    local = baked_local(bake, scene, tiny, gravity=tuple(SCALE * g for g in GRAVITY))
    assert moves(reference) > 0.1  # it swings: the comparison is not vacuous
    np.testing.assert_allclose(local, reference, rtol=0, atol=2e-7)


def test_a_far_object_bakes_the_motion_at_the_origin(scene, bake):
    """2e7 m along X: the object-space motion at the origin.

    Float64 world coordinates 2e7 m out are known to 4e-9 m (their ulp); the core works
    relative to the structure's start, so that rounding of the start is all that differs
    and the solver does not amplify it (a core fed the far coordinates loosens its
    round-off floors with them: 1e-3 m apart). Stored in object space as float32, the
    frames agree to a few ulp of the chain's 1 m coordinates, 2e-7 m."""
    near = chain("Near")
    reference = baked_local(bake, scene, near)
    bpy.data.objects.remove(near)
    far = chain("Far", location=FAR)
    local = baked_local(bake, scene, far)
    assert moves(reference) > 0.1
    np.testing.assert_allclose(local, reference, rtol=0, atol=2e-7)


def test_a_tiny_object_falls_freely_without_being_called_diverged(scene, bake):
    """Scale 1e-6 (a 1 µm chain) under full gravity, nothing pinned: in 23 frames it falls
    4.5 m, 4.5 million times its size, as any object falls; the divergence check allows
    what gravity and the start speed can do."""
    obj = chain("Dust", scale=1e-6)
    obj.mass_spring.pin_group = ""
    local = baked_local(bake, scene, obj)
    fall = 0.5 * 9.81 * (23 / 24) ** 2
    drop = (local[-1] - local[0]).mean(axis=0) * 1e-6  # object space → world
    assert drop[2] == pytest.approx(-fall, rel=1e-4)


def test_a_tiny_diverging_object_is_still_caught(scene, bake):
    """The divergence check is relative: a 5e-5 scaled grid that blows up is refused with
    the frame and the cure, long before any coordinate reaches 1e7 m."""
    from test_addon_helpers import make_grid
    obj = make_grid(nx=3, ny=3)
    obj.scale = (SCALE, SCALE, SCALE)
    settings = obj.mass_spring
    settings.enabled = True
    settings.integrator = 'EXPLICIT_EULER'
    settings.stiffness = 1e6
    settings.substeps = 1
    pin(obj, [0])
    diverged = r"frame \d+: the simulation diverged .*substeps"
    with pytest.raises(submodule("errors").BakeError, match=diverged):
        bake.bake_object(scene, obj)


@pytest.mark.parametrize("scale, flat", [
    ((1e-6, 1e-6, 1e-6), False),
    ((5e-5, 5e-5, 5e-5), False),
    ((1.0, 1e-7, 1.0), False),      # thin, not flat: the inverse exists
    ((1.0, 0.0, 1.0), True),        # a scale of 0 on one axis
    ((0.0, 0.0, 0.0), True),
])
def test_a_transform_is_flat_at_any_overall_scale(scale, flat):
    """Flat means the matrix's columns are (nearly) linearly dependent, whatever their
    lengths; the refusal keeps its message."""
    simulation = submodule("simulation")
    rotation = np.array([[0.6, -0.8, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]])
    matrix = np.eye(4)
    matrix[:3, :3] = (rotation @ np.diag(scale)).astype(np.float32)  # Blender's precision
    matrix[:3, 3] = FAR
    assert simulation.flat_transforms([matrix]).tolist() == [flat]
    sheared = np.eye(4)
    # X and Y columns nearly parallel
    sheared[:3, :3] = [[1.0, 1.0, 0.0], [0.0, 1e-9, 0.0], [0.0, 0.0, 1.0]]
    assert simulation.flat_transforms([sheared]).tolist() == [True]
    if flat:
        arrays = simulation.MeshArrays(
            local_positions=np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), masses=np.ones(2),
            pinned=np.array([True, False]), edges=np.array([[0, 1]]),
            stiffness_scale=np.ones(1), rigid=np.zeros(1, bool), rope=np.zeros(1, bool))
        with pytest.raises(simulation.BakeError, match="squashes it flat .a scale of 0."):
            simulation.FrameSimulation(arrays, simulation.SimulationSettings(),
                                       [np.eye(4), matrix], [1, 2])


def test_a_mesh_modelled_tiny_bakes_the_motion_of_a_big_one(scene, bake):
    """The mesh itself 1e-10 of the chain's size (links of 0.02 nm, below 1e-9 m) at
    object scale 1, under 1e-10 × gravity: the motion of the 1 m chain, 1e-10 as large.
    No edge is zero but in proportion to the mesh's extent. Its float32 vertices
    round to other fractions of their size than the big chain's do (6e-8 relative), which
    the swing carries on: 1e-6 of the chain's size bounds it."""
    big = chain("Big")
    reference = baked_local(bake, scene, big)
    bpy.data.objects.remove(big)
    from mass_spring import presets
    structure = presets.chain(n=5, spacing=0.2e-10, angle=60.0)
    tiny = chain("Nano")
    tiny.data.vertices.foreach_set("co", structure.positions.astype(np.float32).ravel())
    tiny.data.update()
    local = baked_local(bake, scene, tiny, gravity=tuple(1e-10 * g for g in GRAVITY))
    np.testing.assert_allclose(local * 1e10, reference, rtol=0, atol=1e-6)
