"""Scene builders for the seeds' structures, shared by the demo and the example scenes.

The geometry comes from ``mass_spring.presets``; `structure_object` turns a
``mass_spring.Structure`` into what a user would make: a mesh object whose vertices are the
masses, a vertex group of pinned vertices, boolean edge attributes ``ms_rigid`` (distance
constraint) and ``ms_rope`` (tension-only link), and the per-object settings
``obj.mass_spring`` of the add-on (which must be registered before a builder runs).

Blender is Z-up: gravity points along -Z, and the planar structures stand in the XZ plane,
facing a camera that looks along +Y.

    import scenes
    chain = scenes.hanging_chain(location=(0, 0, 3))
    scene = scenes.build_demo_scene()          # several structures, camera, light, ground
    ...bake...
    scenes.add_edge_visuals(chain)             # after the bake: tubes and balls for renders

One function per structure (a preset plus its Blender settings); `STRUCTURES` maps their
names to them.
"""

from __future__ import annotations

import math

import addon_loader
import bmesh
import bpy
import mass_spring
import numpy as np
from mass_spring import presets

PIN_GROUP = "pin"
MASS_GROUP = "mass"
VISUALS_MODIFIER = "MS Edge Visuals"
VISUALS_GROUP = "MS Edge Visuals"

# Colours (linear RGB) of the Workbench and Cycles materials. A structure's parts take
# theirs from the add-on's palette (addon/palette.py), which the viewport overlay uses too;
# these are the stage around them.
STAGE_COLORS = {
    "MS Ground": (0.80, 0.80, 0.80),
    "MS Label": (0.03, 0.03, 0.035),
    "MS Frame": (0.30, 0.30, 0.33),
}
PART_COLORS = {"MS Spring": "SPRING", "MS Rod": "ROD", "MS Rope": "ROPE", "MS Mass": "MASS",
               "MS Pin": "PIN"}


def color_of(material_name: str, default=(0.8, 0.8, 0.8)) -> tuple:
    """The linear RGB colour of one of the scenes' materials."""
    if material_name in PART_COLORS:
        return tuple(getattr(addon_loader.addon_module("palette"), PART_COLORS[material_name]))
    return STAGE_COLORS.get(material_name, default)


# ----------------------------------------------------------------------------- mesh helpers

def _settings_of(obj):
    settings = getattr(obj, "mass_spring", None)
    if settings is None:
        raise RuntimeError(
            "obj.mass_spring is missing: register the Mass-Spring Baker add-on before building scenes")
    return settings


def configure(obj, **settings):
    """Enable the object for bakes and set `obj.mass_spring.<name>` for every keyword."""
    ms = _settings_of(obj)
    ms.enabled = True
    for name, value in settings.items():
        if not hasattr(ms, name):
            raise AttributeError(f"obj.mass_spring has no setting {name!r}")
        setattr(ms, name, value)
    return obj


def structure_object(name: str, structure, *, location=(0.0, 0.0, 0.0), collection=None):
    """A mesh object of a ``mass_spring.Structure``, enabled and ready to bake: the add-on's
    own ``add_menu.structure_object`` (the Add menu's), with the groups "pin" and "mass"."""
    return addon_loader.addon_module("add_menu").structure_object(
        name, structure, location=location, collection=collection, pin_group=PIN_GROUP,
        mass_group=MASS_GROUP)


# ----------------------------------------------------------------------------- structures

