// The Newmark family's pieces of a step, as pure functions of the state and the step size
// (tested alone in tests/test_core_step_pieces.py): the parameters, the prediction (the
// step's known part), the local error estimate, and the energy test of a step.
#pragma once

#include <Eigen/Dense>

#include "time/integrators.hpp"

namespace ms {

// Generalized-alpha in the Chung-Hulbert / Arnold-Bruls form: equilibrium at t_{n+1},
// (1 - am) aux_{n+1} + am aux_n = (1 - af) acc_{n+1} + af acc_n.
struct AlphaParameters {
  double am, af, beta, gamma;
  static AlphaParameters generalized(double rho) {
    const double am = (2 * rho - 1) / (rho + 1), af = rho / (rho + 1);
    const double gamma = 0.5 - am + af;
    return {am, af, 0.25 * (gamma + 0.5) * (gamma + 0.5), gamma};
  }
  static AlphaParameters newmark() { return {0.0, 0.0, 0.25, 0.5}; }
};

// The coefficients of a step of size h by `kind` (bq, bv, c of NewmarkStep; the vectors
// are left empty: newmark_predict_rows fills them).
NewmarkStep newmark_coefficients(IntegratorKind kind, double rho_inf, double h);

// Rows [at, at + size) of the step's known part from the state (q, v, acc, aux) at its
// start: q1 = q_pred + bq acc1 and v1 = v_pred + bv acc1 for the new acceleration acc1.
// `step` holds newmark_coefficients' and vectors of the full size.
void newmark_predict_rows(IntegratorKind kind, double rho_inf, double h, const Eigen::VectorXd& q,
                          const Eigen::VectorXd& v, const Eigen::VectorXd& acc, const Eigen::VectorXd& aux,
                          Eigen::Index at, Eigen::Index size, NewmarkStep& step);

// The local position error of a step of size h from acceleration acc0 to acc1 is about
// |this| h^2 |acc1 - acc0| (Zienkiewicz-Xie: beta - 1/6; implicit Euler against the
// trapezoidal rule: 1/2). tests/test_core_error_control.py checks its order.
double local_error_coefficient(IntegratorKind kind, double rho_inf);

// Whether a step from energy_before to `energy` keeps the energy from growing by more
// than error control's `tolerance` allows (when no fix moves the physics cannot add
// energy): a step may raise it by tolerance x energy_scale, but the run never climbs more
// than 1 % of energy_scale above `ceiling` (tests/test_core_error_control.py: the rope and
// the folding sheet); a rise within round-off always passes, so that short enough steps
// pass even at the ceiling.
bool energy_kept(double energy_before, double energy, double energy_scale, double tolerance, double ceiling);

}  // namespace ms
