"""The pure pieces of an implicit step, each alone (native/time/newmark.hpp, newton.hpp):
the prediction, the local error coefficient, the energy test, Newton's tolerances, its
stop test and its error estimate. The step-size rules are in test_core_step_size.py; the
pieces together in every simulation test."""

import math

import numpy as np
import pytest

from mass_spring._core import step

RNG = np.random.default_rng(7)
IMPLICIT = ["generalized_alpha", "newmark", "implicit_euler"]


def _state(n=6):
    return tuple(RNG.normal(size=n) for _ in range(4))  # q, v, acc, aux


@pytest.mark.parametrize("integrator", ["generalized_alpha", "newmark"])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8, 1.0])
def test_constant_acceleration_is_integrated_exactly(integrator, rho):
    # With acc = aux = a at the start and a again at the end, every Newmark-family member
    # gives q + h v + h^2 a / 2, v + h a, and keeps aux = a.
    q, v, a, _ = _state()
    h = 0.013
    q_pred, v_pred, w, bq, bv, c = step.predict(integrator, rho, h, q, v, a, a)
    np.testing.assert_allclose(q_pred + bq * a, q + h * v + 0.5 * h * h * a, rtol=0, atol=1e-15)
    np.testing.assert_allclose(v_pred + bv * a, v + h * a, rtol=0, atol=1e-15)
    np.testing.assert_allclose(c * a + w, a, rtol=0, atol=1e-14)


