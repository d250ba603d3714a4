"""A structure (vertices, edges and their marks) and the one place where it becomes a system.

A :class:`Structure` is plain numpy data, no Blender: the add-on fills one from a mesh, the
presets (:mod:`mass_spring.presets`) make the seeds' structures, scripts and tests build
their own. :func:`build_system` answers "where does an edge become a spring?":

=============================  ==================================================
edge mark                      becomes
=============================  ==================================================
none                           a spring (stiffness × the edge's stiffness scale)
``rope``                       a rope: a spring that only pulls
``rigid``                      a rod: a distance constraint (no stiffness)
=============================  ==================================================

Extra vertex pairs that are not edges become springs of their own stiffness: the shear
springs across quad faces (:func:`quad_diagonals`). Bending pairs would be one more such
field with its own stiffness. Edges and pairs between two pinned vertices are left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _no_pairs() -> np.ndarray:
    return np.zeros((0, 2), dtype=np.int64)


@dataclass
class Structure:
    """Vertices, edges and what they are, in SI units.

    Every per-vertex field has one entry per row of `positions`, every per-edge field one
    per row of `edges`; the optional ones (None) get their default in ``__post_init__``.
    """

    positions: np.ndarray                    # (N, 3) float
    edges: np.ndarray                        # (E, 2) int vertex pairs
    # Faces as vertex index sequences (a list, or an (F, k) array): only the mesh and the
    # shear pairs use them; the physics sees edges and pairs.
    faces: list | np.ndarray = field(default_factory=list)
    pinned: np.ndarray | None = None         # (N,) bool: pinned vertices do not move
    rigid: np.ndarray | None = None          # (E,) bool: the edge is a rod
    rope: np.ndarray | None = None           # (E,) bool: the edge only pulls
    masses: np.ndarray | None = None         # (N,) kg; None: total_mass spread evenly
    total_mass: float = 1.0                  # kg, used when masses is None
    stiffness: float = 0.0                   # N/m of a spring edge whose scale is 1
    stiffness_scale: np.ndarray | None = None  # (E,) multiplies stiffness per edge
    damping: float = 0.0                     # N·s/m of every spring
    shear_pairs: np.ndarray = field(default_factory=_no_pairs)  # (S, 2) shear springs
    shear_stiffness: float = 0.0             # N/m of every shear spring (0: none)
    bending_pairs: np.ndarray = field(default_factory=_no_pairs)  # (B, 2) bending springs
    bending_stiffness: float = 0.0           # N/m of every bending spring (0: none)
    velocities: np.ndarray | None = None     # (N, 3) m/s at the start; None: at rest

    def __post_init__(self):
        self.positions = _rows(self.positions, 3, np.float64, "positions")
        self.edges = _rows(self.edges, 2, np.int64, "edges")
        n, e = len(self.positions), len(self.edges)
        self.pinned = _flags(self.pinned, n, "pinned")
        self.rigid = _flags(self.rigid, e, "rigid")
        self.rope = _flags(self.rope, e, "rope")
        both = np.flatnonzero(self.rigid & self.rope)
        if both.size:
            raise ValueError(f"edge {int(both[0])} is marked both rigid and rope: a rod cannot "
                             "go slack; mark it as one or the other")
        if self.stiffness_scale is None:
            self.stiffness_scale = np.ones(e)
        self.stiffness_scale = np.asarray(self.stiffness_scale, dtype=np.float64)
        if self.stiffness_scale.shape != (e,):
            raise ValueError(f"stiffness_scale: expected {e} values, got shape "
                             f"{self.stiffness_scale.shape}")
        self.shear_pairs = _rows(self.shear_pairs, 2, np.int64, "shear_pairs")
        self.bending_pairs = _rows(self.bending_pairs, 2, np.int64, "bending_pairs")
        _check_pairs(self.edges, n, "edge")
        _check_pairs(self.shear_pairs, n, "shear pair")
        _check_pairs(self.bending_pairs, n, "bending pair")
        if self.masses is not None:
            self.masses = np.asarray(self.masses, dtype=np.float64)
            if self.masses.shape != (n,):
                raise ValueError(f"masses: expected {n} values, got shape {self.masses.shape}")
        if self.velocities is not None:
            self.velocities = _rows(self.velocities, 3, np.float64, "velocities")
            if len(self.velocities) != n:
                raise ValueError(f"velocities: expected {n} rows, got {len(self.velocities)}")

    @property
    def vertex_count(self) -> int:
        return len(self.positions)

    def vertex_masses(self) -> np.ndarray:
        """(N,) kg: `masses`, or `total_mass` spread evenly over the vertices."""
        if self.masses is not None:
            return self.masses
        return np.full(self.vertex_count, self.total_mass / max(self.vertex_count, 1))

    def moving(self, pairs: np.ndarray | None = None) -> np.ndarray:
        """Mask of the edges (or other vertex pairs) that keep at least one free end."""
        pairs = self.edges if pairs is None else pairs
        return ~between_pins(pairs, self.pinned)

    def spring_edges(self) -> np.ndarray:
        """Mask of the edges that become springs (ropes included)."""
        return self.moving() & ~self.rigid

    def rod_edges(self) -> np.ndarray:
        """Mask of the edges that become rods."""
        return self.moving() & self.rigid


def _rows(value, width: int, dtype, name: str) -> np.ndarray:
    """`value` as a (count, width) array of `dtype`; no silent reshaping or truncation."""
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros((0, width), dtype=dtype)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name}: expected shape (count, {width}), got {arr.shape}")
    if dtype is np.int64 and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected integer vertex indices, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _flags(value, count: int, name: str) -> np.ndarray:
    if value is None:
        return np.zeros(count, dtype=bool)
    flags = np.asarray(value, dtype=bool)
    if flags.shape != (count,):
        raise ValueError(f"{name}: expected {count} flags, got shape {flags.shape}")
    return flags


def _check_pairs(pairs: np.ndarray, n: int, name: str) -> None:
    bad = np.flatnonzero(((pairs < 0) | (pairs >= n)).any(axis=1))
    if bad.size:
        raise ValueError(f"{name} {int(bad[0])}: vertex index {pairs[bad[0]].tolist()} out of "
                         f"range (there are {n} vertices)")
    loops = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
    if loops.size:
        raise ValueError(f"{name} {int(loops[0])}: both ends are vertex {int(pairs[loops[0], 0])}")


def between_pins(pairs: np.ndarray, pinned: np.ndarray) -> np.ndarray:
    """Mask of the vertex pairs whose two ends are both pinned.

    Such a link moves nothing, and a rod between two pins would make the system singular,
    so :func:`build_system` leaves them out (tests/test_structure.py
    test_edges_between_pins_are_dropped).
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return pinned[pairs[:, 0]] & pinned[pairs[:, 1]]


