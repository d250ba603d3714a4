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
springs across quad faces (:func:`quad_diagonals`) and the bending springs of the linear
bending model (:func:`bending_pairs`). Angular bending comes as hinges (two triangles on
an edge, :func:`hinges_of_triangles`) with a plate's flexural rigidity, and wire joints
(a vertex between two edges of no face, :func:`wire_joints`) with a wire's. Edges, pairs
and hinges between pinned vertices only are left out.
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
    # Angular bending: hinges (H, 4: an edge, then the two triangles' opposite corners) of
    # a plate of flexural rigidity hinge_rigidity (D, N m), and wire joints (J, 3: the
    # middle vertex second) of a wire of flexural rigidity wire_rigidity (EI, N m^2). Their
    # rest angles are those of `positions`: the modelled shape.
    hinges: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), dtype=np.int64))
    hinge_weights: np.ndarray | None = None  # (H,) scales each hinge (hinges_of_faces); None: 1
    hinge_rigidity: float = 0.0
    wire_joints: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    wire_rigidity: float = 0.0
    velocities: np.ndarray | None = None     # (N, 3) m/s at the start; None: at rest
    # Weight maps (as Cloth's property weights): per-vertex factors (N,) >= 0 of the
    # stiffness (edge and shear springs), the bending (bending springs, hinges, wire
    # joints) and the damping (every spring); an element takes the mean of its vertices'.
    # None: 1 everywhere.
    stiffness_weights: np.ndarray | None = None
    bending_weights: np.ndarray | None = None
    damping_weights: np.ndarray | None = None
    # Self-collision: faces (triangulated) and edges that share no vertex keep this
    # distance (m) apart, with friction self_friction among them; 0: off.
    self_collision_distance: float = 0.0
    self_friction: float = 0.0

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
        self.hinges = _rows(self.hinges, 4, np.int64, "hinges")
        if self.hinge_weights is None:
            self.hinge_weights = np.ones(len(self.hinges))
        self.hinge_weights = np.asarray(self.hinge_weights, dtype=np.float64)
        if self.hinge_weights.shape != (len(self.hinges),):
            raise ValueError(f"hinge_weights: expected {len(self.hinges)} values, got shape "
                             f"{self.hinge_weights.shape}")
        self.wire_joints = _rows(self.wire_joints, 3, np.int64, "wire_joints")
        for name in ("shear_stiffness", "bending_stiffness", "hinge_rigidity", "wire_rigidity",
                     "self_collision_distance", "self_friction"):
            value = getattr(self, name)
            if np.ndim(value) != 0:  # numpy's "truth value ... is ambiguous" before
                raise ValueError(f"{name} must be one number for the structure, got an array of "
                                 f"shape {np.shape(value)} (per-vertex values: from_arrays and "
                                 "set_self_contact take them)")
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value}")
        _check_pairs(self.edges, n, "edge")
        _check_pairs(self.shear_pairs, n, "shear pair")
        _check_pairs(self.bending_pairs, n, "bending pair")
        _check_indices(self.hinges, n, "hinge")
        _check_indices(self.wire_joints, n, "wire joint")
        _check_faces(self.faces, n)
        if self.masses is not None:
            self.masses = np.asarray(self.masses, dtype=np.float64)
            if self.masses.shape != (n,):
                raise ValueError(f"masses: expected {n} values, got shape {self.masses.shape}")
        if self.velocities is not None:
            self.velocities = _rows(self.velocities, 3, np.float64, "velocities")
            if len(self.velocities) != n:
                raise ValueError(f"velocities: expected {n} rows, got {len(self.velocities)}")
        for name in ("stiffness_weights", "bending_weights", "damping_weights"):
            if getattr(self, name) is not None:
                setattr(self, name, _vertex_weights(getattr(self, name), n, name))

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

    @staticmethod
    def element_weights(weights: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
        """(len(rows),): each element's (row of vertex indices') mean weight; 1 without a
        weight map."""
        if weights is None or len(rows) == 0:
            return np.ones(len(rows))
        return weights[rows].mean(axis=1)


def _rows(value, width: int, dtype, name: str) -> np.ndarray:
    """`value` as a (count, width) array of `dtype`; no silent reshaping or truncation."""
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros((0, width), dtype=dtype)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name}: expected shape (count, {width}), got {arr.shape}")
    if dtype is np.int64 and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected integer vertex indices, got {arr.dtype}")
    if dtype is np.int64:
        _refuse_wrapping_indices(arr, f"{name} row")
    return np.ascontiguousarray(arr, dtype=dtype)


