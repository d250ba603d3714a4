"""Every integrator on the harmonic oscillator against the exact solution."""
import numpy as np
import pytest

import mass_spring as ms

K, M, X0, V0 = 4.0, 0.5, 1.0, 0.3
OMEGA = np.sqrt(K / M)
PERIOD = 2 * np.pi / OMEGA


def exact(t):
    return X0 * np.cos(OMEGA * t) + V0 / OMEGA * np.sin(OMEGA * t)


def oscillator(integrator, rho_inf=0.8, dim=3):
    """A mass on a zero-length spring to a fix at the origin: x'' = -(k/m) x."""
    cls = ms.MassSpringSystem3d if dim == 3 else ms.MassSpringSystem2d
    mss = cls()
    f = mss.add(ms.Fix([0.0] * dim))
    m = mss.add(ms.Mass(M, [X0] + [0.0] * (dim - 1), vel=[V0] + [0.0] * (dim - 1)))
    mss.add(ms.Spring(0.0, K, (f, m)))
    mss.set_integrator(integrator, rho_inf=rho_inf)
    return mss


def max_error(integrator, steps, tend=2.3):
    """Largest position error over the run, sampled at every step."""
    mss = oscillator(integrator)
    h = tend / steps
    err = 0.0
    for n in range(1, steps + 1):
        mss.simulate(h, 1)
        err = max(err, abs(mss.masses[0].pos[0] - exact(n * h)))
    return err


@pytest.mark.parametrize("integrator, order", [
    ("explicit_euler", 1), ("symplectic_euler", 1), ("implicit_euler", 1),
    ("rk2", 2), ("newmark", 2), ("generalized_alpha", 2)])
def test_order_of_convergence(integrator, order):
    errors = [max_error(integrator, n) for n in (200, 400, 800)]
    observed = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(observed - order) < 0.15), (errors, observed)
    # and the error itself is small, not just shrinking
    assert errors[-1] < (5e-2 if order == 1 else 1e-4)


@pytest.mark.parametrize("dim", [2, 3])
def test_newmark_family_matches_exact_solution_in_2d_and_3d(dim):
    mss = oscillator("generalized_alpha", rho_inf=0.8, dim=dim)
    mss.simulate(2.3, 2000)
    assert mss.masses[0].pos[0] == pytest.approx(exact(2.3), abs=2e-5)
    assert np.allclose(mss.masses[0].pos[1:], 0.0)


def period_energy_ratio(rho_inf, periods):
    mss = oscillator("generalized_alpha", rho_inf=rho_inf)
    e0 = mss.energy()
    mss.simulate(periods * PERIOD, periods * 20)  # h = T / 20
    return (mss.energy() / e0) ** (1.0 / periods)


def test_rho_one_keeps_energy_over_100_periods():
    mss = oscillator("generalized_alpha", rho_inf=1.0)
    e0 = mss.energy()
    worst = 0.0
    for _ in range(100):
        mss.simulate(PERIOD, 20)
        worst = max(worst, abs(mss.energy() / e0 - 1))
    assert worst < 1e-9


@pytest.mark.parametrize("rho_inf, per_period", [
    (0.8, 0.99974), (0.5, 0.99326), (0.0, 0.869)])
def test_numerical_damping_rate(rho_inf, per_period):
    # Averaged over 200 periods: the discrete energy also wobbles within a period, and
    # DESIGN.md's rates are the spectral radius of the step (|z|^40 per period).
    ratio = period_energy_ratio(rho_inf, periods=200)
    assert ratio == pytest.approx(per_period, abs=1e-5 if rho_inf > 0 else 2e-4)


def test_the_integrator_table_is_the_one_list():
    """mass_spring.INTEGRATORS keeps its order (the add-on's enum follows it; .blend files
    store the names in capitals), and every row describes what the core does."""
    assert ms.INTEGRATORS == tuple(info.name for info in ms.INTEGRATOR_INFO)
    assert ms.INTEGRATORS == ("generalized_alpha", "newmark", "implicit_euler",
                              "symplectic_euler", "explicit_euler", "rk2")
    for info in ms.INTEGRATOR_INFO:
        assert info.label and info.description and info.order in (1, 2)
        mss = oscillator(info.name)
        assert mss.integrator == info.name
        rod = ms.MassSpringSystem3d()
        a, b = rod.add(ms.Fix([0, 0, 0])), rod.add(ms.Mass(1.0, [1, 0, 0]))
        rod.add(ms.DistanceConstraint(1.0, (a, b)))
        rod.set_integrator(info.name)
        if info.explicit:
            with pytest.raises(ValueError, match="cannot enforce DistanceConstraints"):
                rod.simulate(0.01, 1)
        else:
            rod.simulate(0.01, 1)
    with pytest.raises(ValueError, match="choose one of generalized_alpha, newmark"):
        ms.MassSpringSystem3d().set_integrator("leapfrog")