def test_implicit_euler_predicts_from_the_end_of_the_step():
    # q1 = q + h v1, v1 = v + h acc1: the start's accelerations play no part.
    q, v, a, x = _state()
    h = 0.02
    acc1 = RNG.normal(size=q.size)
    q_pred, v_pred, w, bq, bv, c = step.predict("implicit_euler", 0.8, h, q, v, a, x)
    v1 = v + h * acc1
    np.testing.assert_allclose(v_pred + bv * acc1, v1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(q_pred + bq * acc1, q + h * v1, rtol=0, atol=1e-15)
    assert c == 1.0 and not w.any()


@pytest.mark.parametrize("rho", [0.0, 0.6, 1.0])
def test_generalized_alpha_coefficients_are_chung_hulbert(rho):
    # Chung and Hulbert (1993): am = (2 rho - 1) / (rho + 1), af = rho / (rho + 1),
    # gamma = 1/2 - am + af, beta = (1 - am + af)^2 / 4; with c = (1 - af) / (1 - am),
    # bq = beta c h^2 and bv = gamma c h.
    am, af = (2 * rho - 1) / (rho + 1), rho / (rho + 1)
    gamma = 0.5 - am + af
    beta = 0.25 * (1 - am + af) ** 2
    c = (1 - af) / (1 - am)
    q, v, a, x = _state(3)
    h = 0.1
    _, _, _, bq, bv, c_got = step.predict("generalized_alpha", rho, h, q, v, a, x)
    assert c_got == pytest.approx(c, rel=1e-14)
    assert bq == pytest.approx(beta * c * h * h, rel=1e-14)
    assert bv == pytest.approx(gamma * c * h, rel=1e-14)
    assert step.local_error_coefficient("generalized_alpha", rho) == pytest.approx(abs(beta - 1 / 6), rel=1e-14)


def test_local_error_coefficients():
    assert step.local_error_coefficient("newmark", 0.3) == pytest.approx(1 / 12, rel=1e-15)
    assert step.local_error_coefficient("implicit_euler", 0.3) == 0.5
    # rho = 1 is Newmark's trapezoidal rule.
    assert step.local_error_coefficient("generalized_alpha", 1.0) == pytest.approx(1 / 12, rel=1e-14)


def test_predict_refuses_an_explicit_integrator():
    q, v, a, x = _state(3)
    with pytest.raises(ValueError, match="implicit"):
        step.predict("rk2", 0.8, 0.1, q, v, a, x)


def test_energy_test():
    scale, tol, ceiling = 100.0, 0.01, 50.0
    assert step.energy_kept(50.0, 50.0 + 1e-11, scale, tol, ceiling)  # round-off: always
    assert step.energy_kept(50.0, 50.5, scale, tol, ceiling)  # within tolerance x scale
    assert not step.energy_kept(50.0, 51.5, scale, tol, ceiling)  # beyond it
    # A run may not creep: each step within its allowance, but not 1 % of the scale above
    # the ceiling ...
    assert not step.energy_kept(50.9, 51.1, scale, tol, ceiling)
    # ... unless within round-off.
    assert step.energy_kept(51.1, 51.1, scale, tol, ceiling)


def test_newton_tolerances():
    # Without error control: the position unit is newton_tol x length; the acceleration
    # unit 1e3 newton_tol times the largest reference acceleration, capped by length / bq.
    pos, acc, close = step.newton_tolerances(1e-10, 0.0, 2.0, 2.0, 9.81, 3.0, 1e-4)
    assert pos == pytest.approx(2e-10)
    assert acc == pytest.approx(1e3 * 1e-10 * 9.81)
    assert close == 0.0  # the error estimate never stops Newton
    _, acc, _ = step.newton_tolerances(1e-10, 0.0, 2.0, 2.0, 9.81, 3.0, 1.0)  # long step
    assert acc == pytest.approx(1e3 * 1e-10 * 2.0)
    _, acc, _ = step.newton_tolerances(1e-10, 0.0, 2.0, 2.0, 0.0, 0.0, 1e-4)  # nothing moves
    assert acc == pytest.approx(1e3 * 1e-10 * 2e-3)
    # Error control loosens the force residual to 1e-3 of its tolerance, not the rods'.
    pos, acc, close = step.newton_tolerances(1e-10, 0.01, 2.0, 3.0, 9.81, 3.0, 1e-4)
    assert pos == pytest.approx(2e-10)
    assert acc == pytest.approx(1e3 * 1e-5 * 9.81)
    assert close == pytest.approx(min(acc, 0.33 * 0.01 * 3.0 / 1e-4))
    _, acc, close = step.newton_tolerances(1e-10, 1e-6, 2.0, 3.0, 9.81, 3.0, 1.0)  # a tight tolerance
    assert acc == pytest.approx(1e3 * 1e-9 * 2.0)
    assert close == pytest.approx(0.33 * 1e-6 * 3.0) and close < acc


def _stop(iteration=1, err=2.0, constraint_err=0.0, err_prev=3.0, correction_err=5.0, estimate=math.inf,
          close_enough=1.0, error_control=False, strict=False):
    return step.newton_may_stop(iteration, err, constraint_err, err_prev, correction_err, estimate, close_enough,
                                error_control, strict)


def test_newton_stops_on_a_converged_residual():
    assert _stop(err=1.0) == (True, False)
    assert _stop(err=1.01) == (False, False)
    assert _stop(iteration=0, err=0.5) == (True, False)  # without error control, at once


def test_newton_stops_after_a_small_correction_that_lowered_the_residual():
    assert _stop(err=2.0, err_prev=3.0, correction_err=1.0) == (True, False)
    assert _stop(err=3.5, err_prev=3.0, correction_err=1.0) == (False, False)  # residual grew
    assert _stop(err=2.0, err_prev=3.0, correction_err=1.0, constraint_err=1.5) == (False, False)  # rods unmet


def test_under_error_control_newton_corrects_once_and_may_stop_on_its_estimate():
    assert _stop(iteration=0, err=0.1, error_control=True) == (False, False)
    assert _stop(iteration=1, err=0.1, error_control=True) == (True, False)
    # The estimate within close_enough stops an unconverged Newton early ...
    assert _stop(err=50.0, estimate=0.5, close_enough=1.0, error_control=True) == (True, True)
    assert _stop(err=50.0, estimate=1.5, close_enough=1.0, error_control=True) == (False, False)
    # ... but not a strict retry, nor with a rod unmet, nor without error control.
    assert _stop(err=50.0, estimate=0.5, error_control=True, strict=True) == (False, False)
    assert _stop(err=50.0, estimate=0.5, constraint_err=2.0, error_control=True) == (False, False)
    assert _stop(err=50.0, estimate=0.5) == (False, False)


def test_newton_error_estimate_follows_the_contraction_rate():
    e = step.NewtonErrorTest()
    assert math.isinf(e.error_estimate())  # nothing known
    e.add_residual(1.0)
    e.add_correction(0.1)
    assert math.isinf(e.error_estimate())  # one residual: no rate yet
    e.add_residual(0.2)  # residual rate 0.2
    assert e.error_estimate() == pytest.approx(0.2 / 0.8 * 0.1)
    e.add_correction(0.01)  # correction rate 0.1 takes over
    assert e.error_estimate() == pytest.approx(0.1 / 0.9 * 0.01)
    e.add_correction(0.02)  # diverging: cannot tell
    assert math.isinf(e.error_estimate())
    e.add_correction(0.0)
    assert e.error_estimate() == 0.0  # converged exactly


def test_the_first_correction_is_solved_tighter_only_when_calm():
    # Under error control 1e-1, but a step's first correction 3e-2 while calm (the
    # multigrid preconditions, nothing touches, no bending stencils: Simulator's
    # newton_correct decides); without error control 1e-2 always.
    assert step.linear_tolerance(error_control=True, first_correction=True, calm=True) == 3e-2
    assert step.linear_tolerance(error_control=True, first_correction=True, calm=False) == 1e-1
    assert step.linear_tolerance(error_control=True, first_correction=False, calm=True) == 1e-1
    for first in (True, False):
        for calm in (True, False):
            assert step.linear_tolerance(error_control=False, first_correction=first, calm=calm) == 1e-2
