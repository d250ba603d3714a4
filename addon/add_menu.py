"""Add ▸ Mesh ▸ Mass–Spring: the seeds' structures as mesh objects, ready to bake.

The geometry comes from ``mass_spring.presets``; :func:`structure_object` turns any
``mass_spring.Structure`` into a mesh object with the pin group, the ``ms_rigid`` /
``ms_rope`` edge marks and ``obj.mass_spring`` set (scripts/scenes.py uses it too).
"""

import math

import bpy
import numpy as np
from bpy.props import EnumProperty, FloatProperty, IntProperty, StringProperty

from .mesh_arrays import RIGID_ATTRIBUTE, ROPE_ATTRIBUTE

STIFFNESS_ATTRIBUTE = "ms_stiffness"
from .simulation import import_core

PIN_GROUP = "pin"
MASS_GROUP = "mass"


def structure_object(name, structure, *, location=(0.0, 0.0, 0.0), collection=None,
                     pin_group=PIN_GROUP, mass_group=MASS_GROUP):
    """A mesh object of `structure`, enabled for the bake, linked to `collection` (the
    scene's by default).

    The vertices sit in object space (the object at `location`); the mesh has the
    structure's edges in their order, then any other edges of its faces. Pinned vertices go
    into the vertex group `pin_group`, rigid and rope edges get the edge marks; per-vertex
    masses become the vertex group `mass_group` (weights relative to the heaviest vertex);
    per-edge stiffness scales become the float edge attribute ``ms_stiffness``.
    Stiffness, shear stiffness and damping go to ``obj.mass_spring``, and so do initial
    velocities, which must be a rigid motion (a velocity plus a spin about the object's
    origin): the panel has no per-vertex velocities. Anything else raises ValueError.
    """
    linear, angular = rigid_motion(structure)
    s = structure
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(s.positions.tolist(), s.edges.tolist(),
                     [tuple(map(int, f)) for f in s.faces])
    mesh.update()
    for attribute, marked in ((RIGID_ATTRIBUTE, s.rigid), (ROPE_ATTRIBUTE, s.rope)):
        if marked.any():
            values = np.zeros(len(mesh.edges), dtype=bool)
            values[:len(marked)] = marked  # the structure's edges come first, in order
            mesh.attributes.new(attribute, 'BOOLEAN', 'EDGE').data.foreach_set("value", values)
    scaled = not np.all(s.stiffness_scale == 1.0)
    if scaled:
        values = np.ones(len(mesh.edges), dtype=np.float32)
        values[:len(s.edges)] = s.stiffness_scale
        mesh.attributes.new(STIFFNESS_ATTRIBUTE, 'FLOAT', 'EDGE').data.foreach_set("value", values)

    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    (collection or bpy.context.scene.collection).objects.link(obj)
    pins = np.flatnonzero(s.pinned).tolist()
    group = obj.vertex_groups.new(name=pin_group)
    if pins:
        group.add(pins, 1.0, 'REPLACE')
    settings = obj.mass_spring
    settings.enabled = True
    settings.pin_group = pin_group
    settings.total_mass = s.total_mass
    if s.masses is not None:
        weights = obj.vertex_groups.new(name=mass_group)
        heaviest = float(s.masses.max())
        for i, m in enumerate(s.masses.tolist()):
            weights.add([i], m / heaviest, 'REPLACE')
        settings.mass_group = mass_group
        settings.total_mass = sum(s.masses.tolist())
    settings.stiffness = s.stiffness
    settings.shear_stiffness = s.shear_stiffness
    settings.bending_stiffness = s.bending_stiffness
    # Angular bending unless the structure brings bending springs (the linear model).
    by_angle = s.hinge_rigidity > 0 or s.wire_rigidity > 0 or s.bending_stiffness <= 0
    settings.bending_model = 'ANGULAR' if by_angle else 'LINEAR'
    settings.bending_rigidity = max(s.hinge_rigidity, s.wire_rigidity)
    settings.damping = s.damping
    settings.stiffness_attribute = STIFFNESS_ATTRIBUTE if scaled else ""
    settings.initial_velocity = linear
    settings.initial_angular_velocity = angular
    return obj


