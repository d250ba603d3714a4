"""Arrays → core system → positions per frame.

Nothing here touches Blender: the inputs are numpy arrays (from ``mesh_arrays``) and the
object's world matrix at every frame, the output is an (F, N, 3) float32 array of vertex
positions in the object space of each frame, ready for the writers. That keeps the
physics side testable with plain Python.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import BakeError

# Panel enum (the core's integrator names in capitals) → name for ``mss.set_integrator``.
try:
    from mass_spring import INTEGRATOR_INFO as _CORE_INTEGRATORS
except ImportError:  # import_core() says how to install the core
    _CORE_INTEGRATORS = ()
INTEGRATORS = {info.name.upper(): info.name for info in _CORE_INTEGRATORS}
EXPLICIT_INTEGRATORS = {info.name.upper() for info in _CORE_INTEGRATORS if info.explicit}

# A vertex this many times the structure's size (its bounding box diagonal at the start)
# beyond the reach of what moves it (its pins, colliders, and a throw at the fastest start
# speed under gravity) means the run blew up even if it is still finite. Relative to the
# start and the size, so a tiny or a far object is judged as a 1 m one at the origin
# (tests/test_addon_scale.py, test_a_tiny_object_falls_freely_without_being_called_diverged,
# test_a_tiny_diverging_object_is_still_caught).
DIVERGED_SIZES = 1.0e6
# Columns of the object's 3×3 matrix closer to linearly dependent than this (|det| over
# the product of their lengths, 1 for orthogonal ones) squash the object flat: the
# matrices are float32 (6e-8 relative), so below this they are flat up to round-off. A
# ratio, so any uniform scale passes (test_a_transform_is_flat_at_any_overall_scale).
FLAT_TRANSFORM = 1.0e-6


def import_core():
    """The compiled core, or a BakeError that says how to get it."""
    try:
        import mass_spring
    except ImportError as ex:
        raise BakeError(
            "The physics core 'mass_spring' is not installed for this Blender's Python "
            f"({ex}). Install the add-on from the zip built by scripts/build_extension.py, "
            "which carries the core as wheels for Python 3.11 and 3.13") from ex
    return mass_spring


@dataclass
class MeshArrays:
    """One object's mesh as the simulation sees it (object space, base mesh)."""

    local_positions: np.ndarray  # (N, 3) float64, object space
    masses: np.ndarray  # (N,) float64, kg
    pinned: np.ndarray  # (N,) bool
    edges: np.ndarray  # (E, 2) int64 vertex indices
    stiffness_scale: np.ndarray  # (E,) float64, multiplies the panel's stiffness
    rigid: np.ndarray  # (E,) bool: distance constraint instead of a spring
    rope: np.ndarray  # (E,) bool: tension-only link
    # (S, 2) vertex pairs of shear springs (the diagonals of quad faces), if asked for.
    shear_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    # (B, 2) vertex pairs of bending springs (across edges shared by two faces), if asked for.
    bending_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    # Angular bending, if asked for: (H, 4) hinges with (H,) weights (hinges_of_faces) and
    # (J, 3) wire joints (wire_joints).
    hinges: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))
    hinge_weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    wire_joints: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    # Weight maps (vertex groups) of the stiffness, bending and damping: (N,) or None.
    stiffness_weights: np.ndarray | None = None
    bending_weights: np.ndarray | None = None
    damping_weights: np.ndarray | None = None
    # The faces as vertex index arrays (self-collision's triangles), if asked for.
    faces: list = field(default_factory=list)
    # Words used in messages, e.g. the pin group's name.
    pin_group: str = ""
    mass_group: str = ""

    @property
    def vertex_count(self) -> int:
        return len(self.local_positions)


@dataclass
class SimulationSettings:
    """Everything the core needs besides the mesh, in SI units and world space."""

    stiffness: float = 100.0
    shear_stiffness: float = 0.0  # of the springs on shear_pairs
    bending_stiffness: float = 0.0  # of the springs on bending_pairs
    bending_rigidity: float = 0.0  # D (N m) of the hinges, EI (N m^2) of the wire joints
    damping: float = 0.0
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    integrator: str = "GENERALIZED_ALPHA"
    rho_inf: float = 0.5  # the add-on's default (properties.py says why)
    substeps: int = 5  # the fewest steps per frame (with accuracy > 0) or exactly these
    accuracy: float = 0.01  # the core's tolerance; 0: fixed steps
    fps: float = 24.0
    initial_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    initial_angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    # Self-collision: off, or on with this distance (m, world space; 0: automatic,
    # self_collision_distance) and friction.
    self_collision: bool = False
    self_collision_distance: float = 0.0
    self_friction: float = 0.3


