"""The scene's Collision objects as the core's colliders (``simulation.ColliderFrames``).

A collider is what Blender users already mark: a mesh object with Physics ▸ Collision,
evaluated by the view layer (not disabled in viewports, not in an excluded collection).
Its surface is its evaluated mesh (modifiers, shape keys and armatures included) in world
space, triangulated; its thickness is Collision ▸ Thickness Outer and its friction
``obj.mass_spring_collision.friction``. A collider that nothing animates is read once;
any other is read at every frame of the bake.
"""

from __future__ import annotations

import numpy as np

from .errors import BakeError
from .simulation import ColliderFrames

# The farthest a collider's vertex may lie from the world's origin (the core's bound).
MAX_COORDINATE = 1e9


def is_collider(obj) -> bool:
    """A mesh with a Collision modifier that is on (in the viewport: bakes read what the
    viewport evaluates) and Collision's own switch on."""
    return (obj.type == 'MESH' and obj.collision is not None and obj.collision.use
            and any(m.type == 'COLLISION' and m.show_viewport for m in obj.modifiers))


def scene_colliders(scene, structures, depsgraph) -> list:
    """The Collision objects `structures` (an object, or objects baked together) meet:
    every collider the depsgraph evaluates but themselves (they meet themselves and each
    other by self-collision)."""
    evaluated = {getattr(item, "original", None) for item in depsgraph.ids}
    own = structures if isinstance(structures, (list, tuple)) else [structures]
    return sorted((obj for obj in scene.objects
                   if all(obj is not o for o in own) and obj in evaluated and is_collider(obj)),
                  key=lambda obj: obj.name)


def is_static(obj) -> bool:
    """Nothing can move or deform it during the bake: no animation, driver, parent,
    constraint, rigid body, shape keys or modifier besides Collision."""
    shape_keys = obj.data.shape_keys
    return (obj.animation_data is None and obj.parent is None and len(obj.constraints) == 0
            and obj.rigid_body is None
            and (shape_keys is None or shape_keys.animation_data is None)
            and obj.data.animation_data is None
            and all(m.type == 'COLLISION' for m in obj.modifiers))


def world_triangles(obj, depsgraph, canonical: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(V, 3) world positions of the evaluated mesh and (T, 3) its triangles, in
    canonical_triangles' order (canonical=False: in Blender's, for their count only)."""
    evaluated = obj.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        mesh.calc_loop_triangles()
        co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertices.foreach_get("co", co)
        tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        evaluated.to_mesh_clear()
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    world = co.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
    # The core refuses these too, but counts vertices over every collider at once
    # (test_addon_contact.py, test_a_collider_beyond_reach_is_named).
    bad = np.flatnonzero(~(np.abs(world) <= MAX_COORDINATE).all(axis=1))
    if len(bad):
        raise BakeError(f"Collision object '{obj.name}': vertex {bad[0]} is at "
                        f"{tuple(float(x) for x in world[bad[0]])} in the world, not a finite point "
                        f"within {MAX_COORDINATE:g} m: fix its mesh or transform, or turn its Collision off")
    tris = tris.reshape(-1, 3).astype(np.int64)
    return world, canonical_triangles(tris) if canonical else tris


def canonical_triangles(tris: np.ndarray) -> np.ndarray:
    """The triangles in one order whatever order they come in: each turned (keeping its
    orientation) to start at its smallest vertex, then sorted. Blender lists a mesh's loop
    triangles in an order that can change from one process to the next, and the order
    changes the core's sums by round-off, which a cloth draping over a ball turned into
    centimetres: the same scene baked differently twice
    (test_addon_contact.py, test_collider_triangles_come_in_one_order)."""
    if not len(tris):
        return tris
    first = np.argmin(tris, axis=1)
    turned = tris[np.arange(len(tris))[:, None], (first[:, None] + np.arange(3)) % 3]
    return turned[np.lexsort(turned.T[::-1])]


class ColliderReader:
    """Reads the colliders of one bake: the static ones once, the moving ones per frame
    (only their vertices are kept per frame: a big static ground costs its size once)."""

    def __init__(self, objects, depsgraph):
        static = [obj for obj in objects if is_static(obj)]
        self.moving_objects = [obj for obj in objects if not is_static(obj)]
        self.objects = static + self.moving_objects  # the order of the triangles
        self.names = sorted(obj.name for obj in self.objects)
        self.moving = bool(self.moving_objects)
        triangles, thickness, friction, offset = [], [], [], 0
        first = [world_triangles(obj, depsgraph) for obj in self.objects]
        for obj, (verts, tris) in zip(self.objects, first):
            triangles.append(tris + offset)
            offset += len(verts)
            thickness.append(np.full(len(tris), float(obj.collision.thickness_outer)))
            friction.append(np.full(len(tris), float(obj.mass_spring_collision.friction)))
        self._counts = [(len(verts), len(tris)) for verts, tris in first[len(static):]]
        # Collision acts on faces: edges and vertices alone are met by nothing.
        self.faceless = [obj.name for obj, (_, tris) in zip(self.objects, first) if len(tris) == 0]
        # How wide each is where it is narrowest across (the second smallest side of its
        # box, with its thickness on both sides; a floor's is its width, a bar's its own):
        # only vertices collide, so an edge longer than that can pass over it (bake.py,
        # narrow_collider_warnings).
        self.narrowest = {obj.name: float(np.sort(np.ptp(verts, axis=0))[1]) + 2 * float(obj.collision.thickness_outer)
                          for obj, (verts, tris) in zip(self.objects, first) if len(tris)}
        self.frames = ColliderFrames(
            triangles=np.concatenate(triangles) if triangles else np.zeros((0, 3), np.int64),
            thickness=np.concatenate(thickness) if thickness else np.zeros(0),
            friction=np.concatenate(friction) if friction else np.zeros(0),
            static_vertices=self._stack(first[:len(static)]),
            moving_vertices=[])

    @staticmethod
    def _stack(parts) -> np.ndarray:
        return np.concatenate([v for v, _ in parts]) if parts else np.zeros((0, 3))

    def sample(self, depsgraph, frame: int) -> None:
        """Moving colliders: read them at the current frame (the scene was set to it)."""
        if not self.moving:
            return
        # Their triangles were read at the start: only the vertices are kept, the
        # triangles counted (a sort of every triangle at every frame saved).
        parts = [world_triangles(obj, depsgraph, canonical=False) for obj in self.moving_objects]
        for obj, (count, tri_count), (verts, tris) in zip(self.moving_objects, self._counts, parts):
            if len(verts) != count or len(tris) != tri_count:
                raise BakeError(
                    f"collider '{obj.name}' changes its number of vertices or faces at frame "
                    f"{frame}: a collider may move and deform, not change its topology")
        self.frames.moving_vertices.append(self._stack(parts))
