"""Mass–spring systems with rigid rods, integrated by a sparse generalized-α DAE solver.

The seed API (``MassSpringSystem3d``, ``Mass``, ``Fix``, ``Spring``, ``Chain``,
``DistanceConstraint``) and the laws on more vertices (``WireBending``, ``HingeBending``) come from the
compiled core; :func:`from_arrays` builds a system
from numpy arrays in one call for big meshes.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._core import (  # noqa: F401  (re-exported API)
    FIX,
    INTEGRATOR_TABLE,
    MASS,
    MULTIGRID_MIN_MASSES,
    MULTIGRID_MIN_MASSES_CONTROLLED,
    SELF_LEAST_DISTANCE_OF_EDGE,
    Chain,
    Connector,
    DistanceConstraint,
    Fix,
    HingeBending,
    Mass,
    MassSpringSystem2d,
    MassSpringSystem3d,
    SimulationError,
    Spring,
    WireBending,
    closest_parts,
    get_num_threads,
    set_num_threads,
    usable_cores,
)

LINEAR_SOLVERS = ("auto", "direct", "multigrid")


class IntegratorInfo(NamedTuple):
    """One row of the core's integrator table (native/time/integrators.hpp)."""

    name: str  # for set_integrator
    label: str  # for a user interface
    description: str  # one line
    explicit: bool  # explicit methods cannot enforce DistanceConstraints
    order: int  # order of accuracy


INTEGRATOR_INFO = tuple(IntegratorInfo(*row) for row in INTEGRATOR_TABLE)
INTEGRATORS = tuple(info.name for info in INTEGRATOR_INFO)

__all__ = [
    "FIX", "MASS", "MULTIGRID_MIN_MASSES", "MULTIGRID_MIN_MASSES_CONTROLLED", "SELF_LEAST_DISTANCE_OF_EDGE", "Chain", "Connector", "DistanceConstraint", "Fix", "Mass",
    "MassSpringSystem2d", "MassSpringSystem3d", "SimulationError", "Spring", "WireBending",
    "HingeBending", "INTEGRATORS", "INTEGRATOR_INFO", "IntegratorInfo", "LINEAR_SOLVERS", "closest_parts", "from_arrays", "median", "scattered_vertex_order",
    "get_num_threads", "set_num_threads", "usable_cores",
]

NUM_THREADS_VARIABLE = "MASS_SPRING_NUM_THREADS"


def _threads_from_environment() -> None:
    """Workers from MASS_SPRING_NUM_THREADS (scripts, render farms), if it is set. A bad
    value is named on stderr and left out, not raised: it must not stop the add-on from
    loading inside Blender."""
    import os
    import sys

    text = os.environ.get(NUM_THREADS_VARIABLE, "").strip()
    if not text:
        return
    try:
        set_num_threads(int(text))
    except ValueError:
        print(f"mass_spring: {NUM_THREADS_VARIABLE}={text!r} ignored: expected a whole number "
              f"of workers from 1 to 1024; using all {usable_cores()} usable cores",
              file=sys.stderr)


_threads_from_environment()


def _per_item(value, count: int, name: str, default: float | None = None) -> np.ndarray:
    """A scalar or a length-`count` array as a float array of that length."""
    if value is None:
        value = default
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    if arr.shape != (count,):
        raise ValueError(f"{name}: expected a scalar or {count} values, got shape {arr.shape}")
    return arr


def _pairs(value, name: str) -> np.ndarray:
    """Vertex pairs as a (count, 2) int64 array; the core checks the indices."""
    if value is None:
        return np.zeros((0, 2), dtype=np.int64)
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: expected an integer array of shape (count, 2)")
    _refuse_wrapping_indices(arr, name)
    return np.ascontiguousarray(arr, dtype=np.int64)


