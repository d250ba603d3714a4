"""Rigid rods: pendulum against the exact large-amplitude solution, conditioning in h."""
import math

import numpy as np
import pytest

import mass_spring as ms

G, L, M = 9.81, 1.3, 0.7


def agm(a, b):
    while abs(a - b) > 1e-15 * a:
        a, b = (a + b) / 2, math.sqrt(a * b)
    return a


def exact_period(theta0):
    return 2 * math.pi * math.sqrt(L / G) / agm(1.0, math.cos(theta0 / 2))


def pendulum(theta0=math.pi / 2, dim=3, rho_inf=0.8):
    cls = ms.MassSpringSystem3d if dim == 3 else ms.MassSpringSystem2d
    mss = cls()
    mss.gravity = [0, -G] + [0] * (dim - 2)
    f = mss.add(ms.Fix([0.0] * dim))
    pos = [L * math.sin(theta0), -L * math.cos(theta0)] + [0.0] * (dim - 2)
    m = mss.add(ms.Mass(M, pos))
    mss.add(ms.DistanceConstraint(L, (f, m)))
    mss.set_integrator("generalized_alpha", rho_inf=rho_inf)
    return mss


def test_exact_period_formula():
    # DESIGN.md's table, as a check of the reference itself
    t0 = 2 * math.pi * math.sqrt(L / G)
    assert exact_period(math.radians(90)) / t0 == pytest.approx(1.180341, abs=1e-6)
    assert exact_period(math.radians(120)) / t0 == pytest.approx(1.372881, abs=1e-6)


@pytest.mark.parametrize("dim", [2, 3])
def test_pendulum_period_rod_length_and_tension(dim):
    theta0 = math.pi / 2
    period = exact_period(theta0)
    steps_per_period = 200
    h = period / steps_per_period
    mss = pendulum(theta0, dim)
    xs, ts = [mss.masses[0].pos[0]], [0.0]
    worst_violation, worst_force = 0.0, 0.0
    for n in range(1, 3 * steps_per_period + 1):
        mss.simulate(h, 1)  # one call per step, as the add-on does per frame
        x, y = mss.masses[0].pos[:2]
        xs.append(x)
        ts.append(n * h)
        worst_violation = max(worst_violation, mss.max_constraint_violation())
        if n > 50:  # after the O(h) multiplier transient of the index-3 form has died out
            cos_theta = -y / L
            expected = M * G * (3 * cos_theta - 2 * math.cos(theta0))
            worst_force = max(worst_force, abs(mss.constraints[0].force - expected))
    assert worst_violation <= 1e-9 * L
    # period from successive downward zero crossings of x (linear interpolation)
    xs, ts = np.array(xs), np.array(ts)
    idx = np.flatnonzero((xs[:-1] > 0) & (xs[1:] <= 0))
    crossings = ts[idx] + (ts[idx + 1] - ts[idx]) * xs[idx] / (xs[idx] - xs[idx + 1])
    measured = np.diff(crossings).mean()
    assert measured == pytest.approx(period, rel=1e-3)
    # rod force m g (3 cos(theta) - 2 cos(theta0)), peak 3 m g
    assert worst_force < 0.01 * M * G


def test_constraint_force_at_rest_is_weight():
    mss = pendulum(theta0=0.0)
    mss.simulate(1.0, 100)
    assert mss.constraints[0].force == pytest.approx(M * G, rel=1e-9)
    assert mss.masses[0].pos[1] == pytest.approx(-L, abs=1e-12)


def test_rod_forces_are_known_before_the_first_step():
    """A mass hung from two rods at ±θ from the vertical: each rod holds m g / (2 cos θ)
    already at t = 0 (it read 0 until a step had run), reading it leaves the run
    bit-identical, and the same tension holds after steps (the mass is in equilibrium)."""
    theta = math.radians(30)

    def hung():
        mss = ms.MassSpringSystem2d()
        mss.gravity = [0, -G]
        left = mss.add(ms.Fix([-L * math.sin(theta), 0.0]))
        right = mss.add(ms.Fix([L * math.sin(theta), 0.0]))
        mass = mss.add(ms.Mass(M, [0.0, -L * math.cos(theta)]))
        mss.add(ms.DistanceConstraint(L, [left, mass]))
        mss.add(ms.DistanceConstraint(L, [right, mass]))
        return mss

    expected = M * G / (2 * math.cos(theta))
    read = hung()
    np.testing.assert_allclose(read.constraint_forces, expected, rtol=1e-12)
    assert read.constraints[1].force == pytest.approx(expected, rel=1e-12)
    read.simulate(0.5, 50)
    quiet = hung()
    quiet.simulate(0.5, 50)
    np.testing.assert_array_equal(read.positions, quiet.positions)
    np.testing.assert_allclose(read.constraint_forces, expected, rtol=1e-9)


