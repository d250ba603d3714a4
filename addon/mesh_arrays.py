"""Blender mesh → numpy arrays (``simulation.MeshArrays``).

Reads the base mesh (never the evaluated one: modifiers come after the bake in the stack),
in bulk with ``foreach_get``. Vertex groups are the one thing the Python API only offers
per vertex.
"""

from __future__ import annotations

import numpy as np

from .errors import BakeError
from .properties import bending_model
from .simulation import MeshArrays, import_core

RIGID_ATTRIBUTE = "ms_rigid"
ROPE_ATTRIBUTE = "ms_rope"
PIN_THRESHOLD = 0.5  # pin-group weight above this pins a vertex


def vertex_positions(mesh) -> np.ndarray:
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64)


def edge_vertices(mesh) -> np.ndarray:
    pairs = np.empty(len(mesh.edges) * 2, dtype=np.int32)
    mesh.edges.foreach_get("vertices", pairs)
    return pairs.reshape(-1, 2).astype(np.int64)


def _polygon_corners(mesh):
    """(corner vertex indices, each face's first corner, each face's corner count)."""
    sizes = np.empty(len(mesh.polygons), dtype=np.int32)
    starts = np.empty(len(mesh.polygons), dtype=np.int32)
    mesh.polygons.foreach_get("loop_total", sizes)
    mesh.polygons.foreach_get("loop_start", starts)
    corners = np.empty(len(mesh.loops), dtype=np.int32)
    mesh.loops.foreach_get("vertex_index", corners)
    return corners.astype(np.int64), starts, sizes


def quad_faces(mesh) -> np.ndarray:
    """(Q, 4) vertex indices of the mesh's faces that have four corners."""
    corners, starts, sizes = _polygon_corners(mesh)
    return corners[starts[sizes == 4][:, None] + np.arange(4)].reshape(-1, 4)


def faces(mesh) -> list:
    """Every face of the mesh as an array of its vertex indices."""
    corners, starts, sizes = _polygon_corners(mesh)
    return np.split(corners, starts[1:]) if len(starts) else []


def vertex_group_weights(obj, name: str, purpose: str) -> np.ndarray:
    """Weights of vertex group `name` per vertex (0 where a vertex is not in it)."""
    group = obj.vertex_groups.get(name)
    if group is None:
        known = ", ".join(f"'{g.name}'" for g in obj.vertex_groups) or "none"
        raise BakeError(
            f"the {purpose} vertex group '{name}' does not exist on '{obj.name}' "
            f"(its groups: {known}): pick an existing group in the panel or clear the field")
    index = group.index
    weights = np.zeros(len(obj.data.vertices), dtype=np.float64)
    for vertex in obj.data.vertices:
        for element in vertex.groups:
            if element.group == index:
                weights[vertex.index] = element.weight
                break
    return weights


def edge_bool_attribute(mesh, name: str) -> np.ndarray:
    """A boolean edge attribute as a mask; all False when the mesh doesn't have it."""
    mask = np.zeros(len(mesh.edges), dtype=bool)
    attribute = mesh.attributes.get(name)
    if attribute is None:
        return mask
    if attribute.domain != 'EDGE' or attribute.data_type != 'BOOLEAN':
        raise BakeError(
            f"attribute '{name}' must be a Boolean on edges (it is {attribute.data_type} on "
            f"{attribute.domain}): remove it, then mark the edges again")
    attribute.data.foreach_get("value", mask)
    return mask


def edge_float_attribute(mesh, name: str) -> np.ndarray:
    attribute = mesh.attributes.get(name)
    if attribute is None:
        known = ", ".join(f"'{a.name}'" for a in mesh.attributes
                          if a.domain == 'EDGE' and a.data_type == 'FLOAT') or "none"
        raise BakeError(
            f"the stiffness attribute '{name}' does not exist on mesh '{mesh.name}' "
            f"(float edge attributes: {known}): pick one in the panel or clear the field")
    if attribute.domain != 'EDGE' or attribute.data_type != 'FLOAT':
        raise BakeError(
            f"the stiffness attribute '{name}' must be a Float on edges "
            f"(it is {attribute.data_type} on {attribute.domain})")
    values = np.empty(len(mesh.edges), dtype=np.float32)
    attribute.data.foreach_get("value", values)
    return values.astype(np.float64)


