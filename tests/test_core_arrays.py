"""The array API builds the same system as the seed API, in one call, with named errors."""
import numpy as np
import pytest

import mass_spring as ms
from mass_spring import presets


def lattice():
    pos = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, -1], [1, 0, -1], [2, 0, -1.0]])
    fixed = np.array([True, False, True, False, False, False])
    springs = np.array([[0, 1], [1, 2], [0, 3], [1, 4], [2, 5], [3, 4], [4, 5], [0, 2]])
    rods = np.array([[3, 5]])
    return pos, fixed, springs, rods


def test_from_arrays_equals_the_object_api():
    pos, fixed, springs, rods = lattice()
    masses = np.array([1.0, 0.5, 1.0, 0.7, 0.8, 0.9])
    k = np.linspace(100, 200, len(springs))
    a = ms.from_arrays(pos, masses, fixed=fixed, springs=springs, stiffness=k, damping=0.3,
                       constraints=rods, gravity=[0, 0, -9.81])

    b = ms.MassSpringSystem3d()
    b.gravity = [0, 0, -9.81]
    conn = {}
    for i in np.flatnonzero(~fixed):
        conn[i] = b.add(ms.Mass(masses[i], pos[i].tolist()))
    for i in np.flatnonzero(fixed):
        conn[i] = b.add(ms.Fix(pos[i].tolist()))
    for (i, j), kk in zip(springs, k):
        if fixed[i] and fixed[j]:
            continue
        b.add(ms.Spring(float(np.linalg.norm(pos[j] - pos[i])), kk, (conn[i], conn[j]), damping=0.3))
    b.add(ms.DistanceConstraint(2.0, (conn[3], conn[5])))

    assert len(a.springs) == len(springs) - 1  # the spring between two fixes is dropped
    a.simulate(0.5, 50)
    b.simulate(0.5, 50)
    np.testing.assert_allclose(a.positions, b.positions, atol=1e-12)
    # vertex order is kept: fixes where they were, masses moved
    v = a.vertex_positions()
    np.testing.assert_array_equal(v[fixed], pos[fixed])
    np.testing.assert_allclose(v[~fixed], a.positions, atol=0)
    np.testing.assert_array_equal(a.fixed_vertices, [0, 2])
    np.testing.assert_array_equal(a.mass_vertices, [1, 3, 4, 5])
    assert np.all(a.vertex_velocities()[fixed] == 0)


def test_index_array_for_fixed_and_2d():
    pos = np.array([[0.0, 0.0], [1.0, 0.0]])
    s = ms.from_arrays(pos, 1.0, fixed=[0], springs=[[0, 1]], stiffness=10.0,
                       rest_length=0.5, gravity=[0, -1])
    assert isinstance(s, ms.MassSpringSystem2d)
    assert s.springs[0].length == 0.5
    s.simulate(0.1, 10)
    assert s.vertex_positions().shape == (2, 2)


def test_an_integer_zero_one_mask_is_refused_not_read_as_indices():
    # [1, 0, 0] as indices would fix vertices 0 and 1, the opposite of the mask it looks
    # like; unique indices and boolean masks keep working.
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="unique.*boolean"):
        ms.from_arrays(pos, 1.0, fixed=np.array([1, 0, 0]))
    np.testing.assert_array_equal(ms.from_arrays(pos, 1.0, fixed=[2, 0]).fixed_vertices, [0, 2])
    mask = ms.from_arrays(pos, 1.0, fixed=np.array([1, 0, 0]).astype(bool))
    np.testing.assert_array_equal(mask.fixed_vertices, [0])


