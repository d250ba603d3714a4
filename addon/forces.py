"""The forces of a bake, in the viewport, in renders and on a render farm without the add-on.

A bake (``write``) stores on the mesh, all on the edge domain:

    ms_rest_length       rest length, object space of the base mesh
    ms_axial_stiffness   N: a spring's force per unit of strain, k L0 (0 for rods)
    .ms_tension_only     ropes: they pull, never push
    .ms_rod_force.<f>    N: every rod's tension at frame f, as the core computed it
                         (0 on other edges; only when the structure has rods)

and adds the Geometry Nodes modifier "Mass–Spring Forces" right after the baked motion. It
computes, whenever the mesh is evaluated (viewport, render, farm; nodes of core Blender):

    ms_strain       EDGE   |e| / L0 - 1 of the evaluated edge
    ms_force        EDGE   N, + pulls, - pushes: k L0 strain for springs (0 for a slack
                           rope), the baked tension for rods
    ms_force_level  EDGE   ms_force / the bake's largest |force|, in [-1, 1]
    ms_force_shade  POINT  the mean level of the edges at each vertex (for materials)
    ms_force_color  POINT  its colour, blue (push) - white - red (pull), for Workbench's
                           Attribute colour

``show`` adds a second modifier, "Mass–Spring Force Colours", that gives the mesh the
material "Mass–Spring Forces" (the same colours from ms_force_shade) and turns edges
without faces into tubes coloured edge by edge, and makes ms_force_color the mesh's active
colour attribute (for Workbench); ``hide`` removes them and restores the active colours. Strain is measured in
object space, so it is the true strain for any rotation, translation and uniform scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

DATA_GROUP = "Mass–Spring Forces"
DATA_MODIFIER = "Mass–Spring Forces"
DISPLAY_GROUP = "Mass–Spring Force Colours"
DISPLAY_MODIFIER = "Mass–Spring Force Colours"
MATERIAL = "Mass–Spring Forces"

REST_LENGTH = "ms_rest_length"
AXIAL_STIFFNESS = "ms_axial_stiffness"
TENSION_ONLY = ".ms_tension_only"
ROD_FORCE_PATTERN = ".ms_rod_force.#"  # '#' is the frame number
STRAIN, FORCE, LEVEL, SHADE, COLOR = ("ms_strain", "ms_force", "ms_force_level",
                                      "ms_force_shade", "ms_force_color")

# Blue where members push, white where they carry nothing, red where they pull.
RAMP = ((0.0, (0.05, 0.25, 0.95, 1.0)), (0.5, (1.0, 1.0, 1.0, 1.0)),
        (1.0, (0.95, 0.08, 0.04, 1.0)))


def rod_force_name(frame: int) -> str:
    return ROD_FORCE_PATTERN.replace("#", str(int(frame)))


@dataclass
class ForceData:
    """Per-edge numbers of one bake (E edges, F frames)."""

    rest_length: np.ndarray      # (E,) object space
    axial_stiffness: np.ndarray  # (E,) N
    tension_only: np.ndarray     # (E,) bool
    rod_forces: np.ndarray       # (F, E) N, 0 off the rods; (F, 0) without rods
    force_range: float           # N, the largest |force| of the bake (> 0)


def edge_lengths(positions: np.ndarray, edges: np.ndarray) -> np.ndarray:
    positions = np.asarray(positions, dtype=np.float64)
    return np.linalg.norm(positions[edges[:, 1]] - positions[edges[:, 0]], axis=1)


def force_data(arrays, stiffness: float, springs: np.ndarray, rods: np.ndarray,
               world_start: np.ndarray, local_positions: np.ndarray,
               rod_forces: np.ndarray) -> ForceData:
    """The bake's ForceData. `springs` and `rods` mask the edges that became springs (ropes
    included) and rods, the rods in the core's order; `world_start` (N, 3) is where the
    simulation started; `rod_forces` (F, C) the core's rod tensions at every frame."""
    edges = arrays.edges
    rest = edge_lengths(arrays.local_positions, edges)
    axial = np.where(springs, stiffness * arrays.stiffness_scale * edge_lengths(world_start, edges), 0.0)
    tension_only = springs & arrays.rope
    per_edge = np.zeros((len(local_positions), len(edges) if rods.any() else 0), np.float32)
    if rods.any():
        per_edge[:, np.flatnonzero(rods)] = rod_forces
    largest = float(np.abs(rod_forces).max(initial=0.0))
    safe_rest = np.where(rest > 0, rest, 1.0)
    for frame in local_positions:  # one frame at a time: (F, E) doubles can be large
        force = axial * (edge_lengths(frame, edges) / safe_rest - 1.0)
        force[tension_only] = np.maximum(force[tension_only], 0.0)
        largest = max(largest, float(np.abs(force).max(initial=0.0)))
    return ForceData(rest.astype(np.float32), axial.astype(np.float32), tension_only,
                     per_edge, largest if largest > 0 else 1.0)