def masses_from_weights(total_mass: float, weights: np.ndarray | None, count: int) -> np.ndarray:
    """Spread `total_mass` over the vertices, evenly or in proportion to `weights`."""
    if not total_mass > 0:
        raise BakeError(f"the total mass must be > 0 kg, got {total_mass:g}")
    if weights is None:
        return np.full(count, total_mass / count)
    total_weight = float(weights.sum())
    if not total_weight > 0:
        raise BakeError("every vertex has weight 0 in the mass group: give the group some weight")
    return total_mass * weights / total_weight


def mesh_to_arrays(obj, settings=None) -> MeshArrays:
    """Read the object's base mesh and its ``obj.mass_spring`` settings into arrays the
    simulation can use (see ``validate``).

    `obj` is a mesh object in Object Mode (``bake.check_object`` refuses anything else
    first). Raises BakeError (missing groups or attributes, bad values).
    """
    settings = obj.mass_spring if settings is None else settings
    mesh = obj.data

    positions = vertex_positions(mesh)
    edges = edge_vertices(mesh)
    n = len(positions)

    mass_weights = None
    if settings.mass_group:
        mass_weights = vertex_group_weights(obj, settings.mass_group, "mass")
    masses = masses_from_weights(settings.total_mass, mass_weights, max(n, 1))[:n]

    pinned = np.zeros(n, dtype=bool)
    if settings.pin_group:
        pinned = vertex_group_weights(obj, settings.pin_group, "pin") > PIN_THRESHOLD

    linear = bending_model(settings) == 'LINEAR'
    bends = (settings.bending_stiffness if linear else settings.bending_rigidity) > 0

    def weight_map(name: str, purpose: str, used: bool = True):
        """The group's weights; None without a group, or when what it scales is 0 (then
        the group does nothing, and need not exist)."""
        if not name or not used:
            return None
        weights = vertex_group_weights(obj, name, purpose)
        if not weights.any():  # an empty group: surely not "no stiffness at all"
            raise BakeError(
                f"every vertex has weight 0 in the {purpose} vertex group '{name}', which scales "
                f"the {purpose} of each edge by its vertices' weights: there would be no {purpose} "
                "at all. Give the group weights (Weight Paint, or Assign in Edit Mode), or clear "
                "the field to use the same value everywhere")
        return weights

    if settings.stiffness_attribute:
        scale = edge_float_attribute(mesh, settings.stiffness_attribute)
    else:
        scale = np.ones(len(edges))

    arrays = MeshArrays(
        local_positions=positions,
        masses=masses,
        pinned=pinned,
        edges=edges,
        stiffness_scale=scale,
        shear_pairs=(import_core().quad_diagonals(quad_faces(mesh))
                     if settings.shear_stiffness > 0
                     else np.zeros((0, 2), np.int64)),
        bending_pairs=(import_core().bending_pairs(faces(mesh))
                       if linear and settings.bending_stiffness > 0
                       else np.zeros((0, 2), np.int64)),
        **angular_bending(mesh, edges, settings.bending_rigidity if not linear else 0.0),
        rigid=edge_bool_attribute(mesh, RIGID_ATTRIBUTE),
        rope=edge_bool_attribute(mesh, ROPE_ATTRIBUTE),
        stiffness_weights=weight_map(settings.stiffness_group, "stiffness"),
        bending_weights=weight_map(settings.bending_group, "bending", bends),
        damping_weights=weight_map(settings.damping_group, "damping", settings.damping > 0),
        faces=faces(mesh) if settings.self_collision else [],
        pin_group=settings.pin_group,
        mass_group=settings.mass_group,
    )
    validate(arrays)
    return arrays


def angular_bending(mesh, edges: np.ndarray, rigidity: float) -> dict:
    """The hinges (with their weights) and wire joints of the angular model, when its
    rigidity is positive: MeshArrays' fields."""
    if not rigidity > 0:
        return {}
    core = import_core()
    polygons = faces(mesh)
    hinges, weights = core.hinges_of_faces(polygons)
    return dict(hinges=hinges, hinge_weights=weights, wire_joints=core.wire_joints(edges, polygons))