def _refuse_wrapping_indices(arr: np.ndarray, name: str, first_row: int = 0) -> None:
    """ValueError for unsigned indices beyond int64, which the cast to int64 would turn
    negative and report as another vertex (found by an adversarial test:
    tests/test_structure.py, test_bad_structures_raise_value_errors)."""
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        row = int(np.flatnonzero((arr > np.iinfo(np.int64).max).reshape(len(arr), -1).any(axis=1))[0])
        raise ValueError(f"{name} {first_row + row}: vertex index {arr[row].tolist()} out of range")


def _vertex_weights(value, count: int, name: str) -> np.ndarray:
    weights = np.asarray(value, dtype=np.float64)
    if weights.shape != (count,):
        raise ValueError(f"{name}: expected {count} values (one per vertex), got shape {weights.shape}")
    bad = np.flatnonzero(~(np.isfinite(weights) & (weights >= 0)))
    if bad.size:
        raise ValueError(f"{name}: vertex {int(bad[0])} has weight {weights[bad[0]]}: weights must be "
                         "numbers >= 0")
    return weights


def _flags(value, count: int, name: str) -> np.ndarray:
    """(count,) bool from booleans or 0/1. Other numbers are refused: weights cast to bool
    pinned every vertex of nonzero weight (found by an adversarial test), where
    from_arrays refuses them."""
    if value is None:
        return np.zeros(count, dtype=bool)
    given = np.asarray(value)
    if given.shape != (count,):
        raise ValueError(f"{name}: expected {count} flags, got shape {given.shape}")
    if given.dtype != bool:
        numbers = np.issubdtype(given.dtype, np.number)
        other = np.flatnonzero(~np.isin(given, (0, 1))) if numbers else np.arange(min(1, count))
        if other.size:
            raise ValueError(f"{name}: expected {count} flags (True/False or 0/1), got "
                             f"{given[other[0]].item()!r} at {int(other[0])}; for weights, give "
                             "a comparison such as weights > 0.5")
    return given.astype(bool)


def _check_pairs(pairs: np.ndarray, n: int, name: str) -> None:
    bad = np.flatnonzero(((pairs < 0) | (pairs >= n)).any(axis=1))
    if bad.size:
        raise ValueError(f"{name} {int(bad[0])}: vertex index {pairs[bad[0]].tolist()} out of "
                         f"range (there are {n} vertices)")
    loops = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
    if loops.size:
        raise ValueError(f"{name} {int(loops[0])}: both ends are vertex {int(pairs[loops[0], 0])}")


def _check_indices(rows: np.ndarray, n: int, name: str) -> None:
    """ValueError naming the first row with a vertex index outside 0..n-1 or a repeated one."""
    bad = np.flatnonzero(((rows < 0) | (rows >= n)).any(axis=1))
    if bad.size:
        raise ValueError(f"{name} {int(bad[0])}: vertex index out of range (there are {n} vertices)")
    srt = np.sort(rows, axis=1)
    repeated = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
    if repeated.size:
        raise ValueError(f"{name} {int(repeated[0])}: a vertex appears twice in {rows[repeated[0]].tolist()}")


def _check_faces(faces, n: int) -> None:
    """ValueError naming the first face with a vertex index outside 0..n-1 (by the user's
    face, not by the triangles self-collision cuts it into)."""
    for k, face in enumerate(face_rows(faces)):
        if face.min() < 0 or face.max() >= n:
            raise ValueError(f"face {k}: vertex index {face.tolist()} out of range (there are {n} vertices)")