def quad_faces(faces) -> np.ndarray:
    """(Q, 4) vertex indices of the faces that have four corners."""
    if isinstance(faces, np.ndarray):
        if faces.ndim == 2 and faces.shape[1] == 4:
            return faces.astype(np.int64)
        faces = list(faces)
    quads = [tuple(f) for f in faces if len(f) == 4]
    return np.array(quads, dtype=np.int64).reshape(-1, 4)


def quad_diagonals(faces) -> np.ndarray:
    """(2Q, 2) vertex pairs: the first diagonal of each of the Q quad faces, then the second.

    These are the shear springs that make a quad mesh resist shearing like cloth instead
    of folding like a net of hinged squares.
    """
    quads = quad_faces(faces)
    return np.concatenate([quads[:, [0, 2]], quads[:, [1, 3]]]).reshape(-1, 2)


def bending_pairs(faces) -> np.ndarray:
    """(B, 2) vertex pairs of bending springs: across every edge shared by two faces, the
    vertices next to each of its ends in the two faces (for triangles, the two vertices
    opposite the edge; on a quad grid, every vertex's two neighbours along a grid line).

    A flat sheet without them folds along any edge for free; these springs are stretched
    or compressed by a fold, so the sheet bends like cloth. Each pair appears once.
    """
    polygons = [np.asarray(f, dtype=np.int64) for f in faces if len(f) >= 3]
    if not polygons:
        return np.zeros((0, 2), dtype=np.int64)
    sizes = np.array([len(f) for f in polygons])
    corners = np.concatenate(polygons)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    k = np.arange(len(corners)) - starts
    size = np.repeat(sizes, sizes)
    at = lambda shift: corners[starts + (k + shift) % size]  # noqa: E731
    a, a_other, b, b_other = corners, at(-1), at(1), at(2)  # edge a-b, the faces' next vertices
    key = np.sort(np.column_stack([a, b]), axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    key = key[order]
    run_starts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]).any(axis=1)])
    run_lengths = np.diff(np.r_[run_starts, len(key)])
    shared = run_starts[run_lengths == 2]  # edges of exactly two faces
    r1, r2 = order[shared], order[shared + 1]
    aligned = a[r1] == a[r2]  # the two faces run along the edge in the same direction
    first = np.column_stack([a_other[r1], np.where(aligned, a_other[r2], b_other[r2])])
    second = np.column_stack([b_other[r1], np.where(aligned, b_other[r2], a_other[r2])])
    pairs = np.sort(np.concatenate([first, second]), axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0)


def build_system(structure: Structure, gravity=(0.0, 0.0, -9.81)):
    """The 3-D system of `structure`: this is where edges become springs, rods and ropes.

    Unmarked edges and rope edges become springs (ropes only pull) of stiffness
    ``stiffness * stiffness_scale``; rigid edges become rods; shear and bending pairs become
    springs of ``shear_stiffness`` and ``bending_stiffness`` when those are positive. Rest
    lengths are the current distances.
    Links between two pinned vertices are left out (:func:`between_pins`). Bad input
    raises ValueError naming the vertex or edge.
    """
    from . import from_arrays

    s = structure
    springs = s.spring_edges()
    rods = s.rod_edges()
    shear = s.shear_pairs[s.moving(s.shear_pairs)]
    if s.shear_stiffness <= 0:
        shear = shear[:0]
    bending = s.bending_pairs[s.moving(s.bending_pairs)]
    if s.bending_stiffness <= 0:
        bending = bending[:0]
    extra = np.concatenate([shear, bending])
    return from_arrays(
        s.positions,
        s.vertex_masses(),
        fixed=s.pinned,
        velocities=s.velocities,
        springs=np.concatenate([s.edges[springs], extra]),
        stiffness=np.concatenate([s.stiffness * s.stiffness_scale[springs],
                                  np.full(len(shear), float(s.shear_stiffness)),
                                  np.full(len(bending), float(s.bending_stiffness))]),
        rest_length=None,
        damping=s.damping,
        rope=np.concatenate([s.rope[springs], np.zeros(len(extra), bool)]),
        constraints=s.edges[rods],
        constraint_length=None,
        gravity=None if gravity is None else np.asarray(gravity, dtype=np.float64),
    )