def rigid_motion(structure) -> tuple[tuple, tuple]:
    """(velocity, angular velocity about the origin) whose rigid motion gives every vertex
    its velocity in `structure`; ValueError if no rigid motion does."""
    if structure.velocities is None:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    # About the vertices' centre c, to 1e-9 of the largest speed plus what the positions'
    # round-off (1e-14 of their distance from the origin, 45 ulp) makes of the spin: no
    # absolute speed, size or place sets the test (test_add_menu.py,
    # test_a_rigid_motion_is_found_at_any_place_size_and_speed).
    centre = structure.positions.mean(axis=0)
    p, v = structure.positions - centre, structure.velocities
    # v_i = vc + w x p_i = vc - [p_i]x w: least squares for (vc, w).
    cross = np.zeros((len(p), 3, 3))
    cross[:, 0, 1], cross[:, 0, 2], cross[:, 1, 2] = p[:, 2], -p[:, 1], p[:, 0]
    cross[:, 1, 0], cross[:, 2, 0], cross[:, 2, 1] = -p[:, 2], p[:, 1], -p[:, 0]
    system = np.concatenate([np.tile(np.eye(3), (len(p), 1)), cross.reshape(-1, 3)], axis=1)
    solution = np.linalg.lstsq(system, v.ravel(), rcond=None)[0]
    angular = solution[3:]
    slack = (1e-9 * np.abs(v).max()
             + 1e-14 * np.linalg.norm(angular) * np.abs(structure.positions).max())
    if not np.abs(system @ solution - v.ravel()).max() <= slack:
        raise ValueError("the structure's initial velocities are not a rigid motion, which "
                         "is all the Mass–Spring panel can hold")
    linear = solution[:3] - np.cross(angular, centre)  # about the origin: v0 = vc - w x c
    return tuple(linear.tolist()), tuple(angular.tolist())


# Preset → (menu label, the redo panel's settings it uses, their defaults).
PRESETS = {
    'CHAIN': ("Chain", dict(count=10, size=2.0, angle=0.0, mass=0.05, stiffness=400.0,
                            damping=0.0)),
    'PENDULUM': ("Pendulum", dict(size=1.5, angle=90.0, mass=1.0)),
    'DOUBLE_PENDULUM': ("Double Pendulum", dict(size=0.8, angle=120.0, mass=1.0)),
    'BRIDGE': ("Bridge", dict(count=13, rows=2, size=3.0, mass=0.05, stiffness=3000.0,
                              damping=0.5)),
    'SPINNING_TOP': ("Spinning Top", dict(count=16, size=0.8, spin=6.0, mass=0.05,
                                          stiffness=800.0, damping=0.0)),
    'CRANE': ("Crane", dict(count=6, mass=0.05, stiffness=20000.0, damping=2.0)),
    'CLOTH': ("Cloth", dict(count=10, rows=10, size=1.0, mass=0.01, stiffness=1000.0,
                            damping=0.01, bending_rigidity=1e-4)),
}

LABELS = {
    'CHAIN': dict(count="Masses", size="Length", angle="Angle"),
    'PENDULUM': dict(size="Length", angle="Angle"),
    'DOUBLE_PENDULUM': dict(size="Rod Length", angle="Angle"),
    'BRIDGE': dict(count="Columns", rows="Rows", size="Span"),
    'SPINNING_TOP': dict(count="Masses", size="Radius", spin="Spin"),
    'CRANE': dict(count="Levels"),
    'CLOTH': dict(count="Columns", rows="Rows", size="Width"),
}

