"""The seeds' structures as :class:`~mass_spring.structure.Structure` geometry, no Blender.

Z is up, gravity points along -Z, and the planar structures stand in the XZ plane. Each
function returns a Structure in its own coordinates (the first pin, or the centre, at the
origin); scripts/scenes.py turns one into a Blender mesh, the add-on's Add menu too, and
``mass_spring.build_system(structure)`` into a system.

    import mass_spring as ms
    system = ms.build_system(ms.presets.chain(n=10))

Angles are in degrees from straight down. Counts and lengths are checked before anything
is built: a count that is no whole number or below the structure's least, or a length that
is not positive and finite, raises ValueError naming the parameter and its valid range.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .structure import Structure, bending_pairs, between_pins, hinges_of_faces, quad_diagonals


def polar_xz(length: float, angle_deg: float, origin=(0.0, 0.0, 0.0)) -> tuple:
    """The point `length` from `origin`, `angle_deg` from straight down, in the XZ plane."""
    a = math.radians(angle_deg)
    return (origin[0] + length * math.sin(a), origin[1], origin[2] - length * math.cos(a))


def _count(preset: str, name: str, value, least: int) -> int:
    """`value` as a whole number of at least `least`; ValueError naming `preset`'s parameter
    `name` otherwise (no silent rounding: 3.7 columns are no bridge)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or number < least:
        raise ValueError(f"{preset} {name} must be a whole number of at least {least}, "
                         f"got {value!r}")
    return number


