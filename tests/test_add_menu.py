"""Add ▸ Mesh ▸ Mass–Spring (addon/add_menu.py) in real Blender: every preset makes an
object at the 3D cursor that bakes in one call, pins staying put and rods keeping length."""

from __future__ import annotations

import re

import numpy as np
import pytest

from test_addon_helpers import require_bpy, submodule

PRESETS = ["CHAIN", "PENDULUM", "DOUBLE_PENDULUM", "BRIDGE", "SPINNING_TOP", "CRANE", "CLOTH"]
CURSOR = (1.0, -2.0, 3.0)


@pytest.fixture(autouse=True)
def _empty_scene(scene):
    """Every test starts from the conftest's empty factory scene."""


def add(preset, **values):
    """A new empty scene with the preset added at the 3D cursor: (scene, object)."""
    bpy = require_bpy()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    scene.cursor.location = CURSOR
    assert bpy.ops.object.mass_spring_add(preset=preset, **values) == {'FINISHED'}
    obj = bpy.context.active_object
    bpy.context.view_layer.update()
    return scene, obj


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_bakes_with_pins_in_place_and_rigid_rods(preset):
    scene, obj = add(preset)
    assert obj.select_get() and tuple(obj.location) == CURSOR and obj.mass_spring.enabled
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert arrays.pinned.any()

    result = submodule("bake").bake_object(scene, obj)
    p = result.positions
    assert p.shape == (12, len(obj.data.vertices), 3)
    world0 = arrays.local_positions + np.array(CURSOR)
    np.testing.assert_allclose(p[0], world0, rtol=0, atol=1e-6)  # float32 mesh coordinates
    np.testing.assert_array_equal(p[:, arrays.pinned], np.repeat(p[:1, arrays.pinned], 12, 0))
    rods = arrays.edges[arrays.rigid & ~(arrays.pinned[arrays.edges].all(axis=1))]
    lengths = np.linalg.norm(p[:, rods[:, 1]] - p[:, rods[:, 0]], axis=2)
    np.testing.assert_allclose(lengths, np.repeat(lengths[:1], 12, 0), rtol=0, atol=1e-6)
    assert np.abs(p[-1] - p[0]).max() > 1e-3  # it moves