def test_moving_anchor_through_fix_positions():
    pos = np.array([[0, 0, 0], [0, 0, -1.0]])
    s = ms.MassSpringSystem3d.from_arrays(pos, 1.0, fixed=[True, False],
                                          constraints=[[0, 1]], gravity=[0, 0, -9.81])
    for n in range(1, 25):
        s.fix_positions = np.array([[0.0, 0.0, 0.05 * n]])  # lift the anchor
        s.simulate(1 / 24, 4)
        assert s.max_constraint_violation() < 1e-9
    assert s.vertex_positions()[1, 2] == pytest.approx(0.05 * 24 - 1.0, abs=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    (dict(masses=[1.0, -2.0, 1.0]), r"vertex 1: mass must be positive"),
    (dict(springs=[[0, 7]]), r"spring 0: vertex index 7 out of range \(there are 3 vertices"),
    (dict(springs=[[1, 1]]), r"spring 0: both ends are vertex 1"),
    (dict(springs=[[0, 1], [1, 2]], stiffness=[1.0, -1.0]), r"spring 1 \(vertices \[1, 2\]\): stiffness"),
    (dict(constraints=[[0, 1]], constraint_length=[0.0]), r"constraint 0 \(vertices \[0, 1\]\): length"),
    (dict(positions=[[0, 0, 0], [np.nan, 0, 0], [2, 0, 0]]), r"vertex 1: position contains NaN"),
])
def test_array_errors_name_the_vertex_or_edge(kwargs, message):
    args = dict(positions=[[0, 0, 0], [1, 0, 0], [2, 0, 0]], masses=[1.0, 1.0, 1.0])
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ms.from_arrays(**args)


def test_big_mesh_builds_in_one_call_quickly():
    n = 200
    sheet = presets.cloth(n, n, spacing=1.0)
    edges = sheet.edges
    s = ms.from_arrays(sheet.positions, 0.01, fixed=np.arange(n), springs=edges,
                       stiffness=100.0)
    assert len(s.masses) == n * n - n and len(s.springs) == len(edges) - (n - 1)


def _raw_arrays(n=3):
    """Arguments of the core's _build_from_arrays, bypassing from_arrays' own checks."""
    pos = np.array([[float(i), 0.0, 0.0] for i in range(n)])
    return dict(positions=pos, masses=np.ones(n), fixed=np.zeros(n, bool),
                velocities=np.zeros_like(pos), springs=np.array([[0, 1]], np.int64),
                stiffness=np.array([10.0]), rest=np.array([1.0]), damping=np.array([0.0]),
                rope=np.array([False]), constraints=np.zeros((0, 2), np.int64),
                clength=np.zeros(0), locality_order=False)


def _build_raw(**changes):
    args = _raw_arrays()
    args.update(changes)
    return ms.MassSpringSystem3d._build_from_arrays(*args.values())


def test_raw_build_matches_from_arrays():
    s = _build_raw()
    assert (len(s.masses), len(s.springs)) == (3, 1)
    assert s.springs[0].c2.nr == 1


@pytest.mark.parametrize("index", [3, -1, 10**12])
def test_core_refuses_a_vertex_index_out_of_range(index):
    """The core checks indices itself: a caller that bypasses from_arrays' checks gets a
    ValueError, never an out-of-bounds read."""
    with pytest.raises(ValueError, match=f"spring 0: vertex index {index} out of range"):
        _build_raw(springs=np.array([[0, index]], np.int64))
    with pytest.raises(ValueError, match=f"constraint 0: vertex index {index} out of range"):
        _build_raw(constraints=np.array([[index, 1]], np.int64), clength=np.array([1.0]))


@pytest.mark.parametrize("name, value, message", [
    ("positions", np.zeros((2, 3)), "positions: expected 9 values, got 6"),
    ("fixed", np.zeros(2, bool), "fixed: expected 3 values, got 2"),
    ("velocities", np.zeros((4, 3)), "velocities: expected 9 values, got 12"),
    ("springs", np.array([[0, 1], [1, 2]], np.int64), "springs: expected 2 values, got 4"),
    ("rest", np.ones(2), "rest_length: expected 1 values, got 2"),
    ("damping", np.ones(0), "damping: expected 1 values, got 0"),
    ("rope", np.zeros(3, bool), "rope: expected 1 values, got 3"),
    ("clength", np.ones(1), "constraints: expected 2 values, got 0"),
])
def test_core_refuses_arrays_whose_sizes_disagree(name, value, message):
    with pytest.raises(ValueError, match=message):
        _build_raw(**{name: value})