def face_rows(faces) -> list[np.ndarray]:
    """Each polygon's vertex indices as an int64 array. ValueError, naming the face, for a
    face of fewer than three vertices (it bounds nothing, and self-collision and bending
    left it out silently), for indices that are not integers, and for unsigned ones beyond
    int64, which the cast would wrap to a negative vertex (found by an adversarial test:
    tests/test_structure.py, test_bad_structures_raise_value_errors)."""
    rows = []
    for k, face in enumerate(faces):
        f = np.asarray(face)
        if f.ndim != 1 or f.size < 3:
            raise ValueError(f"face {k}: {f.size} vertex(es); a face needs at least 3 (give a pair "
                             "of vertices as an edge)")
        if not np.issubdtype(f.dtype, np.integer):
            if all(isinstance(v, (int, np.integer)) for v in face):  # Python ints beyond int64
                raise ValueError(f"face {k}: vertex index {[int(v) for v in face]} out of range")
            raise ValueError(f"face {k}: expected integer vertex indices, got {f.tolist()}")
        _refuse_wrapping_indices(f.reshape(1, -1), "face", first_row=k)
        rows.append(f.astype(np.int64, copy=False))
    return rows


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """np.unique(rows, axis=0), without importing numpy.ma: np.unique does (numpy 2) unless
    asked for indices, 13-22 ms of a Blender session's first bake
    (tests/test_headless.py, test_a_bake_in_a_fresh_process_does_not_import_numpy_ma)."""
    return np.unique(rows, axis=0, return_index=True)[0]


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
    polygons = face_rows(faces)
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
    return unique_rows(pairs)


def build_system(structure, gravity=(0.0, 0.0, -9.81), locality_order=False):
    """The 3-D system of `structure`: this is where edges become springs, rods and ropes.

    Unmarked edges and rope edges become springs (ropes only pull) of stiffness
    ``stiffness * stiffness_scale``; rigid edges become rods; shear and bending pairs become
    springs of ``shear_stiffness`` and ``bending_stiffness`` when those are positive; hinges
    and wire joints become angular bending (``HingeBending``, ``WireBending``) when their
    rigidity is positive. The weight maps scale each element by the mean of its vertices'
    weights. With a self_collision_distance, the faces and edges collide with each other.
    Rest lengths and angles are the current ones. Links between two pinned vertices are
    left out (:func:`between_pins`). Bad input raises ValueError naming the vertex or edge.

    `structure` may be a list of structures: one system simulates them together, their
    vertices numbered one after the other (the first's, then the second's, ...), their
    springs, rods, hinges and wire joints in that order too. Those with a
    self_collision_distance collide with themselves and with each other, each keeping its
    own distance and friction (a pair of two keeps the larger: System.set_self_contact).

    locality_order: number the masses along a space-filling curve (:func:`from_arrays`;
    True, False, or "auto": where the vertex order is scattered); ``vertex_positions()``
    stays in vertex order.
    """
    from . import from_arrays

    structures = [structure] if isinstance(structure, Structure) else list(structure)
    if not structures:
        raise ValueError("build_system: no structure given")
    offsets = np.cumsum([0] + [s.vertex_count for s in structures])
    parts = [_elements(s, int(o)) for s, o in zip(structures, offsets)]

    def joined(name, width=None):
        rows = [p[name] for p in parts]
        return np.concatenate(rows) if width is None else np.concatenate(rows).reshape(-1, width)

    system = from_arrays(
        joined("positions", 3),
        joined("masses"),
        fixed=joined("pinned"),
        velocities=joined("velocities", 3),
        springs=joined("springs", 2),
        stiffness=joined("stiffness"),
        rest_length=None,
        damping=joined("damping"),
        rope=joined("rope"),
        constraints=joined("rods", 2),
        constraint_length=None,
        gravity=None if gravity is None else np.asarray(gravity, dtype=np.float64),
        locality_order=locality_order,
    )
    if len(joined("hinges")):
        system.add_hinges(joined("hinges", 4), joined("hinge_stiffness"))
    colliding = [s.self_collision_distance > 0 for s in structures]
    if any(colliding):
        on = [p for p, c in zip(parts, colliding) if c]
        system.set_self_contact(np.concatenate([p["triangles"] for p in on]).reshape(-1, 3),
                                np.concatenate([p["edges"] for p in on]).reshape(-1, 2),
                                joined("self_distance"), joined("self_friction"))
    if len(joined("joints")):
        system.add_wire_bendings(joined("joints", 3), joined("joint_stiffness"))
    return system