# ------------------------------------------------------------------------- on the object

# A staged bake's modifiers and action carry this after their final names until
# writers.commit: the previous bake's parts are removed by name, so no staged part may
# hold one of those names, even where the user deleted or renamed the previous part
# (test_a_re_bake_after_parts_of_the_bake_were_deleted_or_renamed).
STAGED_SUFFIX = " (staged)"


def staged_name(name: str) -> str:
    """An attribute's name while its bake is staged (writers.commit gives the final name)."""
    return ".staged " + name


def write(obj, data: ForceData, frames) -> dict:
    """Stage `data` on the mesh (under staged_name) and add the data modifier after the
    baked motion; commit() puts them in place of a previous bake's. Returns the bake
    record's part, with the final names; on any exception everything added is removed
    again."""
    record = {"attributes": [], "modifier": ""}
    try:
        mesh = obj.data
        for name, kind, values in ((REST_LENGTH, 'FLOAT', data.rest_length),
                                   (AXIAL_STIFFNESS, 'FLOAT', data.axial_stiffness),
                                   (TENSION_ONLY, 'BOOLEAN', data.tension_only)):
            _edge_attribute(mesh, name, kind, values, record)
        if data.rod_forces.shape[1]:
            for frame, values in zip(frames, data.rod_forces):
                _edge_attribute(mesh, rod_force_name(frame), 'FLOAT', values, record)
        modifier = obj.modifiers.new(DATA_MODIFIER + STAGED_SUFFIX, 'NODES')
        record["modifier"] = modifier.name
        modifier.node_group = data_group()
        set_modifier_inputs(modifier, {"Force Range": data.force_range,
                                       "Frame Start": int(frames[0]),
                                       "Frame End": int(frames[-1])})
        after_bake = next((i + 1 for i, m in enumerate(obj.modifiers) if m.type == 'MESH_CACHE'), 0)
        move_modifier(obj, modifier, after_bake)
    except BaseException:
        discard(obj, record)
        raise
    return record


def _edge_attribute(mesh, name, kind, values, record) -> None:
    old = mesh.attributes.get(staged_name(name))  # left by a run that died while staging
    if old is not None:
        mesh.attributes.remove(old)
    attribute = mesh.attributes.new(staged_name(name), kind, 'EDGE')
    record["attributes"].append(name)
    attribute.data.foreach_set("value", np.ascontiguousarray(values))


def commit(obj, record: dict) -> None:
    """Give the staged attributes and modifier of `record` (write's) their final names;
    the previous bake's are removed already."""
    attributes = obj.data.attributes
    for name in record.get("attributes", []):
        staged = attributes.get(staged_name(name))
        if staged is None:
            continue
        old = attributes.get(name)  # one no record lists any more
        if old is not None:
            attributes.remove(old)
        attributes[staged_name(name)].name = name
    modifier = obj.modifiers.get(record.get("modifier", ""))
    if modifier is not None:
        modifier.name = DATA_MODIFIER  # (Blender adds ".001" if a modifier of the user's has it)
        record["modifier"] = modifier.name


