"""Add ▸ Mesh ▸ Mass–Spring (addon/add_menu.py) in real Blender: every preset makes an
object at the 3D cursor that bakes in one call, pins staying put and rods keeping length."""

from __future__ import annotations

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


def test_a_bad_value_is_reported_not_crashed():
    bpy = require_bpy()
    with pytest.raises(RuntimeError, match="bridge needs width >= 3"):
        bpy.ops.object.mass_spring_add(preset="BRIDGE", count=2)
    with pytest.raises(RuntimeError, match="bridge needs width >= 3"):
        bpy.ops.object.mass_spring_add(preset="BRIDGE", count=1)
    with pytest.raises(RuntimeError, match="cloth needs at least 2"):
        bpy.ops.object.mass_spring_add(preset="CLOTH", count=1)
    with pytest.raises(RuntimeError, match="spinning ring needs at least 5"):
        bpy.ops.object.mass_spring_add(preset="SPINNING_TOP", count=4)
    assert not bpy.context.scene.objects  # nothing half-made is left behind


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