def _elements(s: Structure, offset: int) -> dict:
    """The arrays build_system makes of one structure, its vertex indices moved by
    `offset` (where its vertices start in a system of several)."""
    springs = s.spring_edges()
    rods = s.rod_edges()
    shear = s.shear_pairs[s.moving(s.shear_pairs)]
    if s.shear_stiffness <= 0:
        shear = shear[:0]
    bending = s.bending_pairs[s.moving(s.bending_pairs)]
    if s.bending_stiffness <= 0:
        bending = bending[:0]
    extra = np.concatenate([shear, bending])
    edges = s.edges[springs]
    n = s.vertex_count
    out = {
        "positions": s.positions,
        "masses": s.vertex_masses(),
        "pinned": s.pinned,
        "velocities": np.zeros((n, 3)) if s.velocities is None else s.velocities,
        "springs": np.concatenate([edges, extra]) + offset,
        "stiffness": np.concatenate([s.stiffness * s.stiffness_scale[springs] *
                                     s.element_weights(s.stiffness_weights, edges),
                                     s.shear_stiffness * s.element_weights(s.stiffness_weights, shear),
                                     s.bending_stiffness * s.element_weights(s.bending_weights, bending)]),
        "damping": s.damping * s.element_weights(s.damping_weights, np.concatenate([edges, extra])),
        "rope": np.concatenate([s.rope[springs], np.zeros(len(extra), bool)]),
        "rods": s.edges[rods] + offset,
        "hinges": np.zeros((0, 4), np.int64), "hinge_stiffness": np.zeros(0),
        "joints": np.zeros((0, 3), np.int64), "joint_stiffness": np.zeros(0),
        "triangles": triangles_of_faces(s.faces) + offset,
        "edges": s.edges + offset,
        "self_distance": np.full(n, float(s.self_collision_distance)),
        "self_friction": np.full(n, float(s.self_friction)),
    }
    angled = hinges_with_an_angle(s.positions, s.hinges) if s.hinge_rigidity > 0 else np.zeros(0, bool)
    if angled.any():
        hinges = s.hinges[angled]
        out["hinges"] = hinges + offset
        out["hinge_stiffness"] = ((s.hinge_weights * s.element_weights(s.bending_weights, s.hinges))[angled] *
                                  hinge_stiffnesses(s.positions, hinges, s.hinge_rigidity, s.pinned))
    turning = joints_with_a_direction(s.positions, s.wire_joints) if s.wire_rigidity > 0 else np.zeros(0, bool)
    if turning.any():
        joints = s.wire_joints[turning]
        out["joints"] = joints + offset
        out["joint_stiffness"] = (s.element_weights(s.bending_weights, s.wire_joints)[turning] *
                                  wire_stiffnesses(s.positions, joints, s.wire_rigidity, s.pinned))
    return out


def triangles_of_faces(faces) -> np.ndarray:
    """(T, 3) triangles of a mesh's polygons: what self-collision sees of the faces. A quad
    is cut both ways (four triangles): a bent quad's surface is either cut, and Blender
    draws, renders and tests overlaps (BVH) on whichever it picks; cut one way only, a
    ribbon's baked quads crossed on the other (tests/test_addon_self_collision.py). Larger
    polygons are cut as a fan from their first corner."""
    tris = []
    for f in map(list, face_rows(faces)):
        if len(f) == 4:
            tris += [(f[0], f[1], f[2]), (f[0], f[2], f[3]), (f[0], f[1], f[3]), (f[1], f[2], f[3])]
        else:
            tris += [(f[0], f[k], f[k + 1]) for k in range(1, len(f) - 1)]
    return np.array(tris, dtype=np.int64).reshape(-1, 3)


def hinges_with_an_angle(positions, hinges) -> np.ndarray:
    """(H,) bool: the hinges whose two triangles have area at rest (each opposite corner
    farther than 1e-6 edge lengths from the edge's line). A hinge without has no angle to
    keep, and its angle jumps to a fold as soon as the corner leaves the line."""
    hinges = np.asarray(hinges, dtype=np.int64).reshape(-1, 4)
    x = np.asarray(positions, dtype=np.float64)[hinges]
    e = x[:, 1] - x[:, 0]
    length = np.linalg.norm(e, axis=1)
    ok = length > 0
    for corner in (2, 3):
        away = np.linalg.norm(np.cross(x[:, corner] - x[:, 0], e), axis=1)  # |e| times the distance
        ok &= away > 1e-6 * length * length
    return ok