def discard(obj, record: dict) -> None:
    """Remove what write() staged (the bake is not committed): the previous bake's forces,
    shown or not, stay as they were."""
    modifier = obj.modifiers.get(record.get("modifier", ""))
    if modifier is not None and modifier.type == 'NODES':
        obj.modifiers.remove(modifier)
        obj.update_tag()
    attributes = obj.data.attributes
    for name in record.get("attributes", []):
        attribute = attributes.get(staged_name(name))
        if attribute is not None:
            attributes.remove(attribute)
    _remove_if_unused(bpy.data.node_groups, DATA_GROUP)


def remove(obj, record: dict) -> None:
    """Undo `write` (and `show`): what a bake record's "forces" part lists. The mesh's
    attributes stay while another object sharing the mesh still shows them (a linked
    duplicate made after the bake: tests/test_addon_safety.py); the node group goes
    with its last user."""
    hide(obj)
    modifier = obj.modifiers.get(record.get("modifier", ""))
    if modifier is not None and modifier.type == 'NODES':
        obj.modifiers.remove(modifier)
        obj.update_tag()
    if not any(has_data(other) for other in mesh_users(obj) if other != obj):
        attributes = obj.data.attributes
        for name in record.get("attributes", []):
            attribute = attributes.get(name)
            if attribute is not None:
                attributes.remove(attribute)
    _remove_if_unused(bpy.data.node_groups, DATA_GROUP)


def mesh_users(obj) -> list:
    """The objects whose data is `obj`'s mesh (linked duplicates share one)."""
    return [other for other in bpy.data.objects if other.data == obj.data]


def _remove_if_unused(collection, name: str) -> None:
    """Remove the data-block `name` of `collection` if nothing refers to it (user counts
    lag behind a removed modifier's inputs, so ask who refers to it)."""
    block = collection.get(name)
    if block is not None and not block.use_fake_user and not bpy.data.user_map(subset=[block])[block]:
        collection.remove(block)


def has_data(obj) -> bool:
    modifier = obj.modifiers.get(DATA_MODIFIER)
    return modifier is not None and modifier.type == 'NODES'


def shown(obj) -> bool:
    return obj.modifiers.get(DISPLAY_MODIFIER) is not None


def show(obj, tube_radius: float | None = None) -> None:
    """Colour the object by force: the display modifier at the end of the stack, with the
    material "Mass–Spring Forces". Edges without faces become tubes of `tube_radius`
    (default: 3 % of the mean edge length). Nothing else on the object changes."""
    if not has_data(obj):
        raise ValueError(f"'{obj.name}' has no baked forces: bake it first")
    group = display_group()
    modifier = obj.modifiers.get(DISPLAY_MODIFIER) or obj.modifiers.new(DISPLAY_MODIFIER, 'NODES')
    modifier.node_group = group
    if tube_radius is None:
        rest = obj.data.attributes.get(REST_LENGTH)
        lengths = np.empty(len(obj.data.edges), np.float32)
        if rest is not None and len(lengths):
            rest.data.foreach_get("value", lengths)
        tube_radius = 0.03 * float(lengths.mean()) if len(lengths) else 0.01
    set_modifier_inputs(modifier, {"Tube Radius": tube_radius, "Material": material()})
    move_modifier(obj, modifier, len(obj.modifiers) - 1)
    _make_force_colour_active(obj.data)
    obj.update_tag()


# Workbench's Attribute colour shows the mesh's active colour attribute. Blender 5.0 and
# older keep the active name of the original mesh only, so Show Forces puts an (empty)
# ms_force_color on the mesh, which the modifier fills, and makes it active; Hide puts the
# previous names back (test_baked_forces_play_and_render_without_the_addon).
PREVIOUS_COLOURS = "_ms_colours_before_forces"


def _make_force_colour_active(mesh) -> None:
    colours = mesh.color_attributes
    if colours.get(COLOR) is None:
        mesh[PREVIOUS_COLOURS] = [colours.active_color_name, colours.default_color_name]
        colours.new(COLOR, 'FLOAT_COLOR', 'POINT')
    colours.active_color_name = colours.default_color_name = COLOR