@dataclass
class ColliderFrames:
    """The colliders of a bake in world space (colliders.py reads them from the scene):
    their triangles with thickness (m) and friction per triangle; the vertices of the
    colliders that do not move once, and those of the moving ones (numbered after them) at
    every frame of the range."""

    triangles: np.ndarray  # (T, 3) int64
    thickness: np.ndarray  # (T,)
    friction: np.ndarray  # (T,)
    static_vertices: np.ndarray  # (S, 3) float64
    moving_vertices: list  # of (M, 3) float64, one per frame; empty: nothing moves

    @property
    def moving(self) -> bool:
        return len(self.moving_vertices) > 0

    def vertices(self, k: int) -> np.ndarray:
        """All collider vertices at frame k of the range."""
        if not self.moving:
            return self.static_vertices
        return np.concatenate([self.static_vertices, self.moving_vertices[k]])

    def apply(self, mss, k: int, origin=(0.0, 0.0, 0.0)) -> None:
        """Put the colliders where they are at frame k of the range, in world space moved
        by -origin (the core moves them there linearly during the next simulate() call)."""
        if len(self.triangles):
            mss.set_colliders(self.vertices(k) - np.asarray(origin, dtype=np.float64),
                              self.triangles, self.thickness, self.friction)


def transform_points(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a 4×4 affine matrix to (N, 3) points."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def flat_transforms(matrices) -> np.ndarray:
    """(F,) bool: which of the (F, 4, 4) matrices squash space flat (a scale of 0 on some
    axis, or axes sheared onto each other), at any overall scale (FLAT_TRANSFORM)."""
    linear = np.asarray(matrices, dtype=np.float64)[:, :3, :3]
    columns = np.prod(np.linalg.norm(linear, axis=1), axis=1)
    return ~(np.abs(np.linalg.det(linear)) > FLAT_TRANSFORM * columns)


def bounding_box(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The centre and the diagonal of the bounding box of (N, 3) points; 1 m as the
    diagonal of a single point, which has no size to compare with."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    diagonal = float(np.linalg.norm(hi - lo))
    return 0.5 * (lo + hi), diagonal if diagonal > 0 else 1.0


def inverse_matrices(matrices) -> np.ndarray:
    """(F, 4, 4) world matrices → their inverses (world → object space of each frame)."""
    matrices = np.asarray(matrices, dtype=np.float64)
    try:
        return np.linalg.inv(matrices)
    except np.linalg.LinAlgError as ex:
        raise BakeError("the object's transform is not invertible at some frame (a scale of 0?)") from ex


def world_to_local(world: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """(F, N, 3) world positions → object space of each frame's matrix, as float32.

    Shape keys and PC2 samples live in object space; an animated object moves them back
    to where the simulation put them.
    """
    inverses = inverse_matrices(matrices)
    local = np.empty(np.shape(world), dtype=np.float32)
    for k in range(len(local)):
        local[k] = transform_points(inverses[k], world[k])
    return local


def rigid_velocities(points: np.ndarray, origin, linear, angular) -> np.ndarray:
    """Velocity of every point of a body moving with `linear` and spinning with `angular` about `origin`."""
    linear = np.asarray(linear, dtype=np.float64)
    angular = np.asarray(angular, dtype=np.float64)
    return linear + np.cross(angular, points - np.asarray(origin, dtype=np.float64))


def build_system(arrays: MeshArrays, settings: SimulationSettings, matrix_world, together=()):
    """The core system at the first frame: the mesh as a ``mass_spring.Structure`` in world
    space, turned into springs, rods and ropes by ``mass_spring.build_system``. Returns the
    system and the structure (which edges became springs and rods, in the core's order).

    `together`: (arrays, settings, matrix_world) of other objects simulated in the same
    system, their vertices numbered after this one's (``mass_spring.build_system`` of a
    list); the solver takes solver_settings of them all. The structures are returned as a
    list then, this object's first."""
    core = import_core()
    parts = [(arrays, settings, matrix_world), *together]
    solver = solver_settings([part[1] for part in parts])
    distances = self_collision_distances([(a, s, transform_points(m, a.local_positions)) for a, s, m in parts])
    structures = [structure_of(*part, distance) for part, distance in zip(parts, distances)]
    rods = sum(int(structure.rod_edges().sum()) for structure in structures)
    if solver.integrator in EXPLICIT_INTEGRATORS and rods:
        raise BakeError(
            f"{rods} edge(s) are marked rigid, and the explicit integrator "
            f"'{solver.integrator.replace('_', ' ').title()}' cannot keep rods rigid: "
            "choose Generalized-α, Newmark or Implicit Euler, or clear the rigid marks")
    try:
        mss = core.build_system(structures if together else structures[0],
                                gravity=np.asarray(solver.gravity, dtype=np.float64), locality_order="auto")
        mss.set_integrator(INTEGRATORS[solver.integrator], rho_inf=solver.rho_inf)
        mss.tolerance = solver.accuracy
    except ValueError as ex:
        raise BakeError(f"the core refused the system: {ex}") from ex
    return mss, (structures if together else structures[0])


def solver_settings(settings: list) -> SimulationSettings:
    """What the solver of objects simulated together follows: the first's integrator,
    ρ∞, gravity and frame rate, the most substeps and the finest accuracy of them all (0,
    fixed steps, if any asks for it)."""
    first = settings[0]
    for s in settings:
        if s.integrator not in INTEGRATORS:
            raise BakeError(f"unknown integrator '{s.integrator}'")
        if s.substeps < 1:
            raise BakeError(f"substeps must be at least 1, got {s.substeps}")
    if not first.fps > 0:
        raise BakeError(f"the scene's frame rate must be positive, got {first.fps}")
    accuracy = min(s.accuracy for s in settings)
    return replace(first, substeps=max(s.substeps for s in settings), accuracy=accuracy)


def structure_of(arrays: MeshArrays, settings: SimulationSettings, matrix_world, self_distance: float):
    """One object's mesh as a ``mass_spring.Structure`` in world space at `matrix_world`,
    keeping `self_distance` (m, 0: no self-collision; self_collision_distances)."""
    core = import_core()
    positions = transform_points(matrix_world, arrays.local_positions)
    origin = np.asarray(matrix_world, dtype=np.float64)[:3, 3]
    velocities = rigid_velocities(positions, origin, settings.initial_velocity,
                                  settings.initial_angular_velocity)
    try:
        structure = core.Structure(
            positions=positions,
            edges=arrays.edges,
            pinned=arrays.pinned,
            rigid=arrays.rigid,
            rope=arrays.rope,
            masses=np.asarray(arrays.masses, dtype=np.float64),
            stiffness=settings.stiffness,
            stiffness_scale=arrays.stiffness_scale,
            damping=settings.damping,
            shear_pairs=arrays.shear_pairs,
            shear_stiffness=settings.shear_stiffness,
            bending_pairs=arrays.bending_pairs,
            bending_stiffness=settings.bending_stiffness,
            hinges=arrays.hinges,
            hinge_weights=arrays.hinge_weights,
            hinge_rigidity=settings.bending_rigidity,
            wire_joints=arrays.wire_joints,
            wire_rigidity=settings.bending_rigidity,
            velocities=velocities,
            stiffness_weights=arrays.stiffness_weights,
            bending_weights=arrays.bending_weights,
            damping_weights=arrays.damping_weights,
            faces=arrays.faces,
            self_collision_distance=self_distance,
            self_friction=settings.self_friction,
        )
    except ValueError as ex:
        raise BakeError(f"the core refused the system: {ex}") from ex
    return structure


# The automatic self-collision distance: this share of the median edge length, and at most
# this share of the distance of the closest parts of the mesh as modelled that share no
# vertex (the core refuses more than that distance: the mesh could not rest).
AUTO_DISTANCE_OF_EDGE = 0.25
AUTO_DISTANCE_OF_CLOSEST = 0.5


def median_edge_length(positions: np.ndarray, arrays: MeshArrays) -> float:
    """The median length of the mesh's edges at `positions` (world metres)."""
    return import_core().median(np.linalg.norm(positions[arrays.edges[:, 1]] - positions[arrays.edges[:, 0]], axis=1))


def self_collision_distance(positions: np.ndarray, arrays: MeshArrays, settings: SimulationSettings) -> float:
    """The self-collision distance of a bake in world metres: 0 when it is off, the
    setting when it is set, else automatic (AUTO_DISTANCE_OF_EDGE,
    AUTO_DISTANCE_OF_CLOSEST)."""
    if not settings.self_collision:
        return 0.0
    if settings.self_collision_distance > 0:
        return float(settings.self_collision_distance)
    median = median_edge_length(positions, arrays)
    distance = AUTO_DISTANCE_OF_EDGE * median
    core = import_core()
    closest, where = core.closest_parts(positions, core.triangles_of_faces(arrays.faces), arrays.edges,
                                        distance / AUTO_DISTANCE_OF_CLOSEST)
    distance = min(distance, AUTO_DISTANCE_OF_CLOSEST * closest)
    if not distance > 0:
        raise BakeError("self-collision: parts of the mesh that share no vertex touch as modelled (or an "
                        "edge has length 0), so no distance can keep them apart: separate them, or turn "
                        "Self Collision off")
    # The core refuses a distance this far below the edges (the steps would shrink with it):
    # parts this close as modelled are nearly touching (test_parts_nearly_touching_are_named).
    if distance < core.SELF_LEAST_DISTANCE_OF_EDGE * median:
        raise BakeError(f"self-collision: {where} share no vertex but are only {closest:.3g} m apart as "
                        f"modelled, less than a five-hundredth of the median edge ({median:.3g} m): an "
                        "automatic distance that small would stall the bake. Separate them, or turn Self "
                        "Collision off")
    return distance


def self_collision_distances(parts: list) -> list:
    """The self-collision distance of each of objects simulated together, (arrays, settings,
    world positions) each: self_collision_distance of each alone, and an automatic one also
    at most AUTO_DISTANCE_OF_CLOSEST of its closest approach to the others that collide (a
    pair between two objects keeps the larger of their distances, and the core refuses a
    distance the objects as modelled do not leave between them;
    test_layered_objects_bake_together_with_automatic_distances)."""
    distances = [self_collision_distance(x, arrays, settings) for arrays, settings, x in parts]
    colliding = [i for i, d in enumerate(distances) if d > 0]
    if len(colliding) < 2:
        return distances
    core = import_core()
    x = np.concatenate([parts[i][2] for i in colliding])
    starts = np.cumsum([0] + [len(parts[i][2]) for i in colliding])
    triangles = np.concatenate([core.triangles_of_faces(parts[i][0].faces).reshape(-1, 3) + start
                                for i, start in zip(colliding, starts)])
    edges = np.concatenate([parts[i][0].edges.reshape(-1, 2) + start for i, start in zip(colliding, starts)])
    for k, i in enumerate(colliding):
        if parts[i][1].self_collision_distance > 0:
            continue  # the user's: the core refuses it if the objects do not leave it
        labels = np.zeros(len(x), dtype=np.int64)
        labels[starts[k]:starts[k + 1]] = 1
        closest, _ = core.closest_parts(x, triangles, edges, distances[i] / AUTO_DISTANCE_OF_CLOSEST, labels)
        distances[i] = min(distances[i], AUTO_DISTANCE_OF_CLOSEST * closest)
        median = median_edge_length(parts[i][2], parts[i][0])
        if not distances[i] >= core.SELF_LEAST_DISTANCE_OF_EDGE * median:  # (as self_collision_distance)
            raise BakeError(f"self-collision: objects baked together are only {closest:.3g} m apart as modelled, "
                            "so no distance can keep them apart without stalling the bake: separate them, or "
                            "turn Self Collision off for one of them")
    return distances


# Vertex numbers in the core's messages: "vertex 7", "edge 3-4", "triangle 1-2-5",
# "vertices 3, 4 and 9" (not a collider's own, nor an edge or triangle by its number).
_VERTEX_MENTION = re.compile(
    r"(?<!collider )\b(?:(vertex|vertices) (\d+(?:(?:, | and )\d+)*)|(edge|triangle) (\d+(?:-\d+)+))\b")


def name_parts(message: str, parts: list) -> str:
    """A core message about objects simulated together with each vertex number as its
    object's own: "vertex 7 of 'Net'"; parts: (name, vertex count) of each, in the core's
    order. A mention with a number beyond them all is left as it is
    (test_group_errors_name_the_object_and_its_vertex)."""
    starts = np.cumsum([0] + [count for _, count in parts])

    def local(number: int) -> tuple:
        k = int(np.searchsorted(starts, number, side="right")) - 1
        return parts[k][0], number - int(starts[k])

    def rename(match) -> str:
        noun = match.group(1) or match.group(3)
        text = match.group(2) or match.group(4)
        numbers = [int(n) for n in re.findall(r"\d+", text)]
        if max(numbers) >= starts[-1]:
            return match.group(0)
        named = [local(n) for n in numbers]
        if noun == "vertices":
            each = iter(named)
            return "vertices " + re.sub(r"\d+", lambda _: "{1} of '{0}'".format(*next(each)), text)
        return f"{noun} " + "-".join(str(n) for _, n in named) + f" of '{named[0][0]}'"

    return _VERTEX_MENTION.sub(rename, message)


@dataclass(frozen=True)
class FrameReport:
    """What simulating one frame took: a row of the bake report (scripts/bake.py --report)."""

    frame: int
    substeps: int  # integrator steps taken
    newton_iterations: int
    linear_iterations: int  # Krylov iterations of Newton's linear solves
    energy: float  # J, kinetic + potential at the frame's end (gravity's from the start centre)
    max_constraint_error: float  # m, the worst rod length error at the frame's end
    ms: float  # wall-clock milliseconds

    COLUMNS = ("frame", "substeps", "newton_iterations", "linear_iterations", "energy",
               "max_constraint_error", "ms")

    @classmethod
    def of(cls, frame: int, mss, before: dict, seconds: float) -> "FrameReport":
        after = mss.stats
        return cls(frame=frame, substeps=after["steps"] - before["steps"],
                   newton_iterations=after["newton_iterations"] - before["newton_iterations"],
                   linear_iterations=after["krylov_iterations"] - before["krylov_iterations"],
                   energy=mss.energy(), max_constraint_error=mss.max_constraint_violation(),
                   ms=1e3 * seconds)


@dataclass
class Part:
    """An object simulated together with others (FrameSimulation's `together`): its mesh,
    its settings and its (F, 4, 4) world matrix at every frame of the range."""

    arrays: MeshArrays
    settings: SimulationSettings
    matrices: np.ndarray


# A mass whose colliders push it with more than this many times its weight at the start
# lies deeper than about 1 % of their thickness (the penalty's stiffness is at least its
# weight times 2 000 over the thickness: native/contact/contact.hpp), and the penalty
# throws it out: a sheet modelled 5 mm above a floor 2 cm thick jumps 1.8 m
# (tests/test_addon_contact.py, test_vertices_modelled_inside_a_colliders_thickness_are_named).
PRESSED_WEIGHTS = 20.0


def pressed_into_colliders(mss, vertex_masses: np.ndarray, gravity) -> np.ndarray:
    """(N,) bool over the vertices: which start pressed into a collider's thickness
    (PRESSED_WEIGHTS). Under no gravity, weighed as under the Earth's."""
    pressed = np.zeros(len(vertex_masses), dtype=bool)
    if not mss.num_collider_triangles:
        return pressed
    forces = np.linalg.norm(mss.contact_forces(), axis=1)
    masses = np.asarray(mss.mass_vertices, dtype=np.int64)
    g = float(np.linalg.norm(gravity)) or 9.81
    pressed[masses] = forces > PRESSED_WEIGHTS * vertex_masses[masses] * g
    return pressed


class PartFrames:
    """One object's share of a simulation of several: what its bake writes, as
    FrameSimulation has it for the first object (local_positions, rod_forces, structure,
    world_start, matrices; the report is the whole simulation's)."""

    def __init__(self, simulation: "FrameSimulation", part: Part, structure, vertices: slice, rods: slice):
        self.simulation = simulation
        self.arrays, self.settings = part.arrays, part.settings
        self.matrices = np.asarray(part.matrices, dtype=np.float64)
        self.structure = structure
        self.vertices, self.rods = vertices, rods
        core_matrices = self.matrices.copy()
        core_matrices[:, :3, 3] -= simulation.origin
        self.core_matrices = core_matrices
        self.inverses = inverse_matrices(core_matrices)
        frame_count = len(simulation.frames)
        self.local_positions = np.empty((frame_count, part.arrays.vertex_count, 3), dtype=np.float32)
        self.rod_forces = np.empty((frame_count, rods.stop - rods.start), dtype=np.float32)
        self.world_start = None  # set by the simulation once built
        self.pressed = 0  # vertices that start pressed into a collider (pressed_into_colliders)
        self.moved_out = 0  # vertices modelled within a collider's thickness, moved out of it

    @property
    def done(self) -> bool:
        return self.simulation.done

    @property
    def frames_done(self) -> int:
        return self.simulation.frames_done

    @property
    def report(self) -> list:
        return self.simulation.report

    @property
    def moved_by(self) -> float:
        return self.simulation.moved_by

    def store(self, k: int, core: np.ndarray, rod_forces: np.ndarray) -> None:
        """Keep frame k from the core's positions and rod forces (of the whole system)."""
        self.local_positions[k] = transform_points(self.inverses[k], core[self.vertices])
        if self.rod_forces.shape[1]:
            self.rod_forces[k] = rod_forces[self.rods]


def part_has_unbraced_hinges(arrays: MeshArrays, settings: SimulationSettings) -> bool:
    """Whether a hinge of angular bending has a triangle with a side that is no spring (a
    quad's diagonal: quads are cut into triangles) while no shear springs brace the quads:
    such a triangle can shear flat, where the hinge's angle has no direction, and a stiff
    sheet fails there (test_bending.py, test_a_stiff_shear_free_sheet_names_shear_stiffness)."""
    if not len(arrays.hinges) or settings.bending_rigidity <= 0 or len(arrays.shear_pairs):
        return False
    springs = {tuple(sorted(edge)) for edge in arrays.edges.tolist()}
    return any(tuple(sorted((a, b))) not in springs
               for x0, x1, x2, x3 in arrays.hinges.tolist()
               for a, b in ((x0, x2), (x1, x2), (x0, x3), (x1, x3)))


class FrameSimulation:
    """Runs the core one frame at a time, so a UI can show progress between frames (and
    stop within one: step's stop).

    ``matrices[k]`` is the object's world matrix at frame k of the range; pinned vertices
    are moved to follow it (the core interpolates them linearly within the frame).
    ``local_positions[k]`` holds every vertex at frame k in the object space of
    ``matrices[k]``, as float32: the (F, N, 3) buffer the writers store as it is. Each
    frame is converted when the core produces it, so the world positions of all frames
    (float64, twice the size) are never held. ``rod_forces[k]`` holds every rod's tension
    (N, + pulls) at frame k, in the core's order of the rods (``structure.rod_edges()``).
    The core (``mss``) works in world space moved by -``origin``, the centre of the
    structures' start; ``world_positions()`` and ``world_start`` are in world space.

    `together`: Parts simulated in the same system (they collide with this object and
    each other when their self-collision is on); ``parts[i]`` (PartFrames) holds each
    object's frames, ``parts[0]`` this object's (the attributes above are its).
    """

    def __init__(self, arrays: MeshArrays, settings: SimulationSettings, matrices, frames,
                 colliders: ColliderFrames | None = None, together=()):
        self.arrays = arrays
        self.colliders = colliders
        self.settings = settings
        self.matrices = np.asarray(matrices, dtype=np.float64)
        self.frames = np.asarray(frames, dtype=np.int64)
        self.together = tuple(together)
        if len(self.frames) < 2:
            raise BakeError("the frame range needs at least two frames (end after start)")
        parts = [Part(arrays, settings, self.matrices), *self.together]
        for part in parts:
            if np.shape(part.matrices) != (len(self.frames), 4, 4):
                raise ValueError("one 4×4 world matrix per frame is needed")
            singular = np.flatnonzero(flat_transforms(part.matrices))
            if len(singular):
                raise BakeError(
                    f"frame {self.frames[singular[0]]}: the object's transform squashes it flat "
                    "(a scale of 0), so its vertices can't be mapped back: fix the scale animation")
        # The core works in world space moved by -origin, the centre of the bounding box of
        # the structures at the start: translation changes no physics (gravity is uniform),
        # and float64 then resolves 1e-16 of the structure's size, not of its distance
        # from the world's origin, in every tolerance of the core
        # (tests/test_addon_scale.py, test_a_far_object_bakes_the_motion_at_the_origin).
        self.origin, self._start_size = bounding_box(np.concatenate(
            [transform_points(part.matrices[0], part.arrays.local_positions) for part in parts]))
        self.solver = solver_settings([part.settings for part in parts])
        start = [self.origin_free(part.matrices[0]) for part in parts]
        self.mss, structures = build_system(arrays, settings, start[0],
                                            [(p.arrays, p.settings, m) for p, m in zip(parts[1:], start[1:])])
        structures = structures if self.together else [structures]
        self.structure = structures[0]
        vertex_starts = np.cumsum([0] + [part.arrays.vertex_count for part in parts])
        rod_starts = np.cumsum([0] + [int(st.rod_edges().sum()) for st in structures])
        self.parts = [PartFrames(self, part, st, slice(vertex_starts[i], vertex_starts[i + 1]),
                                 slice(rod_starts[i], rod_starts[i + 1]))
                      for i, (part, st) in enumerate(zip(parts, structures))]
        if colliders is not None:
            try:
                colliders.apply(self.mss, 0, self.origin)
            except ValueError as ex:
                raise BakeError(f"the core refused the colliders: {ex}") from ex
        world = self.world_positions()  # as modelled: the springs' rest lengths (forces.py)
        moved_out = np.zeros(len(world), dtype=bool)
        self.moved_by = 0.0  # m: how far the structures were moved out of the colliders
        if colliders is not None:
            # A structure modelled within a collider's thickness starts just beyond it where
            # it can leave in one piece, or the penalty would throw it out
            # (tests/test_addon_contact.py, test_a_chain_modelled_within_a_floors_thickness_starts_on_it).
            moved = self.mss.move_out_of_colliders()
            moved_out[np.asarray(self.mss.mass_vertices)[moved]] = True
            if len(moved):
                self.moved_by = float(np.linalg.norm(self.world_positions() - world, axis=1).max())
        pressed = pressed_into_colliders(self.mss, np.concatenate([st.vertex_masses() for st in structures]),
                                         self.solver.gravity)
        for part in self.parts:
            part.world_start = world[part.vertices]
            part.moved_out = int(np.count_nonzero(moved_out[part.vertices]))
            part.pressed = int(np.count_nonzero(pressed[part.vertices]))
        self.world_start = self.parts[0].world_start
        self.dt = 1.0 / settings.fps
        self._start_speed = float(np.linalg.norm(self.mss.vertex_velocities(), axis=1).max())
        # The pins of every part, in the core's order (vertex order): in the object space
        # of their part, moved by its matrix at each frame.
        pins = np.asarray(self.mss.fixed_vertices, dtype=np.int64)
        self._pins = []
        for part in self.parts:
            mine = pins[(pins >= part.vertices.start) & (pins < part.vertices.stop)] - part.vertices.start
            self._pins.append((part, part.arrays.local_positions[mine]))
        self.local_positions = self.parts[0].local_positions
        self.rod_forces = self.parts[0].rod_forces
        self._store(0, self.mss.vertex_positions())
        self.frames_done = 1
        self.report: list[FrameReport] = []  # one row per simulated frame

    @property
    def pressed(self) -> int:
        """The first object's vertices that start pressed into a collider (as PartFrames')."""
        return self.parts[0].pressed

    @property
    def moved_out(self) -> int:
        """The first object's vertices that lay within a collider's thickness and were moved
        out (as PartFrames')."""
        return self.parts[0].moved_out

    def origin_free(self, matrix) -> np.ndarray:
        """A world matrix moved by -origin: where the core has the object."""
        moved = np.array(matrix, dtype=np.float64)
        moved[:3, 3] -= self.origin
        return moved

    @property
    def done(self) -> bool:
        return self.frames_done >= len(self.frames)

    def world_positions(self) -> np.ndarray:
        """(N, 3) float64 world positions of the vertices now (of every part)."""
        return self.mss.vertex_positions() + self.origin

    def _store(self, k: int, core: np.ndarray) -> None:
        """Keep frame k from the core's positions (world space moved by -origin)."""
        rod_forces = self.mss.constraint_forces if len(self.mss.constraints) else None
        for part in self.parts:
            part.store(k, core, rod_forces)

    def step(self, stop=None) -> None:
        """Advance by one frame. stop() -> bool, asked between the core's steps (at most
        every 50 ms): True ends the frame with KeyboardInterrupt, the state that of the
        last whole step."""
        k = self.frames_done
        frame = int(self.frames[k])
        pinned = [transform_points(part.core_matrices[k], local) for part, local in self._pins if len(local)]
        if pinned:
            self.mss.fix_positions = np.concatenate(pinned)
        if self.colliders is not None and self.colliders.moving:
            self.colliders.apply(self.mss, k, self.origin)
        before, start = self.mss.stats, time.perf_counter()
        substeps = self.solver.substeps
        try:
            self.mss.simulate(self.dt, substeps, stop)
        except (RuntimeError, ValueError) as ex:
            # The core names a cause that no setting cures ("Likely cause: ... a flat rod
            # network"): the usual cures would mislead (test_flat_rod_plate_names_the_cause).
            # A crossing's cure the core names (a thicker collider, a larger distance)
            # stands alone (test_a_mass_too_fast_for_a_floor_gets_one_cure).
            cure = "" if "Likely cause:" in str(ex) or "pass through" in str(ex) else (
                f" Likely cure: more substeps (now {substeps}), lower stiffness "
                "or mass ratios, or more numerical damping (ρ∞ below 1, or Implicit Euler)")
            if cure and any(part_has_unbraced_hinges(part.arrays, part.settings) for part in self.parts):
                cure = (" Likely cause: Shear Stiffness is 0, so quads can shear flat, and the "
                        "angular bending across a flattened quad's triangles has no direction. "
                        "Likely cure: a Shear Stiffness (e.g. the Stiffness), or "
                        "less Bending Rigidity.")
            raise BakeError(f"frame {frame}: the solver failed ({ex}).{cure}") from ex
        positions = self.mss.vertex_positions()
        if not np.isfinite(positions).all() or self._flown_off(positions, k):
            raise BakeError(
                f"frame {frame}: the simulation diverged (positions became "
                f"{'infinite' if not np.isfinite(positions).all() else 'huge'}). Likely cure: "
                f"more substeps (now {substeps}), an implicit integrator "
                "(Generalized-α or Implicit Euler), or lower stiffness")
        self._store(k, positions)
        self.report.append(FrameReport.of(frame, self.mss, before, time.perf_counter() - start))
        self.frames_done = k + 1

    def _flown_off(self, positions: np.ndarray, k: int) -> bool:
        """Whether a vertex at frame k (core positions) is farther from the structure's
        start than DIVERGED_SIZES of its size beyond the farthest reach of what moves it:
        its fastest start speed and gravity over the time since, its pins and colliders."""
        t = k * self.dt
        reach = (DIVERGED_SIZES * self._start_size + self._start_speed * t
                 + 0.5 * float(np.linalg.norm(self.settings.gravity)) * t * t)
        movers = [np.asarray(self.mss.fix_positions, dtype=np.float64).reshape(-1, 3)]
        if self.colliders is not None:
            movers.append(self.colliders.vertices(k) - self.origin)
        movers = np.concatenate(movers)
        if len(movers):
            reach += float(np.linalg.norm(movers, axis=1).max())
        return float(np.linalg.norm(positions, axis=1).max()) > reach

    def run(self) -> np.ndarray:
        """Simulate the remaining frames; the (F, N, 3) float32 object-space positions."""
        while not self.done:
            self.step()
        return self.local_positions


def simulate_world_positions(arrays: MeshArrays, settings: SimulationSettings,
                             matrices, frames, colliders: ColliderFrames | None = None,
                             together=(), part: int = 0) -> np.ndarray:
    """(F, N, 3) float64 world positions of the same simulation as ``FrameSimulation``,
    exactly as the core computes them (the core is deterministic: the same inputs give
    the same numbers, bit for bit), of its `part` (0: the object of `arrays`, i: the one
    of together[i - 1]). For scripts and tests that analyse the motion;
    tests/test_addon_bake.py compares them with the core run directly."""
    run = FrameSimulation(arrays, settings, matrices, frames, colliders, together)
    vertices = run.parts[part].vertices
    world = np.empty((len(run.frames), vertices.stop - vertices.start, 3))
    world[0] = run.world_positions()[vertices]
    while not run.done:
        run.step()
        world[run.frames_done - 1] = run.world_positions()[vertices]
    return world
