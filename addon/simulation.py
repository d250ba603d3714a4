"""Arrays → core system → positions per frame.

Nothing here touches Blender: the inputs are numpy arrays (from ``mesh_arrays``) and the
object's world matrix at every frame, the output is an (F, N, 3) array of world-space
vertex positions. That keeps the physics side testable with plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import BakeError

# Panel enum (the core's integrator names in capitals) → name for ``mss.set_integrator``.
try:
    from mass_spring import INTEGRATOR_INFO as _CORE_INTEGRATORS
except ImportError:  # import_core() says how to install the core
    _CORE_INTEGRATORS = ()
INTEGRATORS = {info.name.upper(): info.name for info in _CORE_INTEGRATORS}
EXPLICIT_INTEGRATORS = {info.name.upper() for info in _CORE_INTEGRATORS if info.explicit}

# A coordinate beyond this (metres) means the run blew up even if it is still finite.
DIVERGED_COORDINATE = 1.0e7


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
    # Words used in messages, e.g. the pin group's name.
    pin_group: str = ""
    mass_group: str = ""

    @property
    def vertex_count(self) -> int:
        return len(self.local_positions)

    def validate(self, world_positions: np.ndarray | None = None) -> None:
        """Raise BakeError for input the simulation can't use, with the cure in the message."""
        n = self.vertex_count
        if n == 0:
            raise BakeError("the mesh has no vertices")
        if len(self.edges) == 0:
            raise BakeError(
                "the mesh has no edges. Every edge becomes a spring, so there is nothing "
                "to connect the masses: add edges or faces")
        if self.pinned.all():
            group = f" (vertex group '{self.pin_group}')" if self.pin_group else ""
            raise BakeError(
                f"every vertex is pinned{group}, so nothing can move: "
                "remove some vertices from the pin group or lower their weight to 0.5 or less")
        both = np.flatnonzero(self.rigid & self.rope)
        if len(both):
            raise BakeError(
                f"{len(both)} edge(s) are marked both rigid and rope (first: edge {both[0]}): "
                "clear one of the two marks in Edit Mode")
        negative = np.flatnonzero(~(self.stiffness_scale >= 0))
        if len(negative):
            raise BakeError(
                f"the stiffness attribute is negative or not a number on {len(negative)} edge(s) "
                f"(first: edge {negative[0]}): stiffness scales must be >= 0")
        free = ~self.pinned
        bad_mass = np.flatnonzero(free & ~(self.masses > 0))
        if len(bad_mass):
            i = bad_mass[0]
            why = (f"its weight in mass group '{self.mass_group}' is 0"
                   if self.mass_group else "the total mass is not positive")
            raise BakeError(
                f"{len(bad_mass)} free vertex(es) get no positive mass (first: vertex {i}, "
                f"mass {self.masses[i]:g}) because {why}: every vertex that is not pinned "
                "needs a mass > 0")
        positions = self.local_positions if world_positions is None else world_positions
        if not np.isfinite(positions).all():
            raise BakeError("some vertex positions are not finite numbers")
        lengths = np.linalg.norm(positions[self.edges[:, 1]] - positions[self.edges[:, 0]], axis=1)
        extent = float(np.ptp(positions, axis=0).max()) if n > 1 else 0.0
        tiny = max(extent, 1.0) * 1e-9
        zero = np.flatnonzero(lengths <= tiny)
        if len(zero):
            e = zero[0]
            a, b = self.edges[e]
            raise BakeError(
                f"{len(zero)} edge(s) have zero length (first: edge {e} between vertices {a} "
                f"and {b}), so a spring on them has no direction: merge the doubled vertices "
                "(Mesh ▸ Clean Up ▸ Merge by Distance)")


@dataclass
class SimulationSettings:
    """Everything the core needs besides the mesh, in SI units and world space."""

    stiffness: float = 100.0
    shear_stiffness: float = 0.0  # of the springs on shear_pairs
    damping: float = 0.0
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    integrator: str = "GENERALIZED_ALPHA"
    rho_inf: float = 0.5  # the add-on's default (properties.py says why)
    substeps: int = 5
    fps: float = 24.0
    initial_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    initial_angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))