# The redo panel's valid values, by preset and setting: (least, most, unit). Counts start
# where the preset's structure exists (a bridge needs a free column between its two pinned
# ones, a cloth two vertices each way, a spinning top 5 masses: with fewer its
# second-neighbour springs repeat the first-neighbour ones) and end at MAX_COUNT: a
# 500 × 500 bridge or cloth, 250 000 vertices, is 15 times the 129 × 129 sheet of the bake
# benchmark (docs/performance.md). Sizes stay a thousandth of the core's 1e9 m, and the
# spinning top's rim speed (Spin × Radius) within its 1e9 m/s. Checked before anything is
# built, in the panel's words, so every accepted value bakes (tests/test_add_menu.py,
# test_values_out_of_range_are_refused_in_the_panel_s_words,
# test_the_extreme_accepted_values_bake).
MAX_COUNT = 500
MAX_SIZE = 1.0e6
MAX_SPIN = 1.0e3
SIZE = (0.01, MAX_SIZE, " m")
RANGES = {
    'CHAIN': dict(count=(1, MAX_COUNT, ""), size=SIZE),
    'PENDULUM': dict(size=SIZE),
    'DOUBLE_PENDULUM': dict(size=SIZE),
    'BRIDGE': dict(count=(3, MAX_COUNT, ""), rows=(1, MAX_COUNT, ""), size=SIZE),
    'SPINNING_TOP': dict(count=(5, MAX_COUNT, ""), size=SIZE,
                         spin=(-MAX_SPIN, MAX_SPIN, " rad/s")),
    'CRANE': dict(count=(1, MAX_COUNT, "")),
    'CLOTH': dict(count=(2, MAX_COUNT, ""), rows=(2, MAX_COUNT, ""), size=SIZE),
}


def check_values(preset: str, p: dict) -> None:
    """ValueError naming the first of the panel's values `p` outside its range (RANGES),
    by the name the panel shows it under, with the range; and any value that is not a
    finite number (an Inf typed into the panel is stored as the largest single-precision
    number: tests/test_add_menu.py, test_the_add_menu_refuses_infinite_values)."""
    for name, value in p.items():
        if isinstance(value, float) and not (math.isfinite(value) and abs(value) < np.finfo(np.float32).max):
            label = LABELS[preset].get(name, name.replace("_", " ").title())
            raise ValueError(f"{label} must be a finite number, got {value:g}")
    for name, (least, most, unit) in RANGES[preset].items():
        value = p[name]
        # The panel holds single precision: 0.01 arrives as 0.0099999998.
        if not np.float32(least) <= value <= np.float32(most):
            label = LABELS[preset].get(name, name.title())
            raise ValueError(f"{label} must be from {least:g} to {most:g}{unit}, got {value:g}")


def preset_structure(preset: str, p: dict):
    """The ``mass_spring.Structure`` of `preset` with the redo panel's values `p`; values
    out of range raise ValueError in the panel's words (check_values)."""
    check_values(preset, p)
    presets = import_core().presets
    if preset == 'CHAIN':
        return presets.chain(n=p["count"], spacing=p["size"] / p["count"], angle=p["angle"],
                             mass=p["mass"], stiffness=p["stiffness"], damping=p["damping"])
    if preset == 'PENDULUM':
        return presets.pendulum(length=p["size"], angle=p["angle"], mass=p["mass"])
    if preset == 'DOUBLE_PENDULUM':
        return presets.double_pendulum(lengths=(p["size"], p["size"]),
                                       angles=(p["angle"], p["angle"] + 30.0), mass=p["mass"])
    if preset == 'BRIDGE':
        return presets.bridge(width=p["count"], height=p["rows"],
                              spacing=p["size"] / max(p["count"] - 1, 1), mass=p["mass"],
                              stiffness=p["stiffness"], damping=p["damping"])
    if preset == 'SPINNING_TOP':
        return presets.spinning_ring(n=p["count"], radius=p["size"], spin=p["spin"],
                                     mass=p["mass"], stiffness=p["stiffness"],
                                     damping=p["damping"])
    if preset == 'CRANE':
        return presets.crane(levels=p["count"], mass=p["mass"], stiffness=p["stiffness"],
                             damping=p["damping"])
    if preset == 'CLOTH':
        nx, ny = p["count"], p["rows"]
        return presets.cloth(nx, ny, spacing=p["size"] / max(nx - 1, 1), pins=[0, nx - 1],
                             total_mass=p["mass"] * nx * ny, stiffness=p["stiffness"],
                             shear_stiffness=p["stiffness"], damping=p["damping"],
                             bending_rigidity=p["bending_rigidity"])
    raise ValueError(f"unknown preset {preset!r}")