def validate(arrays: MeshArrays) -> None:
    """Raise BakeError for a mesh the simulation can't use, with the cure in the message.

    The Blender side's only check of the arrays. ``mass_spring.from_arrays`` checks what
    the core needs (finite positions, positive masses of free vertices, stiffness >= 0,
    rods of positive length); this checks what it doesn't, and repeats a check only where
    our message names the vertex group, attribute or edge to fix, or where a check here
    depends on it. Run on object-space positions, before the animation is sampled, so a
    bake is refused at once.
    """
    n = arrays.vertex_count
    if n == 0:
        raise BakeError("the mesh has no vertices")
    if len(arrays.edges) == 0:
        raise BakeError(
            "the mesh has no edges. Every edge becomes a spring, so there is nothing "
            "to connect the masses: add edges or faces")
    if arrays.pinned.all():
        group = f" (vertex group '{arrays.pin_group}')" if arrays.pin_group else ""
        raise BakeError(
            f"every vertex is pinned{group}, so nothing can move: "
            "remove some vertices from the pin group or lower their weight to 0.5 or less")
    both = np.flatnonzero(arrays.rigid & arrays.rope)
    if len(both):
        raise BakeError(
            f"{len(both)} edge(s) are marked both rigid and rope (first: edge {both[0]}): "
            "clear one of the two marks in Edit Mode")
    # The core would name a spring of its own numbering, not the edge and the attribute.
    # Inf too: "stiffness must be >= 0, got inf" (found by an adversarial tester).
    negative = np.flatnonzero(~((arrays.stiffness_scale >= 0) & np.isfinite(arrays.stiffness_scale)))
    if len(negative):
        raise BakeError(
            f"the stiffness attribute is negative, infinite or not a number on {len(negative)} "
            f"edge(s) (first: edge {negative[0]}): stiffness scales must be finite numbers >= 0")
    # The core would say "mass must be positive"; this says which group setting causes it
    # (test_refuses_free_vertex_without_mass).
    bad_mass = np.flatnonzero(~arrays.pinned & ~(arrays.masses > 0))
    if len(bad_mass):
        i = bad_mass[0]
        why = (f"its weight in mass group '{arrays.mass_group}' is 0"
               if arrays.mass_group else "the total mass is not positive")
        raise BakeError(
            f"{len(bad_mass)} free vertex(es) get no positive mass (first: vertex {i}, "
            f"mass {arrays.masses[i]:g}) because {why}: every vertex that is not pinned "
            "needs a mass > 0")
    # The core refuses these too, but after the animation is sampled and without a cure;
    # the zero-length test below needs finite positions (test_refuses_non_finite_position).
    positions = arrays.local_positions
    infinite = np.flatnonzero(~np.isfinite(positions).all(axis=1))
    if len(infinite):
        raise BakeError(
            f"{len(infinite)} vertex position(s) are not finite numbers (first: vertex "
            f"{infinite[0]}, NaN or Inf): delete those vertices or give them real coordinates")
    # The core accepts springs of zero length, but they have no direction to pull in
    # (test_refuses_zero_length_edge). Zero is relative to the mesh's median edge, so a
    # mesh modelled at a nanometre's size is no zero (test_addon_scale.py,
    # test_a_mesh_modelled_tiny_bakes_the_motion_of_a_big_one), nor is every edge of a mesh
    # with one vertex astray 1e9 m away (relative to the extent it was:
    # test_a_vertex_far_astray_is_no_zero_length_edge).
    lengths = np.linalg.norm(positions[arrays.edges[:, 1]] - positions[arrays.edges[:, 0]], axis=1)
    tiny = import_core().median(lengths) * 1e-9  # not np.median: it imports numpy.ma (test_headless.py)
    zero = np.flatnonzero(lengths <= tiny)
    if len(zero):
        e = zero[0]
        a, b = arrays.edges[e]
        raise BakeError(
            f"{len(zero)} edge(s) have zero length (first: edge {e} between vertices {a} "
            f"and {b}), so a spring on them has no direction: merge the doubled vertices "
            "(Mesh ▸ Clean Up ▸ Merge by Distance)")