def from_arrays(positions, masses, fixed=None, velocities=None, springs=None,
                stiffness=0.0, rest_length=None, damping=0.0, rope=None,
                constraints=None, constraint_length=None, gravity=None, faces=None,
                self_collision_distance=0.0, self_friction=0.0, locality_order=False):
    """Build a 2-D or 3-D system from vertex and edge arrays in one call.

    positions (N, D); masses scalar or (N,) (ignored for fixed vertices); fixed (N,) bool
    mask or an index array; velocities (N, D); springs (S, 2) vertex pairs with stiffness,
    rest_length (None: the current distance), damping and rope (tension only) per spring or
    scalar; constraints (C, 2) with constraint_length (None: the current distance);
    gravity (D,). Springs and constraints between two fixed vertices are dropped (they
    move no mass); a NaN rest or constraint length is the distance of its ends. Errors name
    the offending vertex or edge.

    Self-collision (3-D): with self_collision_distance > 0 (m; scalar or (N,)), the faces
    (polygons as vertex index lists, triangulated by :func:`triangles_of_faces`) and the
    springs' and constraints' edges keep that distance apart wherever they share no vertex,
    with Coulomb friction self_friction (scalar or (N,)) among them
    (System.set_self_contact).

    The masses are numbered in vertex order, leaving out the fixed vertices (``positions``
    and ``velocities`` of the system list them so). With locality_order, along a
    space-filling curve through the positions instead: faster for meshes whose vertex
    order is scattered, with ``vertex_positions()`` still in vertex order;
    ``locality_order="auto"`` does so only where :func:`scattered_vertex_order` finds the
    springs' and constraints' vertex order scattered.

    This function converts shapes and types; the core checks every value, in one place
    (System::add_*), and names the vertex or edge as these arrays number them.
    """
    pos = np.asarray(positions, dtype=float)
    if pos.ndim != 2 or pos.shape[1] not in (2, 3):
        raise ValueError(f"positions: expected shape (N, 2) or (N, 3), got {pos.shape}")
    n, dim = pos.shape

    fixed_mask = np.zeros(n, dtype=bool)
    if fixed is not None:
        f = np.asarray(fixed)
        if f.dtype == bool:
            if f.shape != (n,):
                raise ValueError(f"fixed: a boolean mask must have {n} entries")
            fixed_mask = f.copy()
        elif f.size:
            if not np.issubdtype(f.dtype, np.integer) or f.min() < 0 or f.max() >= n:
                raise ValueError("fixed: expected a boolean mask or vertex indices in range")
            if np.unique(f, return_index=True)[0].size != f.size:  # no numpy.ma: unique_rows
                # An integer 0/1 mask would be read as the indices 0 and 1.
                raise ValueError("fixed: vertex indices must be unique; for a mask pass a "
                                 "boolean array (e.g. fixed.astype(bool))")
            fixed_mask[f.ravel()] = True

    m = _per_item(masses, n, "masses")
    vel = np.zeros_like(pos) if velocities is None else np.asarray(velocities, dtype=float)
    if vel.shape != pos.shape:
        raise ValueError(f"velocities: expected shape {pos.shape}, got {vel.shape}")

    sp = _pairs(springs, "spring")
    ns = len(sp)
    k = _per_item(stiffness, ns, "stiffness")
    rest = _per_item(rest_length, ns, "rest_length", default=np.nan)
    c = _per_item(damping, ns, "damping")
    rope_mask = np.zeros(ns, dtype=bool) if rope is None else np.asarray(rope, dtype=bool)
    if rope_mask.ndim == 0:  # one flag for every spring, as the docstring says
        rope_mask = np.full(ns, bool(rope_mask))
    if rope_mask.shape != (ns,):
        raise ValueError(f"rope: expected one flag or {ns} flags, got shape {rope_mask.shape}")

    cp = _pairs(constraints, "constraint")
    clen = _per_item(constraint_length, len(cp), "constraint_length", default=np.nan)

    if isinstance(locality_order, str):
        if locality_order != "auto":
            raise ValueError(f"locality_order: expected True, False or 'auto', got {locality_order!r}")
        locality_order = scattered_vertex_order(np.concatenate([sp, cp]).reshape(-1, 2), n)
    cls = MassSpringSystem3d if dim == 3 else MassSpringSystem2d
    system = cls._build_from_arrays(pos, m, fixed_mask, vel, sp, k, rest, c, rope_mask, cp,
                                    clen, bool(locality_order))
    if gravity is not None:
        system.gravity = list(np.asarray(gravity, dtype=float).ravel())
    if np.any(np.asarray(self_collision_distance, dtype=float) != 0):
        triangles = triangles_of_faces([] if faces is None else faces)
        system.set_self_contact(triangles, np.concatenate([sp, cp]).reshape(-1, 2),
                                _per_item(self_collision_distance, n, "self_collision_distance"),
                                _per_item(self_friction, n, "self_friction"))
    return system


def median(values) -> float:
    """The median of `values`, as ``np.median`` gives it (NaN for none), without importing
    ``numpy.ma``: np.median does on its first call, which took 13 ms of a Blender session's
    first bake (docs/performance.md, "The bake"; tests/test_structure.py,
    test_median_is_numpys)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        return float("nan")
    middle = x.size // 2
    if x.size % 2:
        return float(np.partition(x, middle)[middle])
    lower, upper = np.partition(x, (middle - 1, middle))[middle - 1:middle + 1]
    return float(0.5 * (lower + upper))


def scattered_vertex_order(edges, vertex_count) -> bool:
    """Whether a mesh's vertex order is scattered: the median index span of its edges
    exceeds 4 sqrt(vertex_count). A grid in row order spans 1 or a row (sqrt of its vertex
    count on a square sheet), a torus or a subdivided mesh little more; a shuffled mesh
    spans about 0.3 of its vertex count. Where it is scattered, masses in locality order
    (:func:`from_arrays`) bake faster; on a big grid a Z curve was slower than its row
    order, so grids keep theirs (docs/performance.md, "Masses in locality order";
    test_auto_locality_order_numbers_only_a_scattered_vertex_order_along_space)."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if len(e) == 0 or vertex_count < 2:
        return False
    return bool(median(np.abs(e[:, 0] - e[:, 1])) > 4.0 * np.sqrt(vertex_count))


# The array API is also reachable from the classes, as documented.
MassSpringSystem2d.from_arrays = staticmethod(from_arrays)
MassSpringSystem3d.from_arrays = staticmethod(from_arrays)


# Structures (vertices, edges, marks) and the one function that turns them into systems.
from . import presets  # noqa: E402
from .structure import (  # noqa: E402
    Structure, bending_pairs, between_pins, build_system, hinges_of_faces, hinges_of_triangles,
    quad_diagonals, triangles_of_faces, wire_joints)
from .structure import _refuse_wrapping_indices  # noqa: E402

__all__ += ["Structure", "bending_pairs", "between_pins", "build_system", "hinges_of_faces",
            "hinges_of_triangles", "presets", "quad_diagonals", "triangles_of_faces", "wire_joints"]