@pytest.mark.parametrize("steps", [10, 1000, 100000])
def test_newton_converges_for_any_step_size(steps):
    """The scaled constraint row keeps the Newton matrix well conditioned as h -> 0."""
    mss = pendulum(math.radians(45))
    mss.simulate(0.01, steps)
    assert mss.max_constraint_violation() < 1e-9 * L
    assert mss.last_newton_iterations <= 4


def test_double_pendulum_with_rho_one_keeps_energy_bounded_and_rods_rigid():
    mss = ms.MassSpringSystem2d()
    mss.gravity = [0, -G]
    f = mss.add(ms.Fix([0, 0]))
    m1 = mss.add(ms.Mass(1.0, [1, 0]))
    m2 = mss.add(ms.Mass(1.0, [2, 0]))
    mss.add(ms.DistanceConstraint(1.0, [f, m1]))
    mss.add(ms.DistanceConstraint(1.0, [m1, m2]))
    mss.set_integrator("generalized_alpha", rho_inf=1.0)
    e0 = mss.energy()
    worst = 0.0
    for _ in range(200):
        mss.simulate(0.01, 5)
        worst = max(worst, abs(mss.energy() - e0))
        assert mss.max_constraint_violation() < 1e-9
    assert worst < 0.02 * abs(e0) + 0.05  # bounded, no drift (energy scale m g L ~ 10-30 J)


def double_pendulum(rho_inf):
    mss = ms.MassSpringSystem3d()
    mss.gravity = [0, 0, -G]
    f = mss.add(ms.Fix([0, 0, 0]))
    m1 = mss.add(ms.Mass(1.0, [1, 0, 0]))
    m2 = mss.add(ms.Mass(1.0, [2, 0, 0]))
    mss.add(ms.DistanceConstraint(1.0, (f, m1)))
    mss.add(ms.DistanceConstraint(1.0, (m1, m2)))
    mss.set_integrator("generalized_alpha", rho_inf=rho_inf)
    return mss


@pytest.mark.slow
@pytest.mark.parametrize("rho_inf", [1.0, 0.99])
def test_undamped_alpha_stays_stable_on_long_constrained_runs(rho_inf):
    """With rho_inf near 1 the core re-projects accelerations and multipliers after every
    step, because the undamped index-3 multipliers of this chaotic double pendulum would
    oscillate step by step and grow without bound: over 30 s the energy stays within 1 %
    of 2 kg g 1.5 m and the rods hold to 1e-9 m."""
    mss = double_pendulum(rho_inf)
    e0 = mss.energy()
    for _ in range(120):
        mss.simulate(0.25, 60)  # h = 1/240, 30 s
    assert abs(mss.energy() - e0) < 0.01 * 2 * G * 1.5
    assert mss.max_constraint_violation() < 1e-9


@pytest.mark.parametrize("rho_inf", [1.0, 0.8, 0.0])
def test_constrained_positions_converge_at_second_order(rho_inf):
    def end_position(steps):
        mss = double_pendulum(rho_inf)
        mss.simulate(0.6, steps)
        return mss.positions.copy()
    ref = end_position(12800)
    errors = [np.abs(end_position(n) - ref).max() for n in (100, 200, 400)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 1.8), (errors, orders)


def rod_plate(n=4, depth=0.0):
    """A triangulated n x n plate of rods, 0.1 m apart, hung from two corners of one side;
    `depth`: the vertices moved across the plate by up to that much (seeded)."""
    pts = np.array([[0.1 * i, 0.1 * j, 0.0] for j in range(n) for i in range(n)])
    pts[:, 2] += depth * np.random.default_rng(1).uniform(-1, 1, len(pts))
    edges = []
    for j in range(n):
        for i in range(n):
            v = j * n + i
            edges += [(v, v + 1)] * (i + 1 < n) + [(v, v + n)] * (j + 1 < n)
            edges += [(v, v + n + 1)] * (i + 1 < n and j + 1 < n)
    return ms.from_arrays(pts, 1.0, fixed=[0, n - 1], constraints=np.array(edges),
                          gravity=[0, 0, -G])


def test_a_flat_rod_plate_is_named_as_the_cause():
    # Before: "more steps (substeps)", which fail too. Rods cannot hold a load across a
    # flat network; the same plate with some depth swings as a rigid body.
    flat = rod_plate()
    with pytest.raises(ms.SimulationError,
                       match=r"Likely cause: vertices 1, 2, 4, 5, 6 and \d+ more are held only by "
                             r"rods that lie in one plane, a flat rod network.*some depth"):
        for _ in range(24):
            flat.simulate(1 / 24, 5)

    deep = rod_plate(depth=0.01)
    lowest = 0.0
    for _ in range(24):
        deep.simulate(1 / 24, 5)
        lowest = min(lowest, deep.vertex_positions()[-1, 2])
    assert deep.max_constraint_violation() < 1e-9
    assert lowest < -0.25  # the far side swung down below the pins (0.3 m away)