def test_the_mesh_is_the_preset_structure():
    from mass_spring import presets
    _, obj = add("CRANE", count=3)
    crane = presets.crane(levels=3)
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    np.testing.assert_allclose(arrays.local_positions, crane.positions, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(arrays.edges, crane.edges)
    np.testing.assert_array_equal(arrays.pinned, crane.pinned)
    np.testing.assert_array_equal(arrays.rigid, crane.rigid)
    np.testing.assert_array_equal(arrays.rope, crane.rope)
    np.testing.assert_allclose(arrays.masses, crane.masses, rtol=1e-6)
    assert obj.mass_spring.stiffness == crane.stiffness


def test_values_passed_by_a_script_win_over_the_preset_defaults():
    _, obj = add("CHAIN", count=4, size=1.0)
    assert len(obj.data.vertices) == 5
    edge = obj.data.edges[0].vertices
    a, b = (np.array(obj.data.vertices[i].co) for i in edge)
    assert np.linalg.norm(b - a) == pytest.approx(0.25, abs=1e-6)
    _, cloth = add("CLOTH", count=4, rows=3)
    assert len(cloth.data.vertices) == 12 and len(cloth.data.polygons) == 6
    assert cloth.mass_spring.shear_stiffness == cloth.mass_spring.stiffness > 0


@pytest.mark.parametrize("preset, values, message", [
    ("BRIDGE", dict(count=2), "Columns must be from 3 to 500, got 2"),
    ("BRIDGE", dict(count=1), "Columns must be from 3 to 500, got 1"),
    ("BRIDGE", dict(count=501), "Columns must be from 3 to 500, got 501"),
    ("BRIDGE", dict(rows=501), "Rows must be from 1 to 500, got 501"),
    ("BRIDGE", dict(size=2e6), "Span must be from 0.01 to 1e+06 m, got 2e+06"),
    ("CLOTH", dict(count=1), "Columns must be from 2 to 500, got 1"),
    ("CLOTH", dict(rows=1), "Rows must be from 2 to 500, got 1"),
    ("CLOTH", dict(rows=100000), "Rows must be from 2 to 500, got 100000"),
    ("CLOTH", dict(size=1e7), "Width must be from 0.01 to 1e+06 m, got 1e+07"),
    ("CHAIN", dict(count=501), "Masses must be from 1 to 500, got 501"),
    ("CHAIN", dict(size=1e10), "Length must be from 0.01 to 1e+06 m, got 1e+10"),
    ("PENDULUM", dict(size=2e6), "Length must be from 0.01 to 1e+06 m, got 2e+06"),
    ("DOUBLE_PENDULUM", dict(size=2e6), "Rod Length must be from 0.01 to 1e+06 m, got 2e+06"),
    ("SPINNING_TOP", dict(count=4), "Masses must be from 5 to 500, got 4"),
    ("SPINNING_TOP", dict(spin=-2000.0), "Spin must be from -1000 to 1000 rad/s, got -2000"),
    ("SPINNING_TOP", dict(size=2e6), "Radius must be from 0.01 to 1e+06 m, got 2e+06"),
    ("CRANE", dict(count=501), "Levels must be from 1 to 500, got 501"),
])
def test_values_out_of_range_are_refused_in_the_panel_s_words(preset, values, message):
    """A value the preset can't make into a structure that bakes is refused before anything
    is built, named as the redo panel names it (Columns, not the core's width), with its
    range; nothing half-made is left behind."""
    bpy = require_bpy()
    with pytest.raises(RuntimeError, match=re.escape(message)):
        bpy.ops.object.mass_spring_add(preset=preset, **values)
    assert not bpy.context.scene.objects


@pytest.mark.parametrize("preset, values, label", [
    ("BRIDGE", dict(stiffness=float("inf")), "Stiffness"),
    ("CLOTH", dict(damping=float("inf")), "Damping"),
    ("CLOTH", dict(bending_rigidity=float("inf")), "Bending Rigidity"),
    ("CHAIN", dict(mass=float("inf")), "Mass"),
])
def test_the_add_menu_refuses_infinite_values(preset, values, label):
    """Found by an adversarial tester: an Inf typed into the redo panel (Blender stores the
    largest single-precision number) made a structure that could not bake."""
    bpy = require_bpy()
    with pytest.raises(RuntimeError, match=f"{label} must be a finite number"):
        bpy.ops.object.mass_spring_add(preset=preset, **values)
    assert not bpy.context.scene.objects


@pytest.mark.parametrize("preset, values", [
    ("CHAIN", dict(count=1, size=0.01)),
    ("CHAIN", dict(count=500, size=1e6)),
    ("PENDULUM", dict(size=0.01)),
    ("PENDULUM", dict(size=1e6)),
    ("DOUBLE_PENDULUM", dict(size=0.01)),
    ("DOUBLE_PENDULUM", dict(size=1e6)),
    ("BRIDGE", dict(count=3, rows=1, size=0.01)),
    ("BRIDGE", dict(count=3, rows=500, size=1e6)),
    ("SPINNING_TOP", dict(count=5, size=0.01, spin=-1000.0)),
    ("SPINNING_TOP", dict(count=500, size=1e6, spin=1000.0)),  # rim at the core's 1e9 m/s
    ("CRANE", dict(count=1)),
    ("CRANE", dict(count=500)),
    ("CLOTH", dict(count=2, rows=2, size=0.01)),
    ("CLOTH", dict(count=500, rows=2, size=1e6)),
    pytest.param("BRIDGE", dict(count=500, rows=500, size=0.01), marks=pytest.mark.slow),
    pytest.param("CLOTH", dict(count=500, rows=500, size=1e6), marks=pytest.mark.slow),
])
def test_the_extreme_accepted_values_bake(preset, values):
    """The ends of every range the Add menu accepts make structures that bake."""
    scene, obj = add(preset, **values)
    scene.frame_end = 4
    result = submodule("bake").bake_object(scene, obj)
    assert np.isfinite(result.local_positions).all()
    assert np.abs(result.local_positions[-1] - result.local_positions[0]).max() > 0


def test_a_rigid_motion_is_found_at_any_place_size_and_speed():
    """structure_object keeps a spin as the panel's velocity and angular velocity about
    the object's origin, for a ring of any size anywhere (no absolute speed or distance
    in the test), and still refuses a motion that is not rigid."""
    from mass_spring import presets
    add_menu = submodule("add_menu")
    for scale, place in ((1.0, (0.0, 0.0, 0.0)), (5e-5, (0.0, 0.0, 0.0)),
                         (1.0, (2e7, 0.0, 0.0)), (5e-5, (0.0, -3e4, 0.0))):
        ring = presets.spinning_ring(radius=0.8 * scale, spin=6.0)
        ring.positions = ring.positions + place  # spinning about its hub, now at `place`
        linear, angular = add_menu.rigid_motion(ring)
        assert angular == pytest.approx((0.0, 6.0, 0.0), rel=1e-6, abs=1e-9)
        origin_speed = -np.cross(angular, place)  # the hub is still
        np.testing.assert_allclose(linear, origin_speed, rtol=1e-6, atol=1e-9 * scale)
        ring.velocities[0] *= 1.0 + 1e-4  # one vertex off the rigid motion
        with pytest.raises(ValueError, match="not a rigid motion"):
            add_menu.rigid_motion(ring)


def test_the_menu_is_in_add_mesh():
    bpy = require_bpy()
    submodule("add_menu")
    menu = bpy.types.VIEW3D_MT_mass_spring_add
    assert menu.bl_label == "Mass–Spring"
    assert any(getattr(f, "__name__", "") == "_menu_entry"
               for f in bpy.types.VIEW3D_MT_mesh_add._dyn_ui_initialize())


def test_switching_the_preset_in_the_redo_panel_starts_from_its_defaults():
    # The redo panel re-runs the operator with the last call's values, among them the
    # preset those values belong to (shown_preset).
    _, obj = add("BRIDGE", shown_preset="CHAIN", count=10, size=2.0)
    assert len(obj.data.vertices) == 13 * 2  # the bridge's 13 columns, not the chain's 10
    _, obj = add("BRIDGE", shown_preset="BRIDGE", count=5, rows=3, size=1.0)
    assert len(obj.data.vertices) == 5 * 3


def test_a_structure_becomes_a_mesh_with_everything_it_holds():
    """structure_object keeps per-edge stiffness scales and a rigid initial motion (the
    spinning top's spin is its structure's velocities), and refuses what the panel cannot
    hold (per-vertex velocities that are no rigid motion)."""
    from mass_spring import presets
    add_menu = submodule("add_menu")
    chain = presets.chain(n=3)
    chain.stiffness_scale = np.array([1.0, 5.0, 0.25])
    chain.velocities = np.tile([0.5, 0.0, -1.0], (len(chain.positions), 1))
    obj = add_menu.structure_object("Scaled", chain)
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    np.testing.assert_allclose(arrays.stiffness_scale, [1.0, 5.0, 0.25])
    assert tuple(obj.mass_spring.initial_velocity) == pytest.approx((0.5, 0.0, -1.0))
    _, top = add("SPINNING_TOP", spin=4.0)
    assert tuple(top.mass_spring.initial_angular_velocity) == pytest.approx((0.0, 4.0, 0.0))
    assert tuple(top.mass_spring.initial_velocity) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    chain.velocities = np.zeros((len(chain.positions), 3))
    chain.velocities[1] = (0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="not a rigid motion"):
        add_menu.structure_object("Bad", chain)