def hanging_chain(name="Chain", *, n=10, spacing=0.2, angle=0.0, mass=0.05, stiffness=400.0,
                  damping=0.0, location=(0.0, 0.0, 3.0), collection=None, **settings):
    """``presets.chain``: masses in a row under a pin, joined by springs; `mass` per vertex."""
    structure = presets.chain(n=n, spacing=spacing, angle=angle, mass=mass,
                              stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def bridge(name="Bridge", *, width=13, height=2, spacing=0.25, cross=True, mass=0.05,
           stiffness=3000.0, damping=0.5, location=(0.0, 0.0, 2.0), collection=None, **settings):
    """``presets.bridge``: a lattice fixed at both ends; vertex (i, j) has index j*width + i."""
    structure = presets.bridge(width=width, height=height, spacing=spacing, cross=cross,
                               mass=mass, stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def rigid_pendulum(name="Pendulum", *, length=1.5, angle=90.0, mass=1.0,
                   location=(0.0, 0.0, 3.0), collection=None, **settings):
    """``presets.pendulum``: one rod from a pin to a mass, released from rest."""
    structure = presets.pendulum(length=length, angle=angle, mass=mass)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def double_pendulum(name="Double Pendulum", *, lengths=(0.8, 0.8), angles=(120.0, 150.0),
                    mass=1.0, location=(0.0, 0.0, 3.0), collection=None, **settings):
    """``presets.double_pendulum``: two rods in series from a pin, chaotic motion."""
    structure = presets.double_pendulum(lengths=lengths, angles=angles, mass=mass)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def spinning_ring(name="Spinning Ring", *, n=16, radius=0.8, spin=6.0, hub=True, mass=0.05,
                  stiffness=800.0, damping=0.0, location=(0.0, 0.0, 1.8), collection=None,
                  **settings):
    """``presets.spinning_ring`` (the seeds' "Kreisel"), spinning at `spin` rad/s about the
    Y axis through the object origin; without `hub` use it with use_gravity=False."""
    structure = presets.spinning_ring(n=n, radius=radius, spin=spin, hub=hub, mass=mass,
                                      stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def crane(name="Crane", *, levels=6, level_height=0.45, side=0.4, jib_segments=5,
          jib_spacing=0.4, jib_height=0.35, rope_segments=4, rope_length=1.2, rope_angle=30.0, mass=0.05,
          load_mass=1.0, stiffness=20000.0, damping=2.0, location=(0.0, 0.0, 0.0),
          collection=None, **settings):
    """``presets.crane``: a tower crane of rods and springs with a load on a rope; masses
    through the vertex group "mass"."""
    structure = presets.crane(levels=levels, level_height=level_height, side=side,
                              jib_segments=jib_segments, jib_spacing=jib_spacing,
                              jib_height=jib_height, rope_segments=rope_segments,
                              rope_length=rope_length, rope_angle=rope_angle, mass=mass,
                              load_mass=load_mass, stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def cloth(name="Cloth", *, columns=12, rows=8, width=2.2, stiffness=300.0, mass=0.2,
          damping=0.02, location=(0.0, 0.0, 2.0), collection=None, **settings):
    """``presets.cloth``: a vertical sheet (plane XZ) of `columns` × `rows` vertices, `width`
    metres wide, with shear springs, hanging from its two top corners; `mass` in all."""
    spacing = width / (columns - 1)
    top = (rows - 1) * columns
    structure = presets.cloth(columns, rows, spacing=spacing, plane="XZ",
                              pins=[top, top + columns - 1], total_mass=mass,
                              stiffness=stiffness, shear_stiffness=stiffness, damping=damping)
    structure.positions[:, 2] -= (rows - 1) * spacing  # the object's origin at the top edge
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def collider(obj, *, thickness=0.02, friction=0.3):
    """Physics ▸ Collision on `obj`: bakes keep `thickness` from its surface and slide on it
    with Coulomb `friction` (the add-on's obj.mass_spring_collision.friction)."""
    obj.modifiers.new("Collision", 'COLLISION')
    obj.collision.thickness_outer = thickness
    obj.mass_spring_collision.friction = friction
    return obj


def ball(name="Ball", *, radius=0.5, location=(0.0, 0.0, 0.5), collection=None, **contact):
    """A smooth UV sphere that is a Collision object (`contact`: thickness, friction)."""
    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=64, v_segments=32, radius=radius)
    bm.to_mesh(mesh)
    bm.free()
    mesh.polygons.foreach_set("use_smooth", [True] * len(mesh.polygons))
    mesh.materials.append(material("MS Ball", (0.75, 0.55, 0.3)))
    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    (collection or bpy.context.scene.collection).objects.link(obj)
    return collider(obj, **contact)


def free_chain(name="Free Chain", *, links=20, length=1.6, mass=0.5, stiffness=2000.0,
               damping=0.5, location=(0.0, 0.0, 1.0), collection=None, **settings):
    """A chain of `links` springs lying along X, nothing pinned: it falls (onto colliders)."""
    n = links + 1
    positions = np.zeros((n, 3))
    positions[:, 0] = np.linspace(-length / 2, length / 2, n)
    structure = mass_spring.Structure(
        positions=positions, edges=np.column_stack([np.arange(n - 1), np.arange(1, n)]),
        total_mass=mass, stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, **settings)


def falling_cloth(name="Falling Cloth", *, vertices=17, width=1.6, mass=0.3, stiffness=800.0,
                  bending_rigidity=1e-4, damping=0.05, location=(0.0, 0.0, 1.2), collection=None,
                  **settings):
    """A square sheet lying flat (plane XY) with shear springs and angular bending (flexural
    rigidity D in N m, a heavy fabric's), nothing pinned: it falls and drapes over colliders."""
    spacing = width / (vertices - 1)
    sheet = presets.cloth(vertices, vertices, spacing=spacing, total_mass=mass,
                          stiffness=stiffness, shear_stiffness=stiffness,
                          bending_rigidity=bending_rigidity, damping=damping)
    sheet.positions[:, :2] -= width / 2
    obj = structure_object(name, sheet, location=location, collection=collection)
    return configure(obj, bending_model='ANGULAR', bending_rigidity=bending_rigidity, **settings)


def falling_rope(name="Rope", *, segments=60, length=1.2, mass=0.1, stiffness=3000.0, damping=0.2,
                 bending_rigidity=1e-5, distance=0.008, location=(0.0, 0.0, 1.21), collection=None,
                 **settings):
    """A rope of `segments` edges hanging straight down from `location` (its top), tilted a
    little, nothing pinned, with self-collision at `distance`: let go just over the floor,
    it coils and piles up."""
    n = segments + 1
    direction = np.array([0.05, 0.02, -1.0]) / np.linalg.norm([0.05, 0.02, -1.0])
    positions = np.outer(np.linspace(0, length, n), direction)
    edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
    structure = mass_spring.Structure(positions=positions, edges=edges, total_mass=mass, stiffness=stiffness,
                                      damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, bending_model='ANGULAR', bending_rigidity=bending_rigidity, self_collision=True,
                     self_collision_distance=distance, **settings)


def folding_ribbon(name="Ribbon", *, columns=6, rows=41, spacing=0.04, mass=0.3, stiffness=300.0,
                   bending_rigidity=1e-4, damping=0.01, tilt=8.0, location=(0.0, 0.0, 0.02), collection=None,
                   **settings):
    """A ribbon of quads standing on end in the XZ plane (`columns` x `rows` vertices,
    `spacing` apart), tilted `tilt` degrees, with angular bending and self-collision at
    the automatic distance: let go over the floor, it falls and folds onto itself."""
    strip = presets.cloth(columns, rows, spacing=spacing, plane="XZ", total_mass=mass, stiffness=stiffness,
                          shear_stiffness=0.1 * stiffness, bending_rigidity=bending_rigidity, damping=damping)
    angle = np.radians(tilt)
    x = strip.positions
    strip.positions = np.column_stack([x[:, 0] - 0.5 * (columns - 1) * spacing, -np.sin(angle) * x[:, 2],
                                       np.cos(angle) * x[:, 2]])
    obj = structure_object(name, strip, location=location, collection=collection)
    return configure(obj, bending_model='ANGULAR', bending_rigidity=bending_rigidity, self_collision=True,
                     **settings)


def pinned_net(name="Net", *, cells=8, spacing=0.1, mass=0.3, stiffness=500.0, damping=0.2, distance=0.01,
               location=(0.0, 0.0, 0.9), collection=None, **settings):
    """A net of wires (`cells` x `cells` squares of `spacing`, edges only) level at
    `location` (its centre), pinned at its four corners, with self-collision at
    `distance`: it sags, and catches what falls into it when baked together with it."""
    n = cells + 1
    i, j = np.meshgrid(np.arange(n), np.arange(n))
    positions = np.column_stack([(i.ravel() - 0.5 * cells) * spacing, (j.ravel() - 0.5 * cells) * spacing,
                                 np.zeros(n * n)])
    grid = np.arange(n * n).reshape(n, n)
    edges = np.vstack([np.column_stack([grid[:, :-1].ravel(), grid[:, 1:].ravel()]),
                       np.column_stack([grid[:-1, :].ravel(), grid[1:, :].ravel()])])
    pinned = np.zeros(n * n, bool)
    pinned[[0, n - 1, n * n - n, n * n - 1]] = True
    structure = mass_spring.Structure(positions=positions, edges=edges, pinned=pinned, total_mass=mass,
                                      stiffness=stiffness, damping=damping)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, self_collision=True, self_collision_distance=distance, **settings)


def falling_chain(name="Chain", *, links=40, length=1.0, mass=0.3, direction=(0.7, 0.6, 0.05), distance=0.01,
                  location=(0.0, 0.0, 1.2), collection=None, **settings):
    """A chain of `links` rigid links (rods: every edge marked Rigid), straight along
    `direction` with its middle at `location`, nothing pinned, with self-collision at
    `distance`: let go over a net baked with it, it falls in and drapes."""
    n = links + 1
    unit = np.asarray(direction, float) / np.linalg.norm(direction)
    positions = np.outer(np.linspace(-0.5 * length, 0.5 * length, n), unit)
    edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
    structure = mass_spring.Structure(positions=positions, edges=edges, rigid=np.ones(n - 1, bool),
                                      total_mass=mass)
    obj = structure_object(name, structure, location=location, collection=collection)
    return configure(obj, self_collision=True, self_collision_distance=distance, **settings)


# The core's integrators (mass_spring.INTEGRATOR_INFO) as the add-on's enum identifiers,
# explicit ones first, each group by order of accuracy (as scripts/validate.py plots them).
_INTEGRATOR_INFO = sorted(mass_spring.INTEGRATOR_INFO,
                          key=lambda info: (not info.explicit, info.order))
INTEGRATORS = tuple(info.name.upper() for info in _INTEGRATOR_INFO)
INTEGRATOR_LABELS = {info.name.upper(): info.label for info in _INTEGRATOR_INFO}


def integrator_comparison(name="Spring", *, length=1.0, amplitude=0.4, mass=1.0,
                          frequency=1.0, gap=0.6, substeps=10, rho_inf=0.8, damping=0.0,
                          location=(0.0, 0.0, 3.5), labels=True, collection=None, **settings):
    """Six copies of the same 1-D spring (fix at the left, one mass at its rest length moving
    right so that it swings out by `amplitude`), one per integrator, stacked `gap` apart
    downwards, without gravity. Returns the list of objects, in the order of `INTEGRATORS`."""
    omega = 2.0 * math.pi * frequency
    k = mass * omega ** 2
    objs = []
    for row, integrator in enumerate(INTEGRATORS):
        loc = (location[0], location[1], location[2] - row * gap)
        # The rest length is the edge's length in the base mesh, so the spring starts
        # relaxed and the mass gets the velocity that swings it out by `amplitude`.
        spring = mass_spring.Structure(positions=[(0.0, 0.0, 0.0), (length, 0.0, 0.0)],
                                       edges=[(0, 1)], pinned=[True, False])
        obj = structure_object(f"{name} {INTEGRATOR_LABELS[integrator]}", spring,
                               location=loc, collection=collection)
        # No dashpot by default: it would hide the integrators' own energy behaviour.
        configure(obj, total_mass=2.0 * mass, stiffness=k, damping=damping,
                  use_gravity=False, integrator=integrator, rho_inf=rho_inf, substeps=substeps,
                  initial_velocity=(amplitude * omega, 0.0, 0.0), **settings)
        objs.append(obj)
        if labels:
            add_label(INTEGRATOR_LABELS[integrator], (loc[0] - 0.15, loc[1], loc[2] - 0.07),
                      size=0.2, align="RIGHT", collection=collection)
    return objs


STRUCTURES = {
    "chain": hanging_chain,
    "bridge": bridge,
    "pendulum": rigid_pendulum,
    "double_pendulum": double_pendulum,
    "spinning_top": spinning_ring,
    "crane": crane,
    "cloth": cloth,
    "integrators": integrator_comparison,
}


# ----------------------------------------------------------------------------- looks

def material(name, color=None, roughness=0.45, metallic=0.0):
    """A material that looks the same in Workbench (viewport colour) and Cycles/EEVEE."""
    mat = bpy.data.materials.get(name)
    if mat is not None:
        return mat
    rgb = color or color_of(name)
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = (*rgb, 1.0)       # Workbench, colour type MATERIAL
    mat.roughness = roughness
    mat.metallic = metallic
    if bpy.app.version < (5, 0, 0):
        mat.use_nodes = True              # always on (and deprecated) from 5.0
    bsdf = mat.node_tree.nodes.get("Principled BSDF") if mat.node_tree else None
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (*rgb, 1.0)
        bsdf.inputs["Roughness"].default_value = roughness
        bsdf.inputs["Metallic"].default_value = metallic
    return mat


def _edge_visuals_group():
    """Geometry Nodes group turning loose edges into tubes and vertices into balls:
    springs orange, rigid rods blue, ropes thin brown, masses red, pins black."""
    group = bpy.data.node_groups.get(VISUALS_GROUP)
    if group is not None:
        return group
    group = bpy.data.node_groups.new(VISUALS_GROUP, "GeometryNodeTree")
    iface = group.interface
    iface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    iface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    for sock in ("Spring Radius", "Rod Radius", "Rope Radius", "Mass Radius", "Pin Radius"):
        iface.new_socket(sock, in_out="INPUT", socket_type="NodeSocketFloat")
    iface.new_socket("Pin Group", in_out="INPUT", socket_type="NodeSocketString")
    for sock in ("Spring Material", "Rod Material", "Rope Material", "Mass Material", "Pin Material"):
        iface.new_socket(sock, in_out="INPUT", socket_type="NodeSocketMaterial")

    nodes, links = group.nodes, group.links
    gin = nodes.new("NodeGroupInput")
    gout = nodes.new("NodeGroupOutput")
    join = nodes.new("GeometryNodeJoinGeometry")
    # Tubes edge by edge, each with its own edge's force shade (for the forces material).
    edges_apart = addon_loader.addon_module("forces").edges_apart(group, gin.outputs["Geometry"])
    geo = gin.outputs["Geometry"]

    def named_bool(attr):
        node = nodes.new("GeometryNodeInputNamedAttribute")
        node.data_type = "BOOLEAN"
        node.inputs["Name"].default_value = attr
        return node.outputs["Attribute"]

    rigid, rope = named_bool("ms_rigid"), named_bool("ms_rope")
    either = nodes.new("FunctionNodeBooleanMath")
    either.operation = "OR"
    links.new(rigid, either.inputs[0])
    links.new(rope, either.inputs[1])
    spring = nodes.new("FunctionNodeBooleanMath")
    spring.operation = "NOT"
    links.new(either.outputs[0], spring.inputs[0])

    def tubes(selection, radius_socket, material_socket):
        to_curve = nodes.new("GeometryNodeMeshToCurve")
        links.new(edges_apart, to_curve.inputs["Mesh"])
        links.new(selection, to_curve.inputs["Selection"])
        circle = nodes.new("GeometryNodeCurvePrimitiveCircle")
        circle.inputs["Resolution"].default_value = 10
        links.new(gin.outputs[radius_socket], circle.inputs["Radius"])
        to_mesh = nodes.new("GeometryNodeCurveToMesh")
        links.new(to_curve.outputs["Curve"], to_mesh.inputs["Curve"])
        links.new(circle.outputs["Curve"], to_mesh.inputs["Profile Curve"])
        set_mat = nodes.new("GeometryNodeSetMaterial")
        links.new(to_mesh.outputs["Mesh"], set_mat.inputs["Geometry"])
        links.new(gin.outputs[material_socket], set_mat.inputs["Material"])
        links.new(set_mat.outputs["Geometry"], join.inputs["Geometry"])

    tubes(spring.outputs[0], "Spring Radius", "Spring Material")
    tubes(rigid, "Rod Radius", "Rod Material")
    tubes(rope, "Rope Radius", "Rope Material")

    pin_attr = nodes.new("GeometryNodeInputNamedAttribute")
    pin_attr.data_type = "FLOAT"
    links.new(gin.outputs["Pin Group"], pin_attr.inputs["Name"])
    is_pin = nodes.new("FunctionNodeCompare")
    is_pin.data_type = "FLOAT"
    is_pin.operation = "GREATER_THAN"
    links.new(pin_attr.outputs["Attribute"], is_pin.inputs["A"])
    is_pin.inputs["B"].default_value = 0.5
    not_pin = nodes.new("FunctionNodeBooleanMath")
    not_pin.operation = "NOT"
    links.new(is_pin.outputs["Result"], not_pin.inputs[0])

    def balls(selection, radius_socket, material_socket):
        points = nodes.new("GeometryNodeMeshToPoints")
        links.new(geo, points.inputs["Mesh"])
        links.new(selection, points.inputs["Selection"])
        sphere = nodes.new("GeometryNodeMeshUVSphere")
        sphere.inputs["Segments"].default_value = 16
        sphere.inputs["Rings"].default_value = 8
        links.new(gin.outputs[radius_socket], sphere.inputs["Radius"])
        inst = nodes.new("GeometryNodeInstanceOnPoints")
        links.new(points.outputs["Points"], inst.inputs["Points"])
        links.new(sphere.outputs["Mesh"], inst.inputs["Instance"])
        real = nodes.new("GeometryNodeRealizeInstances")
        links.new(inst.outputs["Instances"], real.inputs["Geometry"])
        set_mat = nodes.new("GeometryNodeSetMaterial")
        links.new(real.outputs["Geometry"], set_mat.inputs["Geometry"])
        links.new(gin.outputs[material_socket], set_mat.inputs["Material"])
        links.new(set_mat.outputs["Geometry"], join.inputs["Geometry"])

    balls(not_pin.outputs[0], "Mass Radius", "Mass Material")
    balls(is_pin.outputs["Result"], "Pin Radius", "Pin Material")

    smooth = nodes.new("GeometryNodeSetShadeSmooth")
    links.new(join.outputs["Geometry"], smooth.inputs["Geometry"])
    links.new(smooth.outputs["Geometry"], gout.inputs["Geometry"])
    return group


def add_edge_visuals(obj, *, radius=0.02, mass_radius=None, pin_radius=None, forces=False):
    """Make the object's edges and vertices visible in renders. With `forces`, springs,
    rods and ropes get the material "Mass–Spring Forces" (blue pushes, red pulls; Cycles
    and EEVEE) instead of their own colours.

    Adds a Geometry Nodes modifier at the END of the stack, so it draws the mesh after the
    baked deformation (shape keys come before every modifier; a Mesh Cache modifier stays
    above it). Idempotent. Returns the modifier.
    """
    mod = obj.modifiers.get(VISUALS_MODIFIER)
    if mod is None:
        mod = obj.modifiers.new(VISUALS_MODIFIER, "NODES")
    mod.node_group = _edge_visuals_group()
    settings = getattr(obj, "mass_spring", None)
    pin_group = (settings.pin_group if settings is not None else "") or PIN_GROUP
    values = {
        "Spring Radius": radius * 0.6, "Rod Radius": radius, "Rope Radius": radius * 0.4,
        "Mass Radius": mass_radius or radius * 2.5, "Pin Radius": pin_radius or radius * 3.0,
        "Pin Group": pin_group,
        "Spring Material": material("MS Spring"), "Rod Material": material("MS Rod", metallic=0.3),
        "Rope Material": material("MS Rope"), "Mass Material": material("MS Mass"),
        "Pin Material": material("MS Pin"),
    }
    if forces:  # thicker members, smaller masses: the colours are the point
        by_force = addon_loader.addon_module("forces").material()
        values.update({"Spring Material": by_force, "Rod Material": by_force,
                       "Rope Material": by_force, "Spring Radius": radius * 1.2,
                       "Rod Radius": radius * 1.4, "Rope Radius": radius * 0.8,
                       "Mass Radius": mass_radius or radius * 1.8})
    modifiers = addon_loader.addon_module("forces")  # the add-on's modifier helpers
    modifiers.set_modifier_inputs(mod, values)
    # Keep deformers (Mesh Cache, Armature...) and the bake's forces above the visuals.
    modifiers.move_modifier(obj, mod, len(obj.modifiers) - 1)
    obj.update_tag()
    return mod


def add_label(text, location, *, size=0.25, align="LEFT", collection=None):
    """A flat text object in the XZ plane, facing a camera that looks along +Y."""
    curve = bpy.data.curves.new(f"Label {text}", "FONT")
    curve.body = text
    curve.size = size
    curve.align_x = align
    obj = bpy.data.objects.new(f"Label {text}", curve)
    obj.location = location
    obj.rotation_euler = (math.pi / 2, 0.0, 0.0)
    obj.data.materials.append(material("MS Label"))
    (collection or bpy.context.scene.collection).objects.link(obj)
    return obj


def add_stage(scene, *, center=(0.0, 0.0, 1.6), width=12.0, height=4.5, ground_z=0.0,
              lens=50.0, resolution=(1600, 800), wall_distance=2.5):
    """Camera looking along +Y at `center`, framing `width` (and about `height`); a sun; a
    floor that bends up into a backdrop `wall_distance` behind the structures; Workbench
    settings that read well (Cycles ready too). Returns the camera."""
    cx, cy, cz = center
    cam_data = bpy.data.cameras.new("Camera")
    cam_data.lens = lens
    cam_data.sensor_fit = "AUTO"
    aspect = resolution[0] / resolution[1]
    # Fit the wider of width and height*aspect into the horizontal field of view.
    half_fov = math.atan(cam_data.sensor_width / (2 * lens))
    dist = 0.5 * max(width, height * aspect) / math.tan(half_fov)
    tilt = math.radians(3.0)
    cam = bpy.data.objects.new("Camera", cam_data)
    cam.location = (cx, cy - dist * math.cos(tilt), cz + dist * math.sin(tilt))
    cam.rotation_euler = (math.pi / 2 - tilt, 0.0, 0.0)
    scene.collection.objects.link(cam)
    scene.camera = cam

    # Floor from behind the camera, bending up into a back wall: no horizon line.
    bend, wall = 2.5, dist * 0.6
    profile = [(cam.location[1] - 5.0, ground_z)]
    for k in range(13):
        t = k / 12 * math.pi / 2
        profile.append((cy + wall_distance + bend * math.sin(t), ground_z + bend * (1 - math.cos(t))))
    profile.append((cy + wall_distance + bend, ground_z + bend + wall))
    half = max(width, height * aspect) * 1.5
    verts, faces = [], []
    for (y, z) in profile:
        verts += [(cx - half, y, z), (cx + half, y, z)]
    for k in range(len(profile) - 1):
        a = 2 * k
        faces.append((a, a + 1, a + 3, a + 2))
    mesh = bpy.data.meshes.new("Backdrop")
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    for poly in mesh.polygons:
        poly.use_smooth = True
    ground = bpy.data.objects.new("Backdrop", mesh)
    ground.data.materials.append(material("MS Ground", roughness=0.8))
    scene.collection.objects.link(ground)

    sun_data = bpy.data.lights.new("Sun", "SUN")
    sun_data.energy = 3.0
    sun_data.angle = math.radians(8.0)
    sun = bpy.data.objects.new("Sun", sun_data)
    sun.rotation_euler = (math.radians(40), math.radians(0), math.radians(-25))
    scene.collection.objects.link(sun)

    world = scene.world or bpy.data.worlds.new("World")
    scene.world = world
    world.color = (0.9, 0.92, 0.95)
    set_render_defaults(scene, resolution=resolution)
    return cam


def set_render_defaults(scene, *, engine="BLENDER_WORKBENCH", resolution=(1600, 800), samples=32):
    """Render settings for headless previews: Workbench with studio light, shadows and
    cavity; Cycles on the CPU with few samples when `engine` is "CYCLES"."""
    render = scene.render
    render.resolution_x, render.resolution_y = resolution
    render.resolution_percentage = 100
    render.film_transparent = False
    render.engine = engine
    shading = scene.display.shading
    shading.light = "STUDIO"
    try:
        shading.studio_light = "paint.sl"  # bright and even; bundled with every Blender
    except TypeError:
        pass
    shading.color_type = "MATERIAL"
    shading.show_shadows = False  # costly on a software GL and darkens the whole picture
    shading.show_cavity = True
    shading.cavity_type = "WORLD"
    shading.show_specular_highlight = True
    scene.display.shadow_focus = 0.9
    scene.display.shadow_shift = 0.1
    # Light from the front left and above: shadows fall onto the floor and the backdrop.
    scene.display.light_direction = (-0.45, -0.6, 0.66)
    scene.display.render_aa = "16"
    if engine == "CYCLES":
        cycles = scene.cycles
        cycles.device = "CPU"
        cycles.samples = samples
        cycles.preview_samples = samples
        cycles.use_denoising = True
        cycles.use_adaptive_sampling = True
        if scene.world is not None:
            _cycles_world(scene.world)
        if not any(o.type == "LIGHT" for o in scene.objects):
            pass
    view = scene.view_settings
    try:
        view.view_transform = "Standard" if engine == "BLENDER_WORKBENCH" else "AgX"
    except TypeError:
        pass


def _cycles_world(world):
    """A soft bright sky for Cycles (the Workbench uses `world.color` directly)."""
    if bpy.app.version < (5, 0, 0):
        world.use_nodes = True
    tree = world.node_tree
    if tree is None:
        return
    bg = tree.nodes.get("Background")
    if bg is None:
        bg = tree.nodes.new("ShaderNodeBackground")
        out = tree.nodes.get("World Output") or tree.nodes.new("ShaderNodeOutputWorld")
        tree.links.new(bg.outputs["Background"], out.inputs["Surface"])
    bg.inputs["Color"].default_value = (*world.color, 1.0)
    bg.inputs["Strength"].default_value = 0.6


# ----------------------------------------------------------------------------- the demo

DEMO_FRAMES = (1, 120)
DEMO_RENDER_FRAME = 12
DEMO_RESOLUTION = (1920, 800)


def add_box(name, lo, hi, *, material_name="MS Frame", collection=None):
    """A static box from corner `lo` to corner `hi` (world space): posts, beams, pillars."""
    (x0, y0, z0), (x1, y1, z1) = lo, hi
    verts = [(x, y, z) for z in (z0, z1) for y in (y0, y1) for x in (x0, x1)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    mesh.materials.append(material(material_name, color_of(material_name, (0.3, 0.3, 0.32)),
                                   roughness=0.7))
    obj = bpy.data.objects.new(name, mesh)
    (collection or bpy.context.scene.collection).objects.link(obj)
    return obj


def build_demo_scene(scene=None, *, frame_start=DEMO_FRAMES[0], frame_end=DEMO_FRAMES[1],
                     substeps=10, clear=True):
    """Several of the seeds' structures side by side, with camera, light and backdrop.

    Left to right: a hanging chain, a rigid pendulum and a double pendulum under one beam;
    a bridge lattice between two pillars with a cloth hanging below it; a spinning ring on
    a hub; a tower crane with a load on a rope: every preset of the Add menu; a chain
    dropped onto the floor and a cloth onto a ball (Collision objects), the cloth's folds
    kept apart by Self Collision. Returns the scene. The structures are enabled for baking; the tubes and
    balls that make their edges visible are added by `finish_demo_scene` after the bake.
    """
    scene = scene or bpy.context.scene
    if clear:
        clear_scene(scene)
    scene.frame_start, scene.frame_end = frame_start, frame_end
    scene.frame_current = min(max(DEMO_RENDER_FRAME, frame_start), frame_end)
    scene.render.fps = 24
    common = dict(substeps=substeps)
    beam_z = 4.0
    # The labels stand on the floor in front of the structures, low enough that the
    # camera sees them below every structure's foot (never across one), each moved toward
    # the picture's centre so that it shows under the structure it names.
    stage_center = (10.3, 0.0, 2.5)
    camera = add_stage(scene, center=stage_center, width=26.4, height=8.0, resolution=DEMO_RESOLUTION)
    label_z, label_y = 0.08, -5.0
    perspective = (label_y - camera.location[1]) / (0.0 - camera.location[1])

    def label(text, x):
        x_seen = stage_center[0] + (x - stage_center[0]) * perspective
        add_label(text, (x_seen, label_y, label_z), size=0.34, align="CENTER")

    # Chain, pendulum and double pendulum hang from one beam, just behind them (so that
    # the double pendulum swinging over the top passes in front of it).
    add_box("Beam", (-2.4, 0.06, beam_z - 0.07), (9.0, 0.2, beam_z + 0.07))
    for x in (-2.4, 8.86):
        add_box("Post", (x, 0.06, 0.0), (x + 0.14, 0.2, beam_z))
    hanging_chain(location=(0.0, 0.0, beam_z), n=14, spacing=0.2, angle=40.0,
                  stiffness=600.0, damping=0.05, **common)
    label("chain", 0.0)
    rigid_pendulum(location=(3.4, 0.0, beam_z), length=1.8, angle=75.0, **common)
    label("pendulum", 3.4)
    double_pendulum(location=(6.6, 0.0, beam_z), lengths=(1.0, 1.0), angles=(100.0, 130.0),
                    **common)
    label("double pendulum", 6.6)

    # A bridge lattice between two pillars.
    bx, bw, bz, cols = 9.9, 3.5, 2.6, 15
    bridge(location=(bx, 0.0, bz), width=cols, height=2, spacing=bw / (cols - 1),
           stiffness=2500.0, damping=0.5, **common)
    for x in (bx - 0.2, bx + bw - 0.1):
        add_box("Pillar", (x, -0.3, 0.0), (x + 0.3, 0.3, bz - bw / (cols - 1) - 0.04))
    label("bridge · cloth", bx + bw / 2)
    # A cloth hanging from two corners between the pillars, below the deck.
    cloth(location=(bx + 0.35, 0.0, bz - 0.45), columns=12, rows=7, width=bw - 0.8,
          stiffness=60.0, **common)

    # A spinning ring on a hub.
    rx, rz = 15.2, 2.3
    spinning_ring(location=(rx, 0.0, rz), radius=0.9, spin=6.0, **common)
    add_box("Stand", (rx - 0.06, 0.1, 0.0), (rx + 0.06, 0.22, rz))
    label("spinning ring", rx)

    # A tower crane with a load on a rope.
    cx = 17.6
    crane(location=(cx, 0.0, 0.0), levels=8, damping=5.0, **common)
    add_box("Footing", (cx - 0.45, -0.45, -0.02), (cx + 0.45, 0.45, 0.03))
    label("crane", cx)

    # Contact: a chain dropped onto the floor, a cloth onto a ball (Collision objects),
    # whose folds keep apart (Self Collision).
    kx = 20.6
    floor = add_box("Floor", (kx - 0.9, -1.4, -0.1), (kx + 2.0, 0.8, 0.0))
    floor.hide_render = True  # the stage's floor shows it
    collider(floor)
    ball(radius=0.45, location=(kx + 1.1, 0.1, 0.45))
    falling_cloth(vertices=13, width=1.3, location=(kx + 1.1, 0.1, 1.05), self_collision=True, **common)
    free_chain(links=10, length=1.0, location=(kx - 0.1, 0.6, 0.7), **common)
    label("contact", kx + 0.5)

    add_label("Mass–Spring Baker", (10.3, 0.3, 6.15), size=0.8, align="CENTER")
    add_label("masses · springs · rigid rods · ropes · contact · self-collision — generalized-α, "
              "baked into shape keys", (10.3, 0.3, 5.5), size=0.3, align="CENTER")
    return scene


def clear_scene(scene):
    """Remove every object of the scene and the data nothing uses any more.

    (Not `read_factory_settings`: that would also reset the preferences and disable an
    installed add-on.)"""
    objects = list(scene.objects)
    data = [o.data for o in objects if o.data is not None]
    bpy.data.batch_remove(objects)
    bpy.data.batch_remove([d for d in data if d.users == 0])
    if hasattr(bpy.data, "orphans_purge"):
        bpy.data.orphans_purge(do_recursive=True)


def finish_demo_scene(scene, forces=False):
    """After the bake: tubes and balls on every structure so the render shows them, with
    `forces` coloured by the force in each edge (add_edge_visuals)."""
    for obj in addon_loader.addon_module("bake").enabled_objects(scene):
        radius = 0.012 if obj.name.startswith("Falling Cloth") else 0.026  # a fine mesh
        add_edge_visuals(obj, radius=radius, forces=forces)
    return scene
