"""Angular bending in the add-on (issue 38): the panel's Bending model and rigidity turn a
mesh's faces into hinges and its loose edges into wire joints; a clamped strip baked in
Blender sags as plate theory says; objects from older files keep their bending springs."""
from __future__ import annotations

import numpy as np
import pytest

from test_addon_helpers import require_bpy, submodule

L, W, N, CELLS = 0.5, 0.1, 20, 4      # strip length, width, cells along and across
DENSITY, D = 0.2, 3.0                 # kg/m^2, N m


@pytest.fixture(autouse=True)
def _empty_scene(scene):
    """Every test starts from the conftest's empty factory scene."""


def strip_object(name="Strip"):
    """A quad grid from x = -h to L (y from 0 to W), its two columns at x <= 0 pinned."""
    bpy = require_bpy()
    h = L / N
    xs, ys = np.arange(-1, N + 1) * h, np.linspace(0, W, CELLS + 1)
    verts = [(x, y, 0.0) for x in xs for y in ys]
    ny = len(ys)
    faces = [(i * ny + j, (i + 1) * ny + j, (i + 1) * ny + j + 1, i * ny + j + 1)
             for i in range(len(xs) - 1) for j in range(ny - 1)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    pins = obj.vertex_groups.new(name="Pins")
    pins.add([k for k, v in enumerate(verts) if v[0] <= 1e-9], 1.0, 'REPLACE')
    s = obj.mass_spring
    s.enabled = True
    s.pin_group = "Pins"
    s.total_mass = DENSITY * L * W * (N + 1) / N  # the clamp's cells too (their masses are pinned)
    s.stiffness = s.shear_stiffness = 2e5
    s.damping = 0.0
    s.integrator = 'IMPLICIT_EULER'  # damps every mode: the bake ends at rest
    return obj


def bake(obj, frames=48, **overrides):
    scene = obj.users_scene[0]
    scene.frame_start, scene.frame_end = 1, frames
    return submodule("bake").bake_object(scene, obj, overrides=overrides)


def tip_sag(obj, result) -> float:
    x = np.array([v.co.x for v in obj.data.vertices])
    return -result.positions[-1][np.isclose(x, L), 2].mean()


def test_a_clamped_strip_baked_in_blender_sags_as_plate_theory_says():
    """A new object bends by angle: the strip sags q L^4 / (8 D) (issue 38 asks for 15 %).
    Its masses are spread evenly over the vertices, not by area as in the core's test, so
    the edge rows carry more than their share: 2 % more sag here."""
    obj = strip_object()
    s = obj.mass_spring
    assert s.bending_model == 'ANGULAR'  # the default for a new object
    s.bending_rigidity = D
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert len(arrays.hinges) and not len(arrays.bending_pairs)
    result = bake(obj)
    expected = DENSITY * 9.81 * L**4 / (8 * D)
    assert tip_sag(obj, result) == pytest.approx(expected, rel=0.05)
    # without bending it folds down at the clamp
    s.bending_rigidity = 0.0
    assert tip_sag(obj, bake(obj, frames=12)) > 10 * expected


def test_the_linear_model_uses_springs_and_a_small_fold_is_free():
    obj = strip_object()
    s = obj.mass_spring
    s.bending_model = 'LINEAR'
    s.bending_stiffness = 50.0
    s.bending_rigidity = D  # not the linear model's
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert len(arrays.bending_pairs) and not len(arrays.hinges)


def test_an_older_file_keeps_its_bending_springs(tmp_path):
    """An object saved before there was a bending model, with bending springs: its model
    was never set, so it bakes with the springs as before, also after saving and opening
    the file again; set explicitly, the panel's model counts."""
    bpy = require_bpy()
    obj = strip_object("Old")
    obj.mass_spring.bending_stiffness = 50.0  # as an older version left it
    assert not obj.mass_spring.is_property_set("bending_model")
    assert submodule("properties").bending_model(obj.mass_spring) == 'LINEAR'
    path = str(tmp_path / "old.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Old"]
    s = obj.mass_spring
    # opening the file wrote the model out: the panel shows what the bake uses
    assert s.is_property_set("bending_model") and s.bending_model == 'LINEAR'
    assert len(submodule("mesh_arrays").mesh_to_arrays(obj).bending_pairs)
    new = strip_object("New")  # a new object in the same file: angular, untouched
    assert new.mass_spring.bending_model == 'ANGULAR' and not new.mass_spring.is_property_set("bending_model")
    s.bending_model = 'ANGULAR'
    s.bending_rigidity = D
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert len(arrays.hinges) and not len(arrays.bending_pairs)


def test_overrides_choose_the_model_for_one_bake():
    """A bake's overrides (as the headless command's options make them) choose the model,
    and so do the structure settings the mesh's arrays depend on (they were read from the
    object only)."""
    obj = strip_object()
    s = obj.mass_spring
    s.bending_model = 'LINEAR'
    angular = bake(obj, frames=24, bending_model='ANGULAR', bending_rigidity=D)
    expected = DENSITY * 9.81 * L**4 / (8 * D)
    assert tip_sag(obj, angular) == pytest.approx(expected, rel=0.05)
    assert s.bending_model == 'LINEAR' and s.bending_rigidity == 0.0  # stored settings untouched


def test_a_bent_wire_of_loose_edges_gets_joints():
    """Edges of no face become a wire: a joint at every vertex between two of them."""
    bpy = require_bpy()
    verts = [(0.1 * i, 0.0, 0.0) for i in range(6)]
    mesh = bpy.data.meshes.new("Wire")
    mesh.from_pydata(verts, [(i, i + 1) for i in range(5)], [])
    obj = bpy.data.objects.new("Wire", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.mass_spring.enabled = True
    obj.mass_spring.bending_rigidity = 0.01
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    assert sorted(map(tuple, arrays.wire_joints)) == [(i, i + 1, i + 2) for i in range(4)]


def test_the_command_line_chooses_the_model_for_one_bake():
    """--bending-model, --bending-rigidity and the weight groups' options become the bake's
    overrides; bad values are usage errors."""
    cli = submodule("cli")
    parser = cli.build_parser()
    obj = strip_object()
    args = cli.check_args(parser.parse_args(["in.blend", "--bending-model", "Angular",
                                             "--bending-rigidity", "3"]), parser)
    overrides = cli.bake_overrides(obj.users_scene[0], obj, args)
    assert overrides["bending_model"] == 'ANGULAR' and overrides["bending_rigidity"] == 3.0
    args = cli.check_args(parser.parse_args(["in.blend", "--stiffness-group", "Collar", "--bending-group", "",
                                             "--damping-group", "Hem"]), parser)
    overrides = cli.bake_overrides(obj.users_scene[0], obj, args)
    assert (overrides["stiffness_group"], overrides["bending_group"], overrides["damping_group"]) == ("Collar", "", "Hem")
    assert "stiffness_group" not in cli.bake_overrides(obj.users_scene[0], obj,
                                                       cli.check_args(parser.parse_args(["in.blend"]), parser))
    for bad in (["--bending-model", "cubic"], ["--bending-rigidity", "-1"], ["--bending-rigidity", "nan"]):
        with pytest.raises(SystemExit):
            cli.check_args(parser.parse_args(["in.blend", *bad]), parser)


def test_a_bending_group_scales_the_rigidity_where_it_is_painted():
    """Weight maps (issue 38): a bending group of weight 0.5 everywhere halves D, and the
    strip sags twice as far (small deflections: linear in 1/D); a missing group is refused
    with its name, and the object is left as it was."""
    obj = strip_object()
    s = obj.mass_spring
    s.bending_rigidity = D
    full = tip_sag(obj, bake(obj))
    half = obj.vertex_groups.new(name="Soft")
    half.add(range(len(obj.data.vertices)), 0.5, 'REPLACE')
    s.bending_group = "Soft"
    assert tip_sag(obj, bake(obj)) == pytest.approx(2 * full, rel=0.01)
    # the same through a bake's overrides (as --bending-group makes them)
    s.bending_group = ""
    assert tip_sag(obj, bake(obj, bending_group="Soft")) == pytest.approx(2 * full, rel=0.01)
    s.bending_group = "Collar"
    keys = [(k.name, k.data[-1].co.z) for k in obj.data.shape_keys.key_blocks]  # the last bake's
    errors = submodule("errors")
    with pytest.raises(errors.BakeError, match="the bending vertex group 'Collar' does not exist"):
        bake(obj)
    assert [(k.name, k.data[-1].co.z) for k in obj.data.shape_keys.key_blocks] == keys


def test_stiffness_and_damping_groups_reach_every_spring():
    """Each spring's stiffness and damping are the panel's times its two vertices' mean
    weight in the stiffness and damping groups (a vertex outside a group weighs 0)."""
    obj = strip_object()
    s = obj.mass_spring
    n = len(obj.data.vertices)
    rng = np.random.default_rng(1)
    weights = {name: rng.uniform(0.1, 1.0, n) for name in ("Stiff", "Damp")}
    for name, w in weights.items():
        group = obj.vertex_groups.new(name=name)
        for k in range(n):
            group.add([k], float(w[k]), 'REPLACE')
    s.stiffness_group, s.damping_group, s.damping = "Stiff", "Damp", 0.3
    scene = obj.users_scene[0]
    bake_module, simulation = submodule("bake"), submodule("simulation")
    arrays = submodule("mesh_arrays").mesh_to_arrays(obj)
    mss, structure = simulation.build_system(arrays, bake_module.simulation_settings(scene, obj), obj.matrix_world)
    import mass_spring as ms
    free = mss.mass_vertices  # the vertex of each mass
    edges = {tuple(sorted(e)) for e in structure.edges.tolist()}
    checked = {"edge": 0, "shear": 0}
    for spring in mss.springs:
        if any(c.type != ms.MASS for c in spring.connectors):
            continue  # one end pinned (the pinned vertices are the fixes, not numbered here)
        ends = [int(free[c.nr]) for c in spring.connectors]
        # Blender keeps weights as 32-bit floats
        ws, wd = (weights[k].astype(np.float32).astype(float)[ends].mean() for k in ("Stiff", "Damp"))
        assert spring.stiffness == pytest.approx(2e5 * ws, rel=1e-12)
        assert spring.damping == pytest.approx(s.damping * wd, rel=1e-12)  # float32 too
        checked["edge" if tuple(sorted(ends)) in edges else "shear"] += 1
    assert checked["edge"] > 100 and checked["shear"] > 50


def sheet_object(n=33, name="Sheet"):
    """The 1 m sheet of cloth_side_by_side.py: n x n vertices, quads, flat, pinned at two
    corners of one side; 1 kg, 1000 N/m, no shear springs (the panel's default)."""
    bpy = require_bpy()
    verts = [(i / (n - 1), j / (n - 1), 2.0) for j in range(n) for i in range(n)]
    faces = [(j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i)
             for j in range(n - 1) for i in range(n - 1)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.vertex_groups.new(name="Pins").add([0, n - 1], 1.0, 'REPLACE')
    s = obj.mass_spring
    s.enabled, s.pin_group = True, "Pins"
    s.total_mass, s.stiffness, s.damping = 1.0, 1000.0, 0.01
    return obj


def test_a_stiff_shear_free_sheet_names_shear_stiffness():
    """Without shear springs a quad can shear flat, and the hinges across its diagonal
    (quads are cut both ways) lose their direction there: a stiff sheet (D = 0.01 N m)
    folding at two corners fails, and the message names Shear Stiffness as the cure, not
    only the usual ones. With shear springs the same sheet bakes. The object is left as it
    was."""
    bake_module = submodule("bake")
    obj = sheet_object()
    obj.mass_spring.bending_rigidity = 1e-2
    with pytest.raises(bake_module.BakeError, match="Shear Stiffness is 0.*Likely cure: a Shear Stiffness"):
        bake(obj, frames=25)
    assert obj.data.shape_keys is None
    obj.mass_spring.shear_stiffness = 1000.0
    result = bake(obj, frames=25)
    assert np.isfinite(result.positions).all()