class OBJECT_OT_mass_spring_add(bpy.types.Operator):
    """Add one of the seeds' mass–spring structures at the 3D cursor, ready to bake"""
    bl_idname = "object.mass_spring_add"
    bl_label = "Add Mass–Spring Structure"
    bl_options = {'REGISTER', 'UNDO'}

    preset: EnumProperty(
        name="Structure",
        items=[(key, label, f"Add a {label.lower()}") for key, (label, _) in PRESETS.items()],
        default='CHAIN',
    )
    # The preset whose defaults the panel shows: a new preset resets the values below.
    # None of them is remembered between calls (SKIP_SAVE): each preset starts from its own.
    shown_preset: StringProperty(options={'HIDDEN', 'SKIP_SAVE'})
    count: IntProperty(name="Count", min=1, soft_max=200, default=10, options={'SKIP_SAVE'})
    rows: IntProperty(name="Rows", min=1, soft_max=200, default=2, options={'SKIP_SAVE'})
    size: FloatProperty(name="Size", min=0.01, soft_max=100.0, default=1.0, unit='LENGTH',
                        options={'SKIP_SAVE'})
    angle: FloatProperty(name="Angle", description="Degrees from straight down",
                         min=-360.0, max=360.0, default=0.0, options={'SKIP_SAVE'})
    spin: FloatProperty(name="Spin", description="Angular velocity about Y (rad/s)",
                        soft_min=-100.0, soft_max=100.0, default=6.0, options={'SKIP_SAVE'})
    mass: FloatProperty(name="Mass per Vertex", min=1e-6, soft_max=100.0, default=0.05,
                        unit='MASS', options={'SKIP_SAVE'})
    stiffness: FloatProperty(name="Stiffness", description="Spring stiffness (N/m)",
                             min=0.0, soft_max=1e6, default=400.0, options={'SKIP_SAVE'})
    damping: FloatProperty(name="Damping", description="Spring damping (N·s/m)",
                           min=0.0, soft_max=1000.0, default=0.0, options={'SKIP_SAVE'})
    bending_rigidity: FloatProperty(
        name="Bending Rigidity",
        description="Flexural rigidity D of the sheet in N·m (angular bending; 0: none)",
        min=0.0, soft_max=1.0, default=0.0, precision=6, options={'SKIP_SAVE'})

    def values(self) -> dict:
        return {name: getattr(self, name) for name in PRESETS[self.preset][1]}

    def execute(self, context):
        label, defaults = PRESETS[self.preset]
        if self.shown_preset != self.preset:
            # The preset's defaults, except for values a script passed to the first call.
            first = not self.shown_preset
            for name, value in defaults.items():
                if not (first and self.properties.is_property_set(name)):
                    setattr(self, name, value)
            self.shown_preset = self.preset
        try:
            structure = preset_structure(self.preset, self.values())
        except ValueError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        for obj in context.selected_objects:
            obj.select_set(False)
        obj = structure_object(label, structure, location=context.scene.cursor.location.copy(),
                               collection=context.collection)
        obj.select_set(True)
        context.view_layer.objects.active = obj
        return {'FINISHED'}

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.prop(self, "preset")
        labels = LABELS[self.preset]
        for name in PRESETS[self.preset][1]:
            if name in labels:
                layout.prop(self, name, text=labels[name])
            else:
                layout.prop(self, name)


class VIEW3D_MT_mass_spring_add(bpy.types.Menu):
    bl_idname = "VIEW3D_MT_mass_spring_add"
    bl_label = "Mass–Spring"

    def draw(self, context):
        for key, (label, _) in PRESETS.items():
            self.layout.operator(OBJECT_OT_mass_spring_add.bl_idname, text=label).preset = key


def _menu_entry(self, context):
    self.layout.menu(VIEW3D_MT_mass_spring_add.bl_idname)


classes = (OBJECT_OT_mass_spring_add, VIEW3D_MT_mass_spring_add)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.VIEW3D_MT_mesh_add.append(_menu_entry)


def unregister():
    bpy.types.VIEW3D_MT_mesh_add.remove(_menu_entry)
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