def _length(preset: str, name: str, value) -> float:
    """`value` as a positive finite length (m); ValueError naming the parameter otherwise
    (a zero spacing puts vertices on each other, which no spring can pull apart)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{preset} {name} must be positive and finite (metres), got {value!r}")
    return number


def _marks(edges, marked) -> np.ndarray:
    """Mask of `edges` that are in `marked` (pairs in either order)."""
    keys = {(min(a, b), max(a, b)) for a, b in marked}
    return np.array([(min(a, b), max(a, b)) in keys for a, b in edges], dtype=bool)


def chain(n=10, spacing=0.2, angle=0.0, mass=0.05, stiffness=400.0, damping=0.0) -> Structure:
    """Masses in a row under a pin, joined by springs (the seeds' first example).

    Vertex 0 is the pin at the origin, vertices 1..n the masses, `spacing` apart (the
    springs' rest length), in a straight line `angle` degrees from straight down. Every
    vertex weighs `mass`. n >= 1.
    """
    n, spacing = _count("chain", "n", n, 1), _length("chain", "spacing", spacing)
    positions = [polar_xz(i * spacing, angle) for i in range(n + 1)]
    return Structure(positions=positions, edges=[(i, i + 1) for i in range(n)],
                     pinned=np.arange(n + 1) == 0, total_mass=mass * (n + 1),
                     stiffness=stiffness, damping=damping)


def pendulum(length=1.5, angle=90.0, mass=1.0) -> Structure:
    """One rod from a pin at the origin to a mass `angle` degrees from straight down."""
    _length("pendulum", "length", length)
    return Structure(positions=[(0.0, 0.0, 0.0), polar_xz(length, angle)], edges=[(0, 1)],
                     pinned=[True, False], rigid=[True], total_mass=2.0 * mass)


def double_pendulum(lengths=(0.8, 0.8), angles=(120.0, 150.0), mass=1.0) -> Structure:
    """Two rods in series from a pin at the origin: chaotic motion."""
    for rod in lengths:
        _length("double_pendulum", "lengths", rod)
    p1 = polar_xz(lengths[0], angles[0])
    p2 = polar_xz(lengths[1], angles[1], origin=p1)
    return Structure(positions=[(0.0, 0.0, 0.0), p1, p2], edges=[(0, 1), (1, 2)],
                     pinned=[True, False, False], rigid=[True, True], total_mass=3.0 * mass)


def bridge(width=13, height=2, spacing=0.25, cross=True, mass=0.05, stiffness=3000.0,
           damping=0.5, pins="ends") -> Structure:
    """A `width` × `height` lattice with horizontal, vertical and diagonal springs.

    Vertex (i, j), column i from the left and row j from the top, has index j * width + i
    and sits at (i, 0, -j) * spacing. `cross` adds the second diagonal of each cell. `pins`
    is "ends" (the whole first and last columns) or "corners" (the two top corners, as in
    the seeds' braced bridge). Edges between two pins are left out of the lattice: they
    would move nothing.
    """
    W, H = _count("bridge", "width", width, 3), _count("bridge", "height", height, 1)
    spacing = _length("bridge", "spacing", spacing)
    if pins not in ("ends", "corners"):
        raise ValueError(f"bridge pins: expected 'ends' or 'corners', got {pins!r}")

    def idx(i, j):
        return j * W + i

    positions = [(i * spacing, 0.0, -j * spacing) for j in range(H) for i in range(W)]
    edges = []
    for j in range(H):
        for i in range(W):
            if i + 1 < W:
                edges.append((idx(i, j), idx(i + 1, j)))
            if j + 1 < H:
                edges.append((idx(i, j), idx(i, j + 1)))
            if i + 1 < W and j + 1 < H:
                edges.append((idx(i, j), idx(i + 1, j + 1)))
                if cross:
                    edges.append((idx(i + 1, j), idx(i, j + 1)))
    pinned = np.zeros(W * H, dtype=bool)
    rows = range(H) if pins == "ends" else (0,)
    pinned[[idx(i, j) for j in rows for i in (0, W - 1)]] = True
    edges = np.array(edges, dtype=np.int64)
    edges = edges[~between_pins(edges, pinned)]
    return Structure(positions=positions, edges=edges, pinned=pinned, total_mass=mass * W * H,
                     stiffness=stiffness, damping=damping)


def spinning_ring(n=16, radius=0.8, spin=6.0, hub=True, mass=0.05, stiffness=800.0,
                  damping=0.0) -> Structure:
    """The seeds' "Kreisel" (spinning top): a ring of `n` masses joined by springs to their
    first and second neighbours, spinning at `spin` rad/s about the Y axis through its
    centre (the origin).

    With `hub`, a pinned centre vertex (the last one) holds the ring by spoke springs, like
    a wheel on an axle; without it the ring flies free (simulate it without gravity).
    """
    # With fewer than 5 masses the second-neighbour springs repeat the first-neighbour ones.
    n = _count("spinning_ring", "n", n, 5)
    radius = _length("spinning_ring", "radius", radius)
    positions = [(radius * math.cos(2 * math.pi * i / n), 0.0,
                  radius * math.sin(2 * math.pi * i / n)) for i in range(n)]
    edges = [(i, (i + 1) % n) for i in range(n)]
    edges += [(i, (i + 2) % n) for i in range(n)]  # second neighbours: the rim resists bending
    if hub:
        positions.append((0.0, 0.0, 0.0))
        edges += [(i, n) for i in range(n)]
    count = len(positions)
    positions = np.array(positions)
    velocities = np.cross(np.array([0.0, spin, 0.0]), positions)
    return Structure(positions=positions, edges=edges, pinned=np.arange(count) == n,
                     total_mass=mass * count, stiffness=stiffness, damping=damping,
                     velocities=velocities)


def crane(levels=6, level_height=0.45, side=0.4, jib_segments=5, jib_spacing=0.4,
          jib_height=0.35, rope_segments=4, rope_length=1.2, rope_angle=30.0, mass=0.05,
          load_mass=1.0, stiffness=20000.0, damping=2.0) -> Structure:
    """A tower crane: a truss of rods (the tower's corner posts and rings, the jib's chords
    and rungs) braced by stiff diagonal springs, with a load hanging on a rope from the jib
    tip, released `rope_angle` degrees from vertical so it swings.

    The tower stands on the origin; its four base vertices are pinned. Every vertex weighs
    `mass`, the load (the last vertex) `load_mass`.
    """
    levels = _count("crane", "levels", levels, 1)
    jib_segments = _count("crane", "jib_segments", jib_segments, 1)
    rope_segments = _count("crane", "rope_segments", rope_segments, 1)
    for name, value in (("level_height", level_height), ("side", side),
                        ("jib_spacing", jib_spacing), ("jib_height", jib_height),
                        ("rope_length", rope_length)):
        _length("crane", name, value)
    a, h = side / 2.0, level_height
    verts, edges, rigid, rope = [], [], [], []

    def vert(p):
        verts.append(tuple(p))
        return len(verts) - 1

    corners = [(-a, -a), (a, -a), (a, a), (-a, a)]
    tower = [[vert((x, y, k * h)) for (x, y) in corners] for k in range(levels + 1)]
    for k in range(levels + 1):
        ring = tower[k]
        for c in range(4):
            if k > 0:
                rigid.append((ring[c], ring[(c + 1) % 4]))                  # ring
                rigid.append((tower[k - 1][c], ring[c]))                    # corner post
                edges.append((tower[k - 1][c], ring[(c + 1) % 4]))          # face diagonal
        if k > 0 and k % 2 == 0:
            edges.append((ring[0], ring[2]))                                # plan diagonal
    top = tower[-1]
    z_top = levels * h

    # Jib: a triangular truss along +X from the tower top: two lower chords (y = -a, +a),
    # one upper chord (y = 0) above them. The rods of each cross-section triangle and the
    # chords are rigid, the face diagonals springs (rods alone would fold at every station).
    jib_lo, jib_hi, jib_up = [top[1]], [top[2]], []
    for j in range(jib_segments + 1):
        x = a + j * jib_spacing
        if j > 0:
            jib_lo.append(vert((x, -a, z_top)))
            jib_hi.append(vert((x, a, z_top)))
            rigid += [(jib_lo[j - 1], jib_lo[j]), (jib_hi[j - 1], jib_hi[j]),
                      (jib_lo[j], jib_hi[j])]
        jib_up.append(vert((x, 0.0, z_top + jib_height * (1.0 - 0.5 * j / jib_segments))))
        rigid += [(jib_up[j], jib_lo[j]), (jib_up[j], jib_hi[j])]
        if j > 0:
            rigid.append((jib_up[j - 1], jib_up[j]))
            edges += [(jib_lo[j - 1], jib_hi[j]), (jib_lo[j - 1], jib_up[j]),
                      (jib_hi[j - 1], jib_up[j])]
    # Mast above the tower holding the jib up with tie springs.
    mast = vert((0.0, 0.0, z_top + 0.9))
    for c in top:
        rigid.append((c, mast))
    for j in (0, jib_segments // 2, jib_segments):
        edges.append((mast, jib_up[j]))
    # Counter-jib stub on the other side, tied to the mast.
    back = [vert((-a - 0.5, -a, z_top)), vert((-a - 0.5, a, z_top))]
    rigid += [(top[0], back[0]), (top[3], back[1]), (back[0], back[1])]
    edges += [(top[3], back[0]), (mast, back[0]), (mast, back[1])]

    # Rope from a hook ahead of the jib's last rung (not on the rung: three rods in a
    # straight line would make one constraint redundant and the system singular).
    tip = vert((a + (jib_segments + 0.5) * jib_spacing, 0.0, z_top))
    rigid += [(tip, jib_lo[-1]), (tip, jib_hi[-1]), (tip, jib_up[-1])]
    prev = tip
    seg = rope_length / rope_segments
    for r in range(1, rope_segments + 1):
        cur = vert(polar_xz(r * seg, rope_angle, origin=verts[tip]))
        rope.append((prev, cur))
        prev = cur
    load = prev

    edges += rigid + rope
    masses = np.full(len(verts), float(mass))
    masses[load] = load_mass
    pinned = np.zeros(len(verts), dtype=bool)
    pinned[tower[0]] = True
    return Structure(positions=verts, edges=edges, pinned=pinned,
                     rigid=_marks(edges, rigid), rope=_marks(edges, rope), masses=masses,
                     stiffness=stiffness, damping=damping)


def cloth(nx=5, ny=None, spacing=0.25, plane="XY", pins=(), total_mass=1.0,
          stiffness=1000.0, shear_stiffness=0.0, damping=0.01,
          bending_stiffness=0.0, bending_rigidity=0.0) -> Structure:
    """An `nx` × `ny` grid of vertices `spacing` apart with quad faces: a sheet of cloth.

    Vertex (i, j) has index j * nx + i and sits at (i, j, 0) * spacing ("XY", lying flat)
    or (i, 0, j) * spacing ("XZ", hanging). The edges are the rows' (i, j)-(i+1, j), then
    the columns' (i, j)-(i, j+1); face (i, j) is (a, a+1, a+nx+1, a+nx) with a = j*nx + i,
    its diagonals are the shear pairs, and the bending pairs join every vertex's two
    neighbours along a grid line (linear bending, `bending_stiffness` in N/m); with
    `bending_rigidity` D > 0 (N m), its hinges (angular bending) come from
    :func:`hinges_of_faces` (none without: they cost a 33² sheet 11 ms to find).
    `pins` are vertex indices.
    """
    nx = _count("cloth", "nx", nx, 2)
    ny = nx if ny is None else _count("cloth", "ny", ny, 2)
    spacing = _length("cloth", "spacing", spacing)
    if plane not in ("XY", "XZ"):
        raise ValueError(f"cloth plane: expected 'XY' or 'XZ', got {plane!r}")
    j, i = np.divmod(np.arange(nx * ny), nx)
    zero = np.zeros(nx * ny)
    across, up = i * spacing, j * spacing
    positions = np.column_stack([across, up, zero] if plane == "XY" else [across, zero, up])
    idx = np.arange(nx * ny).reshape(ny, nx)
    edges = np.vstack([np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()]),
                       np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])])
    a = idx[:-1, :-1].ravel()
    faces = np.column_stack([a, a + 1, a + nx + 1, a + nx])
    pins = np.asarray(pins, dtype=np.int64).ravel()
    outside = pins[(pins < 0) | (pins >= nx * ny)]
    if outside.size:
        raise ValueError(f"cloth pins must be vertex indices from 0 to {nx * ny - 1}, got "
                         f"{int(outside[0])}")
    pinned = np.zeros(nx * ny, dtype=bool)
    pinned[pins] = True
    hinges, weights = hinges_of_faces(faces) if bending_rigidity > 0 else (np.zeros((0, 4), np.int64), None)
    return Structure(positions=positions, edges=edges, faces=faces, pinned=pinned,
                     total_mass=total_mass, stiffness=stiffness, damping=damping,
                     shear_pairs=quad_diagonals(faces), shear_stiffness=shear_stiffness,
                     bending_pairs=bending_pairs(faces), bending_stiffness=bending_stiffness,
                     hinges=hinges, hinge_weights=weights, hinge_rigidity=bending_rigidity)


PRESETS = {
    "chain": chain,
    "pendulum": pendulum,
    "double_pendulum": double_pendulum,
    "bridge": bridge,
    "spinning_ring": spinning_ring,
    "crane": crane,
    "cloth": cloth,
}