def test_core_validates_the_values_it_builds():
    with pytest.raises(ValueError, match=r"vertex 1: mass must be positive, got -1 \(give every vertex"):
        _build_raw(masses=np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match=r"spring 0 \(vertices \[0, 1\]\): stiffness must be >= 0"):
        _build_raw(stiffness=np.array([-1.0]))
    with pytest.raises(ValueError, match="spring 0: both ends are vertex 1"):
        _build_raw(springs=np.array([[1, 1]], np.int64))
    with pytest.raises(ValueError, match=r"vertex 2: velocity contains NaN"):
        _build_raw(velocities=np.array([[0, 0, 0], [0, 0, 0], [np.nan, 0, 0]]))
    with pytest.raises(ValueError, match=r"constraint 0 \(vertices \[1, 2\]\): length must be positive"):
        _build_raw(constraints=np.array([[1, 2]], np.int64), clength=np.array([-1.0]))


def test_a_nan_length_is_the_distance_of_the_ends():
    s = ms.from_arrays([[0, 0, 0], [1, 0, 0], [3, 0, 0]], 1.0, springs=[[0, 1], [1, 2]],
                       stiffness=1.0, rest_length=[np.nan, 1.5], constraints=[[0, 2]])
    assert [sp.length for sp in s.springs] == [1.0, 1.5]
    assert s.constraints[0].length == 3.0


def test_masses_and_fixes_added_after_from_arrays_are_the_next_vertices():
    # Before: missing from vertex_positions() (the vertex list was the arrays' alone).
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    s = ms.from_arrays(pos, 1.0, fixed=[0], springs=[[0, 1]], stiffness=10.0)
    m = s.add(ms.Mass(2.0, [2.0, 0.0, 0.0]))
    f = s.add(ms.Fix([3.0, 0.0, 0.0]))
    s.add(ms.Spring(1.0, 10.0, [m, f]))
    np.testing.assert_array_equal(s.vertex_positions(),
                                  [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]])
    np.testing.assert_array_equal(s.fixed_vertices, [0, 3])
    np.testing.assert_array_equal(s.mass_vertices, [1, 2])
    s.simulate(0.1, 10)
    assert s.vertex_positions().shape == (4, 3)
    assert s.vertex_velocities().shape == (4, 3)


