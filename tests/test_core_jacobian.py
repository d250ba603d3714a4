"""The exact sparse Jacobian equals central finite differences."""
import numpy as np
import pytest

import mass_spring as ms


def dense(triplets, shape):
    rows, cols, vals = triplets
    out = np.zeros(shape)
    np.add.at(out, (rows, cols), vals)
    return out


def random_system(rng, dim):
    cls = ms.MassSpringSystem3d if dim == 3 else ms.MassSpringSystem2d
    mss = cls()
    mss.gravity = rng.normal(size=dim).tolist()
    fixes = [mss.add(ms.Fix(rng.normal(size=dim).tolist())) for _ in range(2)]
    masses = [mss.add(ms.Mass(rng.uniform(0.5, 2), rng.normal(size=dim).tolist())) for _ in range(5)]
    nodes = fixes + masses
    for a, b in [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6), (1, 6), (2, 5)]:
        mss.add(ms.Spring(rng.uniform(0.1, 1), rng.uniform(1, 50), (nodes[a], nodes[b]),
                          damping=rng.uniform(0.1, 3)))
    mss.add(ms.Chain(0.05, 30.0, (nodes[3], nodes[6]), damping=0.7))  # taut rope
    mss.add(ms.DistanceConstraint(1.0, (nodes[1], nodes[4])))
    mss.add(ms.DistanceConstraint(0.8, (nodes[2], nodes[6])))
    # laws on three vertices (assembly's stencils), one with a fix among its ends
    mss.add(ms.WireBending(rng.uniform(1, 5), (nodes[0], nodes[2], nodes[3])))
    mss.add(ms.WireBending(rng.uniform(1, 5), (nodes[4], nodes[5], nodes[6])))
    if dim == 3:  # a hinge on four (one a fix), bent away from its rest angle
        mss.add(ms.HingeBending(rng.uniform(1, 5), (nodes[1], nodes[3], nodes[5], nodes[6]),
                                rest_angle=rng.uniform(-1, 1)))
    return mss


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jacobian_matches_finite_differences(dim, seed):
    rng = np.random.default_rng(seed)
    mss = random_system(rng, dim)
    n, c = dim * len(mss.masses), len(mss.constraints)
    q = rng.normal(size=n) * 1.5
    v = rng.normal(size=n)
    lam = rng.normal(size=c) * 5  # nonzero multipliers

    def fg(q, v, lam):
        F, g = mss.evaluate(q, v, lam)
        return np.concatenate([F, g])

    d_qlam, d_v = mss.jacobian(q, v, lam)
    J = dense(d_qlam, (n + c, n + c))
    Jv = dense(d_v, (n, n))
    # Fourth-order central differences: with the bending of a sharply folded vertex among
    # the forces, second-order ones at 1e-6 lose 1e-5 of the largest entry to round-off.
    eps = 1e-4

    def derivative(f, x, j):
        e = np.zeros(len(x))
        e[j] = eps
        return (8 * (f(x + e) - f(x - e)) - (f(x + 2 * e) - f(x - 2 * e))) / (12 * eps)

    x = np.concatenate([q, lam])
    fd = np.stack([derivative(lambda y: fg(y[:n], v, y[n:]), x, j) for j in range(n + c)], 1)
    fdv = np.stack([derivative(lambda w: fg(q, w, lam)[:n], v, j) for j in range(n)], 1)
    scale = np.abs(fd).max()
    np.testing.assert_allclose(J, fd, atol=1e-6 * scale)
    np.testing.assert_allclose(Jv, fdv, atol=1e-6 * np.abs(fdv).max())
    assert np.abs(J[n:, n:]).max() == 0.0  # dg/dlam = 0
    # the damper makes dF/dq unsymmetric; the rest of the structure is symmetric
    assert np.abs(J[:n, n:] + J[n:, :n].T).max() < 1e-12 * scale


def test_zero_length_does_not_produce_nan():
    mss = ms.MassSpringSystem3d()
    a = mss.add(ms.Mass(1.0, [0, 0, 0]))
    b = mss.add(ms.Mass(1.0, [0, 0, 0]))
    mss.add(ms.Spring(0.5, 10.0, (a, b), damping=1.0))
    F, g = mss.evaluate(np.zeros(6), np.ones(6), np.zeros(0))
    (_, _, vals), _ = mss.jacobian(np.zeros(6), np.ones(6), np.zeros(0))
    assert np.isfinite(F).all() and np.isfinite(vals).all()
    mss.simulate(0.1, 10)
    assert np.isfinite(mss.positions).all()
