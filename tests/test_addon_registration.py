"""Registration, settings interface and the bpy-free part of the add-on."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from test_addon_helpers import ADDON_DIR, REPO, require_bpy, submodule

bpy = require_bpy()

# docs/architecture.md §2, the interface scripts rely on.
ARCHITECTURE_PROPERTIES = {
    "enabled", "total_mass", "mass_group", "pin_group", "stiffness", "damping",
    "stiffness_attribute", "shear_stiffness", "use_gravity", "initial_velocity",
    "initial_angular_velocity", "integrator", "rho_inf", "substeps", "accuracy", "use_scene_frame_range",
    "bending_model", "bending_rigidity", "bending_stiffness", "frame_start", "frame_end",
    "output", "pc2_path", "show_forces", "use_collisions", "stiffness_group", "bending_group",
    "damping_group", "live_preview", "self_collision", "self_collision_distance", "self_friction",
}


def settings_rna():
    return bpy.types.Object.bl_rna.properties["mass_spring"].fixed_type


def test_property_names_match_the_architecture_document(addon):
    names = set(settings_rna().properties.keys()) - {"rna_type", "name"}
    assert names == ARCHITECTURE_PROPERTIES
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## 2."):]
    section = section[:section.index("\nModules")]  # the settings table, not the module list
    documented = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            documented |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
    assert documented == ARCHITECTURE_PROPERTIES


def test_colliders_carry_a_friction_setting(addon):
    import bpy
    rna = bpy.types.Object.bl_rna.properties["mass_spring_collision"].fixed_type
    friction = rna.properties["friction"]
    assert friction.default == pytest.approx(0.3) and friction.hard_min == 0.0
    assert len(friction.description) > 15


def test_every_setting_has_a_tooltip(addon):
    rna = settings_rna()
    for name in ARCHITECTURE_PROPERTIES:
        prop = rna.properties[name]
        assert len(prop.description) > 15, name
        if prop.type == 'ENUM':
            for item in prop.enum_items:
                assert item.description, (name, item.identifier)
    enums = {n: [i.identifier for i in rna.properties[n].enum_items] for n in ("integrator", "output")}
    assert enums == {
        "integrator": ["GENERALIZED_ALPHA", "NEWMARK", "IMPLICIT_EULER", "SYMPLECTIC_EULER",
                       "EXPLICIT_EULER", "RK2"],
        "output": ["SHAPE_KEYS", "PC2"],
    }
    assert rna.properties["output"].default == "SHAPE_KEYS"


def test_solver_defaults_agree_between_the_panel_and_headless_settings(addon):
    """The panel's defaults and SimulationSettings' (used without a panel) are one choice.
    rho_inf is 0.5, not the core's 0.8: at 0.8 cloth falling into folds gains energy
    (tests/test_core_newton.py, test_crumpling_sheet_*)."""
    rna = settings_rna()
    defaults = submodule("simulation").SimulationSettings()
    assert rna.properties["rho_inf"].default == pytest.approx(defaults.rho_inf) == 0.5
    assert rna.properties["substeps"].default == defaults.substeps
    assert rna.properties["integrator"].default == defaults.integrator


def test_settings_are_saved_in_the_blend(scene, tmp_path):
    mesh = bpy.data.meshes.new("M")
    obj = bpy.data.objects.new("O", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.mass_spring.enabled = True
    obj.mass_spring.stiffness = 1234.5
    obj.mass_spring.integrator = 'NEWMARK'
    obj.mass_spring.initial_angular_velocity = (0, 0, 3)
    path = str(tmp_path / "settings.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    settings = bpy.data.objects["O"].mass_spring
    assert (settings.enabled, settings.stiffness, settings.integrator) == (True, 1234.5, 'NEWMARK')
    assert tuple(settings.initial_angular_velocity) == (0, 0, 3)


def test_panels_and_operators_are_registered(addon):
    for name in ("PHYSICS_PT_mass_spring", "MASS_SPRING_OT_bake", "MASS_SPRING_OT_free_bake",
                 "MASS_SPRING_OT_mark_edges"):
        assert hasattr(bpy.types, name), name
    panel = bpy.types.PHYSICS_PT_mass_spring
    assert (panel.bl_space_type, panel.bl_region_type, panel.bl_context) == ('PROPERTIES', 'WINDOW', 'physics')
    for cls in (bpy.types.MASS_SPRING_OT_bake, bpy.types.MASS_SPRING_OT_free_bake,
                bpy.types.MASS_SPRING_OT_mark_edges):
        assert cls.bl_options >= {'REGISTER', 'UNDO'}
        assert cls.bl_description


def test_unregister_and_register_again(addon):
    addon.unregister()
    try:
        assert not hasattr(bpy.types.Object, "mass_spring")
        assert not hasattr(bpy.types, "MASS_SPRING_OT_bake")
        assert not hasattr(bpy.types, "PHYSICS_PT_mass_spring")
    finally:
        addon.register()
    assert hasattr(bpy.types.Object, "mass_spring")


def test_only_relative_imports_inside_the_addon():
    for path in ADDON_DIR.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for module in ("addon", "mass_spring_baker"):
            assert not re.search(rf"^\s*(from|import)\s+{module}\b", text, re.M), (path.name, module)


def test_simulation_side_imports_without_bpy():
    """simulation.py / errors.py are plain numpy + core: usable outside Blender."""
    code = f"""