def test_one_rope_flag_stands_for_every_spring():
    """from_arrays documents rope as "per spring or scalar"; a scalar used to be refused
    ("rope: expected 2 flags"), found by tests/fuzz_core.py. A slack rope pulls no mass up."""
    line = [[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [1.0, 0.0, 0.0]]
    for rope in (True, np.True_, 1):
        mss = ms.from_arrays(line, 1.0, fixed=[True, False, False], springs=[(0, 1), (1, 2)],
                             stiffness=100.0, rest_length=1.0, rope=rope, gravity=[0, 0, 0])
        mss.simulate(0.1, 10)  # each link is at half its length: slack, no force at all
        np.testing.assert_array_equal(mss.positions, np.array(line[1:]))
    with pytest.raises(ValueError, match=r"rope: expected one flag or 2 flags, got shape \(3,\)"):
        ms.from_arrays(line, 1.0, springs=[(0, 1), (1, 2)], rope=[True, False, True])


def test_locality_order_numbers_the_masses_along_space_and_keeps_vertex_order_outside():
    """With locality_order the masses are numbered along a Z-order curve through the
    positions, whatever the vertex order: consecutive masses are near each other (on a
    sheet whose vertices are shuffled, as modelled meshes' often are), the fixes keep
    vertex order, vertex_positions() stays in vertex order and the motion is the plain
    build's (up to the round-off of sums taken in another order), and messages still name
    vertices as the arrays number them."""
    n = 17
    sheet = ms.presets.cloth(n, n, spacing=1.0 / (n - 1), pins=[0, n - 1], total_mass=1.0, stiffness=500.0)
    perm = np.random.default_rng(5).permutation(n * n)  # vertex i of the grid is vertex perm[i]
    pos = np.empty_like(sheet.positions)
    pos[perm] = sheet.positions
    fixed = np.zeros(n * n, bool)
    fixed[perm[[0, n - 1]]] = True
    springs = perm[np.asarray(sheet.edges)]
    runs = {}
    for local in (False, True):
        mss = ms.from_arrays(pos, 1.0 / (n * n), fixed=fixed, springs=springs, stiffness=500.0,
                             gravity=[0, 0, -9.81], locality_order=local)
        order = np.asarray(mss.mass_vertices)
        assert sorted(order) == sorted(np.flatnonzero(~fixed))
        np.testing.assert_array_equal(mss.positions, pos[order])
        np.testing.assert_array_equal(mss.fixed_vertices, np.flatnonzero(fixed))
        runs[local] = (order, mss)
    plain, local = runs[False][0], runs[True][0]
    step = lambda order: np.linalg.norm(np.diff(pos[order], axis=0), axis=1).mean()  # noqa: E731
    # within two grid spacings on average (a Z curve jumps between its quadrants), where
    # the shuffled vertex order jumps across the sheet
    assert step(local) < 2.0 / (n - 1) and step(plain) > 0.3
    for _, mss in runs.values():  # fixed steps, Newton converged: only round-off differs
        mss.tolerance, mss.newton_tol = 0.0, 1e-12
        mss.simulate(0.5, 100)
    np.testing.assert_allclose(runs[True][1].vertex_positions(), runs[False][1].vertex_positions(), atol=1e-9)
    masses = np.full(n * n, 0.01)
    masses[perm[40]] = -1.0
    with pytest.raises(ValueError, match=f"vertex {perm[40]}\\b"):
        ms.from_arrays(pos, masses, fixed=fixed, springs=springs, stiffness=500.0, locality_order=True)


def test_auto_locality_order_numbers_only_a_scattered_vertex_order_along_space():
    """locality_order="auto" (the add-on's) keeps a grid's row order, which was faster than a
    Z curve on big grids, and takes locality order for the same sheet with its vertices
    shuffled (scattered_vertex_order)."""
    n = 33
    sheet = ms.presets.cloth(n, n, spacing=1.0 / (n - 1), pins=[0, n - 1], total_mass=1.0, stiffness=500.0)
    edges = np.asarray(sheet.edges)
    perm = np.random.default_rng(3).permutation(n * n)
    shuffled = np.empty_like(sheet.positions)
    shuffled[perm] = sheet.positions
    assert not ms.scattered_vertex_order(edges, n * n) and ms.scattered_vertex_order(perm[edges], n * n)
    assert not ms.scattered_vertex_order(np.zeros((0, 2), int), n * n)
    for pos, springs, local in ((sheet.positions, edges, False), (shuffled, perm[edges], True)):
        auto = ms.from_arrays(pos, 0.001, springs=springs, stiffness=500.0, locality_order="auto")
        chosen = ms.from_arrays(pos, 0.001, springs=springs, stiffness=500.0, locality_order=local)
        np.testing.assert_array_equal(auto.mass_vertices, chosen.mass_vertices)
    assert not np.array_equal(auto.mass_vertices, np.arange(n * n))  # the shuffled sheet's is not vertex order
    with pytest.raises(ValueError, match="locality_order"):
        ms.from_arrays(sheet.positions, 0.001, springs=edges, locality_order="yes")


def test_messages_name_the_vertex_when_masses_are_in_locality_order():
    """A mass about to pass through a collider is named by its vertex (its number in
    locality order is another), and a system not built from arrays has no vertices."""
    plane_v = np.array([[-10, -10, 0], [10, -10, 0], [10, 10, 0], [-10, 10, 0]], float)
    plane_t = np.array([[0, 1, 2], [0, 2, 3]])
    pos = np.array([[0.9, 0.9, 0.9], [0.5, 0.5, 0.6], [0.1, 0.1, 0.5]])  # vertex 2 lowest, first along the curve
    mss = ms.from_arrays(pos, 0.04, gravity=[0, 0, 0], locality_order=True)
    assert list(mss.mass_vertices) == [2, 1, 0]
    mss.set_colliders(plane_v, plane_t, 1e-3, 0.3)
    with pytest.raises(ms.SimulationError, match=r"vertex 2 would pass through a collider"):
        for k in range(1, 13):  # a floor rising at 200 m/s, too fast for its 1 mm
            mss.set_colliders(plane_v + [0, 0, 200 * k / 24], plane_t, 1e-3, 0.3)
            mss.simulate(1 / 24, 1)
    built = ms.MassSpringSystem3d()
    built.add(ms.Mass(1.0, [0.0, 0.0, 0.0]))
    assert len(built.mass_vertices) == 0 and len(built.masses) == 1