def transform_points(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a 4×4 affine matrix to (N, 3) points."""
    matrix = np.asarray(matrix, dtype=np.float64)
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def world_to_local(world: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """(F, N, 3) world positions → object space of each frame's matrix, as float32.

    Shape keys and PC2 samples live in object space; an animated object moves them back
    to where the simulation put them.
    """
    matrices = np.asarray(matrices, dtype=np.float64)
    try:
        inverse = np.linalg.inv(matrices)
    except np.linalg.LinAlgError as ex:
        raise BakeError("the object's transform is not invertible at some frame (a scale of 0?)") from ex
    local = np.empty(world.shape, dtype=np.float32)
    for k in range(len(world)):  # per frame: as fast as one batched product, less memory
        local[k] = world[k] @ inverse[k, :3, :3].T + inverse[k, :3, 3]
    return local


def rigid_velocities(points: np.ndarray, origin, linear, angular) -> np.ndarray:
    """Velocity of every point of a body moving with `linear` and spinning with `angular` about `origin`."""
    linear = np.asarray(linear, dtype=np.float64)
    angular = np.asarray(angular, dtype=np.float64)
    return linear + np.cross(angular, points - np.asarray(origin, dtype=np.float64))


def keep_active_edges(arrays: MeshArrays, pairs: np.ndarray | None = None) -> np.ndarray:
    """Edges (or other vertex pairs) between two pinned vertices move nothing (and a rod
    between two fixes would make the system singular): leave them out."""
    pairs = arrays.edges if pairs is None else pairs
    return ~(arrays.pinned[pairs[:, 0]] & arrays.pinned[pairs[:, 1]])


def build_system(arrays: MeshArrays, settings: SimulationSettings, matrix_world):
    """The core system at the first frame: this is where edges become springs and rods."""
    core = import_core()
    if settings.integrator not in INTEGRATORS:
        raise BakeError(f"unknown integrator '{settings.integrator}'")
    if settings.substeps < 1:
        raise BakeError(f"substeps must be at least 1, got {settings.substeps}")
    if not settings.fps > 0:
        raise BakeError(f"the scene's frame rate must be positive, got {settings.fps}")

    positions = transform_points(matrix_world, arrays.local_positions)
    arrays.validate(positions)
    origin = np.asarray(matrix_world, dtype=np.float64)[:3, 3]
    velocities = rigid_velocities(positions, origin, settings.initial_velocity,
                                  settings.initial_angular_velocity)

    active = keep_active_edges(arrays)
    springs = active & ~arrays.rigid
    rods = active & arrays.rigid
    shear = arrays.shear_pairs[keep_active_edges(arrays, arrays.shear_pairs)]
    if settings.shear_stiffness <= 0:
        shear = shear[:0]
    if settings.integrator in EXPLICIT_INTEGRATORS and rods.any():
        raise BakeError(
            f"{int(rods.sum())} edge(s) are marked rigid, and the explicit integrator "
            f"'{settings.integrator.replace('_', ' ').title()}' cannot keep rods rigid: "
            "choose Generalized-α, Newmark or Implicit Euler, or clear the rigid marks")
    try:
        mss = core.MassSpringSystem3d.from_arrays(
            positions,
            np.asarray(arrays.masses, dtype=np.float64),
            fixed=arrays.pinned,
            velocities=velocities,
            springs=np.concatenate([arrays.edges[springs], shear]),
            stiffness=np.concatenate([settings.stiffness * arrays.stiffness_scale[springs],
                                      np.full(len(shear), settings.shear_stiffness)]),
            rest_length=None,
            damping=settings.damping,
            rope=np.concatenate([arrays.rope[springs], np.zeros(len(shear), bool)]),
            constraints=arrays.edges[rods],
            constraint_length=None,
            gravity=np.asarray(settings.gravity, dtype=np.float64),
        )
        mss.set_integrator(INTEGRATORS[settings.integrator], rho_inf=settings.rho_inf)
    except ValueError as ex:
        raise BakeError(f"the core refused the system: {ex}") from ex
    return mss


class FrameSimulation:
    """Runs the core one frame at a time, so a UI can show progress and cancel between frames.

    ``matrices[k]`` is the object's world matrix at frame k of the range; pinned vertices
    are moved to follow it (the core interpolates them linearly within the frame).
    ``positions[k]`` holds the world positions of every vertex at frame k.
    """

    def __init__(self, arrays: MeshArrays, settings: SimulationSettings, matrices, frames):
        self.arrays = arrays
        self.settings = settings
        self.matrices = np.asarray(matrices, dtype=np.float64)
        self.frames = np.asarray(frames, dtype=np.int64)
        if len(self.frames) < 2:
            raise BakeError("the frame range needs at least two frames (end after start)")
        if self.matrices.shape != (len(self.frames), 4, 4):
            raise ValueError("one 4×4 world matrix per frame is needed")
        singular = np.flatnonzero(np.abs(np.linalg.det(self.matrices[:, :3, :3])) < 1e-12)
        if len(singular):
            raise BakeError(
                f"frame {self.frames[singular[0]]}: the object's transform squashes it flat "
                "(a scale of 0), so its vertices can't be mapped back: fix the scale animation")
        self.mss = build_system(arrays, settings, self.matrices[0])
        self.dt = 1.0 / settings.fps
        self._pins_local = arrays.local_positions[np.asarray(self.mss.fixed_vertices, dtype=np.int64)]
        self.positions = np.empty((len(self.frames), arrays.vertex_count, 3), dtype=np.float64)
        self.positions[0] = self.mss.vertex_positions()
        self.frames_done = 1

    @property
    def done(self) -> bool:
        return self.frames_done >= len(self.frames)

    def step(self) -> None:
        """Advance by one frame."""
        k = self.frames_done
        frame = int(self.frames[k])
        if len(self._pins_local):
            self.mss.fix_positions = transform_points(self.matrices[k], self._pins_local)
        try:
            self.mss.simulate(self.dt, self.settings.substeps)
        except (RuntimeError, ValueError) as ex:
            raise BakeError(
                f"frame {frame}: the solver failed ({ex}). Likely cure: more substeps "
                f"(now {self.settings.substeps}), lower stiffness or mass ratios, or more "
                "numerical damping (ρ∞ below 1, or Implicit Euler)") from ex
        positions = self.mss.vertex_positions()
        if not np.isfinite(positions).all() or np.abs(positions).max() > DIVERGED_COORDINATE:
            raise BakeError(
                f"frame {frame}: the simulation diverged (positions became "
                f"{'infinite' if not np.isfinite(positions).all() else 'huge'}). Likely cure: "
                f"more substeps (now {self.settings.substeps}), an implicit integrator "
                "(Generalized-α or Implicit Euler), or lower stiffness")
        self.positions[k] = positions
        self.frames_done = k + 1

    def run(self) -> np.ndarray:
        while not self.done:
            self.step()
        return self.positions