def _restore_colours(mesh) -> None:
    previous = mesh.get(PREVIOUS_COLOURS)
    if previous is None:
        return
    placeholder = mesh.color_attributes.get(COLOR)
    if placeholder is not None:
        mesh.color_attributes.remove(placeholder)
    active, default = list(previous)
    mesh.color_attributes.active_color_name = active
    mesh.color_attributes.default_color_name = default
    del mesh[PREVIOUS_COLOURS]


def hide(obj) -> None:
    """Remove the display modifier, and the material once nothing uses it."""
    modifier = obj.modifiers.get(DISPLAY_MODIFIER)
    if modifier is not None:
        obj.modifiers.remove(modifier)
        obj.update_tag()
    if not any(shown(other) for other in mesh_users(obj) if other != obj):
        _restore_colours(obj.data)
    for collection, name in ((bpy.data.node_groups, DISPLAY_GROUP), (bpy.data.materials, MATERIAL)):
        _remove_if_unused(collection, name)


# ------------------------------------------------------------------------- modifiers

def set_modifier_inputs(modifier, values: dict) -> None:
    """Set Geometry Nodes modifier inputs by name: an RNA struct from Blender 5.2, ID
    properties of the modifier before."""
    interface = getattr(modifier, "properties", None)
    inputs = getattr(interface, "inputs", None)
    for item in modifier.node_group.interface.items_tree:
        if getattr(item, "in_out", None) != "INPUT" or item.name not in values:
            continue
        if inputs is not None and hasattr(inputs, item.identifier):
            getattr(inputs, item.identifier).value = values[item.name]
        else:
            modifier[item.identifier] = values[item.name]


def move_modifier(obj, modifier, to_index: int) -> None:
    from_index = list(obj.modifiers).index(modifier)
    if from_index == to_index:
        return
    if hasattr(obj.modifiers, "move"):  # Blender 4.3+
        obj.modifiers.move(from_index, to_index)
    else:
        with bpy.context.temp_override(object=obj, active_object=obj):
            bpy.ops.object.modifier_move_to_index(modifier=modifier.name, index=to_index)


# ------------------------------------------------------------------------- node groups

