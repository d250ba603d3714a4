"""The elements' force laws alone (native/forces/laws.hpp): closed forms and exact derivatives.

Each law gives the force f on end a of an element from d = p_b - p_a and dv = v_b - v_a,
with A = df/dd and B = df/ddv.
"""
import numpy as np
import pytest

from mass_spring._core import laws

RNG = np.random.default_rng(7)


def direction(dim):
    n = RNG.standard_normal(dim)
    return n / np.linalg.norm(n)


def central_difference(fun, x, h=1e-6):
    """d fun / d x, one column per coordinate of x."""
    columns = []
    for k in range(len(x)):
        e = np.zeros(len(x))
        e[k] = h
        columns.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.array(columns).T


def assert_derivatives_match(force, d, dv, scale):
    """A and B of `force(d, dv) -> (f, A, B)` against central differences of f."""
    _, A, B = force(d, dv)
    fd_A = central_difference(lambda x: force(x, dv)[0], d)
    fd_B = central_difference(lambda x: force(d, x)[0], dv)
    np.testing.assert_allclose(A, fd_A, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(B, fd_B, rtol=0, atol=1e-6 * scale)


def spring(length, stiffness, damping=0.0, rope=False):
    return lambda d, dv: laws.spring_force(length, stiffness, damping, rope, d, dv)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("L", [0.3, 1.0, 2.5])
def test_spring_force_is_hookes_law(dim, L):
    n = direction(dim)
    f, A, B = laws.spring_force(1.0, 40.0, 0.0, False, L * n, np.zeros(dim))
    np.testing.assert_allclose(f, 40.0 * (L - 1.0) * n, rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(B, np.zeros((dim, dim)))
    # stiffness k along n, tension / L across it
    P = np.eye(dim) - np.outer(n, n)
    np.testing.assert_allclose(A, 40.0 * np.outer(n, n) + 40.0 * (L - 1.0) / L * P, atol=1e-13)


@pytest.mark.parametrize("dim", [2, 3])
def test_dashpot_acts_along_the_spring(dim):
    n = direction(dim)
    dv = RNG.standard_normal(dim)
    f, _, B = laws.spring_force(1.0, 40.0, 3.0, False, 1.0 * n, dv)  # at rest length
    np.testing.assert_allclose(f, 3.0 * n.dot(dv) * n, atol=1e-14)
    np.testing.assert_allclose(B, 3.0 * np.outer(n, n), atol=1e-14)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("L", [0.5, 1.0, 1.7])
def test_spring_derivatives_are_exact(dim, L):
    d = L * direction(dim)
    dv = RNG.standard_normal(dim)
    assert_derivatives_match(spring(1.0, 40.0, damping=2.0), d, dv, scale=40.0)


@pytest.mark.parametrize("dim", [2, 3])
def test_rope_is_slack_below_its_band(dim):
    L0 = 1.0
    eps = laws.rope_band(L0)
    assert eps == pytest.approx(1e-3)
    n = direction(dim)
    # at the band's lower end itself, L * n is L only to round-off (n is a random direction):
    # 1e-12 below it is the end for this test, whatever the order the tests run in
    for L in (0.2, 1.0 - 2 * eps, (1.0 - eps) * (1 - 1e-12)):
        f, A, B = laws.spring_force(L0, 40.0, 3.0, True, L * n, RNG.standard_normal(dim))
        assert not f.any() and not A.any() and not B.any()
    assert laws.spring_energy(L0, 40.0, True, -eps) == 0.0


@pytest.mark.parametrize("dim", [2, 3])
def test_rope_equals_the_spring_above_its_band(dim):
    n = direction(dim)
    dv = RNG.standard_normal(dim)
    for L in (1.0015, 1.01, 2.0):  # the band ends at 1.001
        rope = laws.spring_force(1.0, 40.0, 3.0, True, L * n, dv)
        plain = laws.spring_force(1.0, 40.0, 3.0, False, L * n, dv)
        for r, p in zip(rope, plain):
            np.testing.assert_array_equal(r, p)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("stretch", [-0.9e-3, -0.3e-3, 0.0, 0.5e-3, 0.9e-3, 0.02])
def test_rope_derivatives_are_exact_in_and_around_its_band(dim, stretch):
    d = (1.0 + stretch) * direction(dim)
    dv = RNG.standard_normal(dim)
    force = spring(1.0, 40.0, damping=2.0, rope=True)
    _, A, B = force(d, dv)
    h = 1e-8  # inside the band of width 1e-3
    fd_A = central_difference(lambda x: force(x, dv)[0], d, h)
    fd_B = central_difference(lambda x: force(d, x)[0], dv, h)
    np.testing.assert_allclose(A, fd_A, rtol=0, atol=1e-5 * 40.0)
    np.testing.assert_allclose(B, fd_B, rtol=0, atol=1e-5 * 40.0)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("stretch", [-0.5, -0.5e-3, 0.2e-3, 0.3])
def test_tension_is_the_derivative_of_the_energy(rope, stretch):
    def energy(s):
        return laws.spring_energy(1.0, 40.0, rope, s)

    h = 1e-7
    dE = (energy(stretch + h) - energy(stretch - h)) / (2 * h)
    n = np.array([1.0, 0.0, 0.0])
    f, _, _ = laws.spring_force(1.0, 40.0, 0.0, rope, (1.0 + stretch) * n, np.zeros(3))
    assert f[0] == pytest.approx(dE, abs=1e-6)


@pytest.mark.parametrize("dim", [2, 3])
def test_definite_leaves_out_the_compressed_geometric_stiffness(dim):
    n = direction(dim)
    d, dv = 0.5 * n, np.zeros(dim)
    f, A, _ = laws.spring_force(1.0, 40.0, 0.0, False, d, dv)
    f_def, A_def, _ = laws.spring_force(1.0, 40.0, 0.0, False, d, dv, definite=True)
    np.testing.assert_array_equal(f_def, f)
    np.testing.assert_allclose(A_def, 40.0 * np.outer(n, n), atol=1e-13)
    assert np.linalg.eigvalsh(A).min() < 0 <= np.linalg.eigvalsh(A_def).min() + 1e-12


@pytest.mark.parametrize("dim", [2, 3])
def test_no_nan_as_the_length_goes_to_zero(dim):
    n = direction(dim)
    for L in (1e-6, 1e-13, 0.0):
        for rope in (False, True):
            for L0 in (0.0, 1.0):
                out = laws.spring_force(L0, 40.0, 2.0, rope, L * n, RNG.standard_normal(dim))
                assert all(np.isfinite(x).all() for x in out), (L, rope, L0)
    # a zero-length spring is exactly linear, even at its end's coincidence
    for L in (1.0, 1e-13, 0.0):
        f, A, _ = laws.spring_force(0.0, 40.0, 0.0, False, L * n, np.zeros(dim))
        np.testing.assert_allclose(f, 40.0 * L * n, rtol=1e-14, atol=0)
        np.testing.assert_allclose(A, 40.0 * np.eye(dim), atol=1e-12)
    g, grad, (f, A, _) = laws.rod_terms(1.0, np.zeros(dim), 2.0)
    assert g == -0.5 and not grad.any() and not f.any()
    assert np.isfinite(A).all()


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("L", [0.5, 1.0, 1.5])
def test_rod_in_squared_form(dim, L):
    n = direction(dim)
    d, L0, lam = L * n, 1.0, 3.5
    g, grad, (f, A, B) = laws.rod_terms(L0, d, lam)
    assert g == pytest.approx((L * L - L0 * L0) / (2 * L0), rel=1e-14)
    np.testing.assert_allclose(grad, d / L0, rtol=1e-15)
    np.testing.assert_allclose(f, lam * d / L0, rtol=1e-15)
    np.testing.assert_allclose(A, lam / L0 * np.eye(dim), rtol=1e-15)
    assert not B.any()
    # the gradient is that of g, and A that of f
    np.testing.assert_allclose(
        central_difference(lambda x: np.array([laws.rod_terms(L0, x, lam)[0]]), d)[0], grad,
        atol=1e-8)
    assert_derivatives_match(lambda x, v: laws.rod_terms(L0, x, lam)[2], d, np.zeros(dim),
                             scale=lam)
    # a pushing rod's geometric stiffness is left out of the definite Newton matrix
    _, _, (_, A_def, _) = laws.rod_terms(L0, d, -lam, definite=True)
    assert not A_def.any()


def test_bad_dimension_is_a_value_error():
    with pytest.raises(ValueError, match="2 or 3"):
        laws.spring_force(1.0, 1.0, 0.0, False, np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="same size"):
        laws.spring_force(1.0, 1.0, 0.0, False, np.zeros(3), np.zeros(2))