import importlib, sys, types
package = types.ModuleType("msb"); package.__path__ = [{str(ADDON_DIR)!r}]
sys.modules["msb"] = package
simulation = importlib.import_module("msb.simulation")
assert "bpy" not in sys.modules
import numpy as np
arrays = simulation.MeshArrays(
    local_positions=np.array([[0., 0, 0], [1, 0, 0], [2, 0, 0]]), masses=np.ones(3),
    pinned=np.array([True, False, False]), edges=np.array([[0, 1], [1, 2]]),
    stiffness_scale=np.ones(2), rigid=np.array([True, False]), rope=np.zeros(2, bool))
run = simulation.FrameSimulation(arrays, simulation.SimulationSettings(), [np.eye(4)] * 5, range(1, 6))
positions = run.run()
assert positions.shape == (5, 3, 3) and positions[-1, 2, 2] < 0
assert "bpy" not in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_world_to_local_and_velocities():
    simulation = submodule("simulation")
    matrix = np.eye(4)
    matrix[:3, :3] = [[0, -2, 0], [2, 0, 0], [0, 0, 2]]
    matrix[:3, 3] = [1, 2, 3]
    local = np.random.default_rng(1).normal(size=(7, 3))
    world = simulation.transform_points(matrix, local)
    back = simulation.world_to_local(np.stack([world, world]), np.stack([matrix, matrix]))
    np.testing.assert_allclose(back, np.stack([local, local]), atol=1e-6)
    v = simulation.rigid_velocities(np.array([[1.0, 0, 0]]), (0, 0, 0), (0, 0, 1), (0, 0, 2))
    np.testing.assert_allclose(v, [[0, 2, 1]])
    with pytest.raises(submodule("errors").BakeError, match="not invertible"):
        simulation.world_to_local(np.zeros((1, 1, 3)), np.zeros((1, 4, 4)))


def test_mesh_arrays_reads_masses_pins_and_marks(scene):
    from test_addon_helpers import make_grid, pin, set_edge_marks
    obj = make_grid(nx=3, ny=2)
    obj.mass_spring.total_mass = 6.0
    pin(obj, [0, 2])
    set_edge_marks(obj, "ms_rigid", [1])
    set_edge_marks(obj, "ms_rope", [3])
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert arrays.masses.tolist() == [1.0] * 6
    assert arrays.pinned.tolist() == [True, False, True, False, False, False]
    assert np.flatnonzero(arrays.rigid).tolist() == [1] and np.flatnonzero(arrays.rope).tolist() == [3]
    assert arrays.edges.shape == (len(obj.data.edges), 2)