def _new_group(name: str, inputs: tuple) -> bpy.types.NodeTree:
    group = bpy.data.node_groups.new(name, "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    for socket_name, socket_type, default in inputs:
        socket = group.interface.new_socket(socket_name, in_out="INPUT", socket_type=socket_type)
        if default is not None:
            socket.default_value = default
    return group


class _Builder:
    """Terse node building: node(kind, **properties), then link(output, input)."""

    def __init__(self, tree):
        self.tree = tree

    def node(self, kind: str, **properties):
        node = self.tree.nodes.new(kind)
        for key, value in properties.items():
            setattr(node, key, value)
        return node

    def link(self, output, input_) -> None:
        self.tree.links.new(output, input_)

    def link_in_order(self, multi_input, outputs) -> None:
        """Link `outputs` into a multi-input socket in this order (which end Blender puts
        a new link at differs between versions)."""
        for output in outputs:
            self.link(output, multi_input)
        if [link.from_socket for link in multi_input.links] != list(outputs):
            for link in list(multi_input.links):
                self.tree.links.remove(link)
            for output in reversed(outputs):
                self.link(output, multi_input)
        assert [link.from_socket for link in multi_input.links] == list(outputs)

    def math(self, operation: str, a, b=None):
        node = self.node("ShaderNodeMath", operation=operation)
        for socket, value in ((node.inputs[0], a), (node.inputs[1], b)):
            if value is None:
                continue
            if isinstance(value, (int, float)):
                socket.default_value = value
            else:
                self.link(value, socket)
        return node.outputs[0]

    def named(self, name, data_type: str = 'FLOAT'):
        node = self.node("GeometryNodeInputNamedAttribute", data_type=data_type)
        if isinstance(name, str):
            node.inputs["Name"].default_value = name
        else:
            self.link(name, node.inputs["Name"])
        return node.outputs["Attribute"]

    def store(self, geometry, name: str, value, data_type: str, domain: str):
        node = self.node("GeometryNodeStoreNamedAttribute", data_type=data_type, domain=domain)
        self.link(geometry, node.inputs["Geometry"])
        node.inputs["Name"].default_value = name
        self.link(value, node.inputs["Value"])
        return node.outputs["Geometry"]

    def ramp(self, level):
        """Colour of a level in [-1, 1]: RAMP."""
        to_unit = self.node("ShaderNodeMapRange")
        to_unit.inputs["From Min"].default_value = -1.0
        self.link(level, to_unit.inputs["Value"])
        ramp = self.node("ShaderNodeValToRGB")
        elements = ramp.color_ramp.elements
        while len(elements) < len(RAMP):
            elements.new(0.5)
        for element, (position, colour) in zip(elements, RAMP):
            element.position, element.color = position, colour
        self.link(to_unit.outputs["Result"], ramp.inputs["Fac"])
        return ramp.outputs["Color"]


def data_group() -> bpy.types.NodeTree:
    """The data modifier's group (module doc): strain, force, level, shade and colour."""
    group = bpy.data.node_groups.get(DATA_GROUP)
    if group is not None:
        return group
    group = _new_group(DATA_GROUP, (("Force Range", "NodeSocketFloat", 1.0),
                                    ("Frame Start", "NodeSocketInt", 1),
                                    ("Frame End", "NodeSocketInt", 250)))
    b = _Builder(group)
    gin, gout = b.node("NodeGroupInput"), b.node("NodeGroupOutput")

    ends = b.node("GeometryNodeInputMeshEdgeVertices")
    length = b.node("ShaderNodeVectorMath", operation='DISTANCE')
    b.link(ends.outputs["Position 1"], length.inputs[0])
    b.link(ends.outputs["Position 2"], length.inputs[1])
    strain = b.math('SUBTRACT', b.math('DIVIDE', length.outputs["Value"], b.named(REST_LENGTH)), 1.0)

    spring = b.math('MULTIPLY', b.named(AXIAL_STIFFNESS), strain)
    slack = b.node("GeometryNodeSwitch", input_type='FLOAT')  # ropes do not push
    b.link(b.named(TENSION_ONLY, 'BOOLEAN'), slack.inputs["Switch"])
    b.link(spring, slack.inputs["False"])
    b.link(b.math('MAXIMUM', spring, 0.0), slack.inputs["True"])

    # The rods' tensions of this frame: the attribute named after the (rounded, clamped)
    # scene frame; outside the baked range the first or last frame's.
    time = b.node("GeometryNodeInputSceneTime")
    frame = b.math('MINIMUM', b.math('MAXIMUM', b.math('ROUND', time.outputs["Frame"]),
                                     gin.outputs["Frame Start"]), gin.outputs["Frame End"])
    text = b.node("FunctionNodeValueToString")
    b.link(frame, text.inputs["Value"])
    name = b.node("FunctionNodeReplaceString")
    name.inputs["String"].default_value = ROD_FORCE_PATTERN
    name.inputs["Find"].default_value = "#"
    b.link(text.outputs["String"], name.inputs["Replace"])
    force = b.math('ADD', slack.outputs["Output"], b.named(name.outputs["String"]))

    level = b.node("ShaderNodeClamp")
    level.inputs["Min"].default_value = -1.0
    b.link(b.math('DIVIDE', force, gin.outputs["Force Range"]), level.inputs["Value"])
    level = level.outputs["Result"]

    geometry = gin.outputs["Geometry"]
    geometry = b.store(geometry, STRAIN, strain, 'FLOAT', 'EDGE')
    geometry = b.store(geometry, FORCE, force, 'FLOAT', 'EDGE')
    geometry = b.store(geometry, LEVEL, level, 'FLOAT', 'EDGE')
    geometry = b.store(geometry, SHADE, b.named(LEVEL), 'FLOAT', 'POINT')  # edges → vertices: mean
    geometry = b.store(geometry, COLOR, b.ramp(b.named(SHADE)), 'FLOAT_COLOR', 'POINT')
    b.link(geometry, gout.inputs["Geometry"])
    return group


def display_group() -> bpy.types.NodeTree:
    """The display modifier's group: the material on the mesh, and edges without faces as
    tubes, split at every vertex so that each tube has its own edge's colour."""
    group = bpy.data.node_groups.get(DISPLAY_GROUP)
    if group is not None:
        return group
    group = _new_group(DISPLAY_GROUP, (("Tube Radius", "NodeSocketFloat", 0.01),
                                       ("Material", "NodeSocketMaterial", None)))
    b = _Builder(group)
    gin, gout = b.node("NodeGroupInput"), b.node("NodeGroupOutput")
    geometry = gin.outputs["Geometry"]
    join = b.node("GeometryNodeJoinGeometry")

    neighbours = b.node("GeometryNodeInputMeshEdgeNeighbors")
    loose = b.math('LESS_THAN', neighbours.outputs["Face Count"], 0.5)  # no face: 1
    tubes_of = b.node("GeometryNodeMeshToCurve")
    b.link(edges_apart(group, geometry, loose), tubes_of.inputs["Mesh"])
    b.link(loose, tubes_of.inputs["Selection"])
    profile = b.node("GeometryNodeCurvePrimitiveCircle")
    profile.inputs["Resolution"].default_value = 10
    b.link(gin.outputs["Tube Radius"], profile.inputs["Radius"])
    tubes = b.node("GeometryNodeCurveToMesh")
    b.link(tubes_of.outputs["Curve"], tubes.inputs["Curve"])
    b.link(profile.outputs["Curve"], tubes.inputs["Profile Curve"])
    # The tubes carry the edge attributes as point attributes; joined with the mesh they
    # would move its ms_force and ms_strain to the point domain: leave them out.
    tube_mesh = tubes.outputs["Mesh"]
    for name in (STRAIN, FORCE, LEVEL):
        remove = b.node("GeometryNodeRemoveAttribute")
        b.link(tube_mesh, remove.inputs["Geometry"])
        remove.inputs["Name"].default_value = name
        tube_mesh = remove.outputs["Geometry"]
    # The mesh first, so that its vertices and edges keep their indices.
    b.link_in_order(join.inputs["Geometry"], (geometry, tube_mesh))

    coloured = b.node("GeometryNodeSetMaterial")
    b.link(join.outputs["Geometry"], coloured.inputs["Geometry"])
    b.link(gin.outputs["Material"], coloured.inputs["Material"])
    b.link(coloured.outputs["Geometry"], gout.inputs["Geometry"])
    return group


def edges_apart(tree, geometry, selection=None):
    """Nodes in `tree` that split the (selected) edges of `geometry` apart and give each
    split vertex its edge's force shade and colour: tubes made from the result (Mesh to
    Curve, Curve to Mesh) show every edge in its own colour. Returns the geometry socket.
    Also used by the demo's edge visuals (scripts/scenes.py)."""
    b = _Builder(tree)
    split = b.node("GeometryNodeSplitEdges")
    b.link(geometry, split.inputs["Mesh"])
    if selection is not None:
        b.link(selection, split.inputs["Selection"])
    shaded = b.store(split.outputs["Mesh"], SHADE, b.named(LEVEL), 'FLOAT', 'POINT')
    return b.store(shaded, COLOR, b.ramp(b.named(SHADE)), 'FLOAT_COLOR', 'POINT')


def material() -> bpy.types.Material:
    """"Mass–Spring Forces": RAMP of ms_force_shade in Cycles and EEVEE; Workbench shows
    the same colours with its colour type set to Attribute (ms_force_color)."""
    mat = bpy.data.materials.get(MATERIAL)
    if mat is not None:
        return mat
    mat = bpy.data.materials.new(MATERIAL)
    mat.diffuse_color = (0.8, 0.8, 0.8, 1.0)
    if bpy.app.version < (5, 0, 0):
        mat.use_nodes = True  # always on (and deprecated) from 5.0
    b = _Builder(mat.node_tree)
    shade = b.node("ShaderNodeAttribute", attribute_type='GEOMETRY', attribute_name=SHADE)
    bsdf = mat.node_tree.nodes.get("Principled BSDF")
    b.link(b.ramp(shade.outputs["Fac"]), bsdf.inputs["Base Color"])
    bsdf.inputs["Roughness"].default_value = 0.5
    return mat
