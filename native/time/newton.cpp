// Newton's pure pieces (time/newton.hpp).
#include "time/newton.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ms {

using Eigen::VectorXd;

void NewtonErrorTest::add_residual(double rms_acceleration) {
  if (residual > 0) residual_rate = rms_acceleration / residual;
  residual = rms_acceleration;
}

void NewtonErrorTest::add_correction(double size) {
  if (correction > 0) correction_rate = size / correction;
  correction = size;
}

double NewtonErrorTest::error_estimate() const {
  if (correction == 0) return 0.0;
  const double rate = correction_rate >= 0 ? correction_rate : residual_rate;
  if (correction < 0 || rate < 0 || rate >= 1) return std::numeric_limits<double>::infinity();
  return rate / (1 - rate) * correction;
}

VectorXd NewtonPredictor::guess(Guess k, const VectorXd& acc, double h,
                                const std::function<VectorXd()>& inertial) const {
  if (k == Inertial) return inertial();
  const bool known = previous_h > 0 && previous_acc.size() == acc.size();
  if (k == Extrapolated && known) return acc + (h / previous_h) * (acc - previous_acc);
  return acc;
}

void NewtonPredictor::learn(const std::function<VectorXd(Guess)>& guess, const VectorXd& acc,
                            const VectorXd& solution, double h, int corrections,
                            const std::function<double(const VectorXd&)>& residual_of) {
  const bool worse = corrections > last_corrections;
  last_corrections = corrections;
  if (--steps_to_review <= 0 || worse) {  // the guesses read the last step's acc and h
    steps_to_review = kReviewInterval;
    double smallest = std::numeric_limits<double>::infinity();
    for (int k = 0; k < kGuesses; ++k) {
      const double residual = residual_of(guess(static_cast<Guess>(k)) - solution) * (k == Inertial ? 1.0 : kMargin);
      if (residual < smallest) {  // ties keep the earlier guess
        smallest = residual;
        choice = static_cast<Guess>(k);
      }
    }
  }
  previous_acc = acc;
  previous_h = h;
}

double force_tolerance(const NewtonSettings& s) {
  return s.tolerance > 0 ? std::max(s.newton_tol, 1e-3 * s.tolerance) : s.newton_tol;
}

double linear_tolerance(bool error_control, bool first_correction, bool calm) {
  if (!error_control) return 1e-2;
  return first_correction && calm ? kFirstCorrectionTolerance : 1e-1;
}

NewtonTolerances newton_tolerances(const NewtonSettings& s, double gravity, double acc_max, double bq) {
  NewtonTolerances tol;
  tol.pos = s.newton_tol * s.length_scale;  // rods: as tight as without control
  const double a_ref = std::max({gravity, acc_max, 1e-3 * s.length_scale});
  tol.acc = 1e3 * force_tolerance(s) * std::min(a_ref, s.length_scale / bq);
  tol.close_enough = std::min(tol.acc, NewtonTolerances::kShareOfTolerance * s.tolerance * s.error_scale / bq);
  return tol;
}

NewtonStop newton_may_stop(const NewtonProgress& p, const NewtonTolerances& tol, bool error_control,
                           bool strict) {
  // The force residual overstates the error in stiff springs: there a force residual R
  // is an acceleration error of only R / (m + bq k), and bq k / m grows with mesh
  // refinement, so that on fine meshes the residual alone would keep Newton iterating
  // down to round-off. So the step is also accepted when the last full Newton
  // correction, which is the size of the previous iterate's error, was within the force
  // tolerance as m da + G^T dlam, and the residual went down since: the current iterate
  // is closer still (test_fine_sheet_velocities_stay_within_the_acceleration_tolerance).
  const bool small_correction = p.correction_err <= 1.0 && p.err < p.err_prev;
  // Under error control every step takes at least one Newton correction: the looser
  // force tolerance would otherwise accept an unchanged state whose forces are slightly
  // out of balance, and a structure at rest would stick short of its equilibrium
  // (tests/test_examples.py, test_hanging_chain_static_extensions).
  const bool may_stop = p.iteration > 0 || !error_control;
  // Under error control Newton also stops when its own error, estimated from its rate
  // (NewtonErrorTest), is within the acceleration tolerance as an RMS and, as a position
  // error bq da, a fraction of the local error the step may make anyway. Both: an
  // acceleration error acts like a force bias whose position error grows with the square
  // of time (tests/test_addon_bake.py, test_rope_edges_go_slack), and the position
  // share keeps it below the step's own error.
  const bool close_enough = error_control && !strict && p.constraint_err <= 1.0 &&
                            p.error_estimate <= tol.close_enough;
  NewtonStop out;
  out.stop = may_stop && (p.err <= 1.0 || close_enough || (p.constraint_err <= 1.0 && small_correction));
  out.early = out.stop && close_enough && !(p.err <= 1.0);
  return out;
}

}  // namespace ms
