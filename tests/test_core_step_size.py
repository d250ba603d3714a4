"""Error control's step-size rules alone (native/time/integrators.hpp): the local error is
O(h^3), so a step that met the tolerance with error err (in units of it) grows by
0.85 / cbrt(err), within [0.2, 2]; a rejected one shrinks by 0.9 / cbrt(err) within
[0.2, 0.9], or to a quarter when nothing was measured."""
import math

import pytest

from mass_spring._core import step as step_size


def test_the_last_step_lands_on_the_end_and_no_sliver_is_left():
    assert step_size.within(0.1, 0.1 * (1 - 1e-12)) == 0.1 * (1 - 1e-12)  # lands exactly
    assert step_size.within(0.1, 0.15) == 0.075  # 0.1 would leave 0.05: two halves
    assert step_size.within(0.1, 0.5) == 0.1


@pytest.mark.parametrize("err", [1e-6, 0.01, 0.3, 0.8, 1.0])
def test_an_accepted_step_grows_by_its_error_within_bounds(err):
    h = 0.01
    expected = h * min(2.0, max(0.2, 0.85 / math.cbrt(err)))
    assert step_size.after_accepted(err, h, h, 1.0) == pytest.approx(expected, rel=1e-15)
    assert step_size.after_accepted(err, h, h, 0.012) <= 0.012  # never beyond h_max


def test_a_step_cut_to_land_on_the_end_proposes_what_was_proposed():
    assert step_size.after_accepted(0.5, 0.003, 0.01, 1.0) == 0.01
    assert step_size.after_accepted(0.5, 0.003, 0.01, 0.005) == 0.005


@pytest.mark.parametrize("err", [1.01, 2.0, 30.0, 1e6])
def test_a_rejected_step_shrinks_by_its_error_within_bounds(err):
    shrunk = step_size.after_rejected(1.0, True, err)
    assert shrunk == pytest.approx(min(0.9, max(0.2, 0.9 / math.cbrt(err))), rel=1e-15)
    assert 0.2 <= shrunk <= 0.9
    assert step_size.after_rejected(1.0, False, err) == 0.25  # Newton failed: a quarter