def joints_with_a_direction(positions, joints) -> np.ndarray:
    """(J,) bool: the wire joints whose two edges have length at rest (more than 1e-6 of
    the longer) and do not fold back onto each other (a turning angle below 179.9
    degrees). Others have no bending direction at rest: their angle, and so their
    rest shape, is not defined."""
    joints = np.asarray(joints, dtype=np.int64).reshape(-1, 3)
    x = np.asarray(positions, dtype=np.float64)[joints]
    a, b = x[:, 1] - x[:, 0], x[:, 2] - x[:, 1]
    la, lb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    longer = np.maximum(la, lb)
    ok = (la > 1e-6 * longer) & (lb > 1e-6 * longer) & (longer > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.einsum("ij,ij->i", a, b) / (la * lb)
    return ok & (cos > np.cos(np.radians(179.9)))


def hinges_of_triangles(triangles) -> np.ndarray:
    """(H, 4) vertex indices of the hinges of a triangle mesh: for every edge two triangles
    share, the edge's two vertices (in the first triangle's order), then the vertex
    opposite it in each triangle. An edge of more than two triangles (a non-manifold mesh)
    hinges each triangle with the next one in the input's order. These are the elements of angular
    bending (``HingeBending``, ``MassSpringSystem3d.add_hinges``).
    """
    tris = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    a = tris.ravel()                      # each triangle's edges a-b, opposite vertex o
    b = tris[:, [1, 2, 0]].ravel()
    o = tris[:, [2, 0, 1]].ravel()
    key = np.sort(np.column_stack([a, b]), axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    key = key[order]
    same = np.flatnonzero((key[1:] == key[:-1]).all(axis=1))  # k and k + 1: one edge
    r1, r2 = order[same], order[same + 1]
    two = o[r1] != o[r2]  # a triangle given twice (a doubled face) is no hinge
    return np.column_stack([a[r1], b[r1], o[r1], o[r2]])[two]


def hinges_of_faces(faces) -> tuple[np.ndarray, np.ndarray]:
    """(H, 4) hinges and (H,) weights for a mesh of polygons: across every edge two faces
    share, the hinges of the mesh's two triangulations at weight 1/2 each (one hinge, at
    weight 1, where both give the same), none across a quad's diagonals.

    A quad is cut by one diagonal in the first triangulation and by the other in the
    second. On a grid of squares bent into a cylinder of curvature kappa about any
    direction, twisted (z = kappa x y) or bent both ways (a sphere, a saddle), the hinges
    then store a plate's bending energy with Poisson's ratio 0 within 0.1 %; cut one way
    only they stored 1 to 3 times the plate's by the direction, and hinges across the
    diagonals made a twist 3 times too stiff (tests/test_core_hinges.py). Triangles are
    their own cut; larger polygons are cut as a fan from their first corner, with hinges
    across the fan's diagonals (such a face would fold there freely otherwise).
    """
    cuts = ([], [])
    quad_diagonals = set()
    for f in face_rows(faces):
        f = f.tolist()
        if len(f) == 4:
            cuts[0].extend([(f[0], f[1], f[2]), (f[0], f[2], f[3])])
            cuts[1].extend([(f[0], f[1], f[3]), (f[1], f[2], f[3])])
            quad_diagonals.update({frozenset((f[0], f[2])), frozenset((f[1], f[3]))})
        else:
            fan = [(f[0], f[k], f[k + 1]) for k in range(1, len(f) - 1)]
            cuts[0].extend(fan)
            cuts[1].extend(fan)
    hinges = np.concatenate([hinges_of_triangles(np.array(c, dtype=np.int64).reshape(-1, 3)) for c in cuts])
    if len(hinges) and quad_diagonals:
        across = np.array([frozenset(e) in quad_diagonals for e in map(tuple, hinges[:, :2])], dtype=bool)
        hinges = hinges[~across]
    if not len(hinges):
        return hinges.reshape(0, 4), np.zeros(0)
    # one row per hinge: its edge and its two corners, each pair in sorted order
    key = np.column_stack([np.sort(hinges[:, :2], axis=1), np.sort(hinges[:, 2:], axis=1)])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    weights = np.bincount(inverse.ravel(), minlength=len(first)) * 0.5
    return hinges[first], weights


def wire_joints(edges, faces=()) -> np.ndarray:
    """(J, 3) vertex triples (a, v, b): every vertex v that joins exactly two edges a-v and
    v-b belonging to no face (a wire, a cable, a chain of edges). A vertex where three or
    more such edges meet (a junction) gets no joint."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    in_face = set()
    for f in faces:
        f = list(f)
        in_face.update(frozenset((f[k], f[(k + 1) % len(f)])) for k in range(len(f)))
    wire = np.array([frozenset(e) not in in_face for e in map(tuple, edges)], dtype=bool)
    w = unique_rows(np.sort(edges[wire], axis=1)) if len(edges) else edges  # once each
    if not len(w):
        return np.zeros((0, 3), dtype=np.int64)
    ends = w.ravel()
    other = w[:, ::-1].ravel()
    order = np.argsort(ends, kind="stable")
    ends, other = ends[order], other[order]
    vertices, starts, counts = np.unique(ends, return_index=True, return_counts=True)
    two = counts == 2
    return np.column_stack([other[starts[two]], vertices[two], other[starts[two] + 1]])


def hinge_stiffnesses(positions, hinges, rigidity: float, pinned=None) -> np.ndarray:
    """(H,) N m per radian: D |e|^2 / (A1 + A2) of each hinge at `positions` (|e| its edge's
    length, A1 and A2 its triangles' areas), the stiffness with which a triangle mesh bent
    into a cylinder of curvature kappa stores a plate's D / 2 kappa^2 per area.

    Measured, not derived: on a quad grid with the hinges of :func:`hinges_of_faces` the
    stored energy is the plate's (Poisson's ratio 0) in every direction
    (tests/test_core_hinges.py); on a mesh of equilateral triangles it is 1.03 times the
    plate's in every direction; on a grid of squares all cut along parallel diagonals
    (a quad mesh triangulated before it reached us), 1 to 3 times by the direction
    (discrete shells are as anisotropic as the mesh). Grinspun et al.'s
    3 |e|^2 / (A1 + A2) is the same law with the constant chosen otherwise.
    """
    p = np.asarray(positions, dtype=np.float64)
    h = np.asarray(hinges, dtype=np.int64).reshape(-1, 4)
    e = p[h[:, 1]] - p[h[:, 0]]
    a1 = 0.5 * np.linalg.norm(np.cross(p[h[:, 2]] - p[h[:, 0]], e), axis=1)
    a2 = 0.5 * np.linalg.norm(np.cross(e, p[h[:, 3]] - p[h[:, 0]]), axis=1)
    if pinned is not None:
        # A triangle whose corners are all pinned is a clamp, not sheet: the hinge stands
        # for the sheet in its other triangle only (as a wire's joint at a clamp stands for
        # half an edge), so a clamped plate bends from its root as plate theory says.
        pinned = np.asarray(pinned, dtype=bool)
        edge_pinned = pinned[h[:, 0]] & pinned[h[:, 1]]
        a1 = np.where(edge_pinned & pinned[h[:, 2]], 0.0, a1)
        a2 = np.where(edge_pinned & pinned[h[:, 3]], 0.0, a2)
    areas = a1 + a2
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(areas > 0, rigidity * np.einsum("ij,ij->i", e, e) / areas, 0.0)
    return k


def wire_stiffnesses(positions, joints, rigidity: float, pinned=None) -> np.ndarray:
    """(J,) N m per radian: EI / l at each joint, l the length of wire it stands for: half
    of each of its two edges, where an edge between two pinned vertices is clamp, not
    wire (so the joint at a clamp stands for half an edge, and a cantilever sags as beam
    theory says: tests/test_core_hinges.py)."""
    p = np.asarray(positions, dtype=np.float64)
    j = np.asarray(joints, dtype=np.int64).reshape(-1, 3)
    halves = [0.5 * np.linalg.norm(p[j[:, k + 1]] - p[j[:, k]], axis=1) for k in (0, 1)]
    if pinned is not None:
        pinned = np.asarray(pinned, dtype=bool)
        halves = [np.where(pinned[j[:, k]] & pinned[j[:, k + 1]], 0.0, half) for k, half in enumerate(halves)]
    l = halves[0] + halves[1]
    with np.errstate(divide="ignore"):
        return np.where(l > 0, rigidity / l, 0.0)
