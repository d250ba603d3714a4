// Time integration of Simulator<D>: the Newmark family (generalized-alpha, Newmark, implicit
// Euler) solved by Newton on (q'', lam) with an index-3 constraint row scaled by 1/(beta h^2),
// and the explicit methods of the seeds' 1-D page.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "time/integrators.hpp"
#include "time/newmark.hpp"
#include "time/newton.hpp"
#include "time/simulator.hpp"

namespace ms {

const IntegratorInfo& integrator_info(IntegratorKind k) {
  for (const IntegratorInfo& info : kIntegrators)
    if (info.kind == k) return info;
  throw std::logic_error("integrator missing from kIntegrators");
}

IntegratorKind integrator_from_name(const std::string& name) {
  if (name == "alpha") return IntegratorKind::GeneralizedAlpha;
  std::string names;
  for (const IntegratorInfo& info : kIntegrators) {
    if (name == info.name) return info.kind;
    names += (names.empty() ? "" : ", ") + std::string(info.name);
  }
  throw InputError("unknown integrator '" + name + "'; choose one of " + names);
}

double step_within(double h, double left) {
  if (h >= left * (1 - 1e-9)) return left;
  if (h > 0.5 * left) return 0.5 * left;
  return h;
}

double step_after_accepted(double err, double h, double proposal, double h_max) {
  // 0.85, not the textbooks' 0.9: at 0.9 a folding sheet at the default tolerance met the
  // 1 % accuracy bound of issue 15 with no margin, on one side or the other depending on
  // round-off in the linear solver
  // (test_a_folding_sheet_at_the_default_tolerance_follows_a_converged_run;
  // docs/performance.md, "Kept aggregates").
  constexpr double kSafety = 0.85;
  if (h < proposal) return std::min(h_max, proposal);  // cut to land on the end: not a measure
  const double grow = std::clamp(kSafety * std::cbrt(1.0 / std::max(err, 1e-12)), 0.2, 2.0);
  return std::min(h_max, h * grow);
}

double step_after_rejected(double h, bool measured, double err) {
  return h * (measured ? std::clamp(0.9 * std::cbrt(1.0 / err), 0.2, 0.9) : 0.25);
}

namespace {

std::string fmt(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

}  // namespace

template <int D>
void Simulator<D>::consistent_acceleration(const VectorXd& q, const VectorXd& v, double t,
                                        const FixPath<D>& path, VectorXd& acc,
                                        VectorXd& lam) {
  // Solve [M G^T; G 0] [acc; lam] = [f(q, v); -|d'|^2 / L0]: the equations of motion and
  // the second time derivative of every constraint at this instant.
  const int nm = D * num_masses();
  const auto nc = static_cast<Eigen::Index>(model_.constraints.size());
  const Kinematics kin = kinematics(q, v, path, t);
  VectorXd F, g;
  if (nc == 0) {
    forces(kin, VectorXd(), F, g);
    acc.resize(nm);
    for (int i = 0; i < num_masses(); ++i)
      acc.template segment<D>(D * i) = F.template segment<D>(D * i) / model_.mass[i];
    lam.resize(0);
  } else {
    forces_and_matrix(kin, VectorXd::Zero(nc), 1.0, 0.0, 0.0, F, g, consistency_lin_);
    VectorXd rhs(num_unknowns()), x;
    rhs.head(nm) = F;
    for (Eigen::Index j = 0; j < nc; ++j) {
      const auto& c = model_.constraints[j];
      const VecD dv = kin.vel(c.c[1]) - kin.vel(c.c[0]);
      rhs(nm + j) = -dv.squaredNorm() / c.length;
    }
    const bool ok = consistency_lin_.solve(rhs, x);
    if (!ok || !x.allFinite())
      throw SimulationError("could not compute a consistent acceleration at t=" + fmt(t) +
                            ": the constraints are redundant or degenerate. " +
                            failure_cures("Check for duplicate rods or rods with a length "
                                          "of zero"));
    acc = x.head(nm);
    lam = x.tail(nc);
  }
  if (!acc.allFinite())
    throw SimulationError("non-finite acceleration at t=" + fmt(t) +
                          ": a force became infinite. " +
                          failure_cures("Check for stiffness, damping or gravity out of "
                                        "scale with the masses"));
}

template <int D>
void Simulator<D>::make_consistent(const FixPath<D>& path, double h) {
  consistent_acceleration(state_.q, state_.v, state_.time, path, state_.acc, state_.lam);
  state_.aux = state_.acc;
  // Generalized-alpha is second order in every variable only if its auxiliary
  // acceleration starts at acc(0) + (am - af) h jerk(0) (Arnold & Bruls 2007); with
  // aux = acc(0) the positions of constrained systems lose an order of accuracy
  // (test_constrained_positions_converge_at_second_order). The jerk is a difference
  // quotient over one step of a Taylor move: its O(h) error enters aux at O(h^2).
  if (h > 0 && integrator == IntegratorKind::GeneralizedAlpha) {
    const AlphaParameters p = AlphaParameters::generalized(rho_inf);
    if (p.am != p.af) {
      const VectorXd q1 = state_.q + h * state_.v + (0.5 * h * h) * state_.acc;
      const VectorXd v1 = state_.v + h * state_.acc;
      VectorXd acc1, lam1;
      consistent_acceleration(q1, v1, state_.time + h, path, acc1, lam1);
      state_.aux += (p.am - p.af) * (acc1 - state_.acc);  // h * (acc1 - acc) / h
    }
  }
  state_.consistent = true;
}

template <int D>
bool Simulator<D>::reproject_accelerations() const {
  if (model_.constraints.empty()) return false;
  // Newmark (rho_inf = 1) and generalized-alpha close to it, whose multipliers otherwise
  // grow on a double pendulum within seconds (test_undamped_alpha_stays_stable_on_long_
  // constrained_runs, test_double_pendulum_with_rho_one_keeps_energy_bounded_and_rods_rigid).
  return integrator == IntegratorKind::Newmark ||
         (integrator == IntegratorKind::GeneralizedAlpha && rho_inf > 0.95);
}

template <int D>
double Simulator<D>::correction_error(const VectorXd& delta, double acc_tol, double round_off) const {
  const int nm = D * num_masses();
  VectorXd rods;  // the rods' share G^T dlam, from the Newton matrix's column block
  if (delta.size() > nm) {
    VectorXd dlam = VectorXd::Zero(delta.size());
    dlam.tail(delta.size() - nm) = delta.tail(delta.size() - nm);
    rods = lin_.elements.multiply(dlam);
  }
  return in_mass_chunks([&](int first, int last) {
    double err = 0;
    for (int i = first; i < last; ++i) {
      double largest = 0;  // of the mass's components: one division per mass
      for (int k = 0; k < D; ++k) {
        const int r = D * i + k;
        largest = std::max(largest, std::abs(model_.mass[i] * delta(r) + (rods.size() ? rods(r) : 0.0)));
      }
      err = std::max(err, largest / std::max(model_.mass[i] * acc_tol, round_off));
    }
    return err;
  });
}

template <int D>
NewmarkStep Simulator<D>::predict(double h, IntegratorKind kind, double& acc_max) const {
  const State<D>& s = state_;
  const int nm = D * num_masses();
  NewmarkStep step = newmark_coefficients(kind, rho_inf, h);
  step.q_pred.resize(nm);
  step.v_pred.resize(nm);
  step.w.resize(nm);
  acc_max = in_coordinate_chunks([&](Eigen::Index at, Eigen::Index size) {  // the largest |acc| in the same pass
    newmark_predict_rows(kind, rho_inf, h, s.q, s.v, s.acc, s.aux, at, size, step);
    return size > 0 ? s.acc.segment(at, size).cwiseAbs().maxCoeff() : 0.0;
  });
  return step;
}

template <int D>
void Simulator<D>::commit_step(const NewmarkStep& step, const VectorXd& q1, const VectorXd& v1,
                            const VectorXd& acc, const VectorXd& lam, double t1) {
  const int nm = D * num_masses();
  // Copied into the state's own vectors, in chunks: they keep their memory, which a
  // read from another thread while simulate() runs may hold.
  state_.aux.resize(nm);
  in_coordinate_chunks([&](Eigen::Index at, Eigen::Index size) {
    state_.q.segment(at, size) = q1.segment(at, size);
    state_.v.segment(at, size) = v1.segment(at, size);
    state_.aux.segment(at, size) = step.c * acc.segment(at, size) + step.w.segment(at, size);
    state_.acc.segment(at, size) = acc.segment(at, size);
    return 0.0;
  });
  state_.lam = lam;
  state_.time = t1;
}

template <int D>
typename Simulator<D>::NewtonResidual Simulator<D>::newton_residual(const VectorXd& F, const VectorXd& g, const VectorXd& acc,
                                                             double q_max, double acc_tol, double pos_tol, double bq,
                                                             VectorXd& rhs) const {
  const int nm = D * num_masses(), nc = static_cast<int>(model_.constraints.size());
  // Residual; the constraint row is divided by bq so the Newton matrix
  // [M - bq dF/dq - bv dF/dv, G^T; G, 0] does not degenerate as h -> 0.
  // Round-off of the residual: of the element forces themselves, and of spring
  // elongations computed from coordinates of size |q| (stiff springs far from 0).
  const double q_size = q_max + length_scale_;
  const double round_off = 1e-13 * element_force_scale_ + 1e-13 * max_stiffness_ * q_size;
  const double g_floor = 1e-13 * q_size;
  // The largest residual against its tolerance (<= 1: converged), and the sum of the
  // squared accelerations it stands for (rms_acceleration's, in the same pass).
  const MassPartial forces = in_mass_chunks([&](int first, int last) {
    MassPartial found;
    for (int i = first; i < last; ++i) {
      double largest = 0, squares = 0;  // of the mass's components: one division per mass
      for (int k = 0; k < D; ++k) {
        const int r = D * i + k;
        rhs(r) = F(r) - model_.mass[i] * acc(r);
        largest = std::max(largest, std::abs(rhs(r)));
        squares += rhs(r) * rhs(r);
      }
      found.max = std::max(found.max, largest / std::max(model_.mass[i] * acc_tol, round_off));
      found.sum += squares / (model_.mass[i] * model_.mass[i]);
    }
    return found;
  });
  NewtonResidual out;
  out.round_off = round_off;
  out.force_err = forces.max;
  out.acceleration_squares = forces.sum;
  for (int j = 0; j < nc; ++j) {
    rhs(nm + j) = -g(j) / bq;
    out.constraint_err = std::max(out.constraint_err, std::abs(g(j)) / std::max(pos_tol, g_floor));
  }
  return out;
}

// Newton's iterate and what it carries from one iteration to the next.
template <int D>
struct Simulator<D>::NewtonIteration {
  VectorXd acc, lam;           // the iterate: the new accelerations and multipliers
  VectorXd acc_prev, lam_prev;  // before the last full correction (for a halved one)
  VectorXd q1, v1, F, g;       // positions, velocities, forces and constraints at the iterate
  VectorXd rhs, delta;         // minus the residual (M acc - F, g / bq); the last correction
  double err_prev = std::numeric_limits<double>::infinity();
  double fraction = 1.0;       // of the last correction taken
  int corrections = 0;         // solved so far
  double correction_err = std::numeric_limits<double>::infinity();
  NewtonErrorTest error_test;
  bool check_residual_first = false;  // forces before the matrix (newton_correct's end)
  std::function<VectorXd(NewtonPredictor::Guess)> guess;
};

template <int D>
NewtonSettings Simulator<D>::newton_settings() const {
  return {newton_tol, tolerance, length_scale_, error_scale_};
}

template <int D>
bool Simulator<D>::accept_step(const NewtonIteration& n, const NewmarkStep& step, double h, IntegratorKind kind,
                            int it, const FixPath<D>& path, bool early, std::string& why) {
  const int nm = D * num_masses();
  const double t1 = state_.time + h;
  why = collider_crossing(state_.q, n.q1, state_.time, t1);
  if (!why.empty()) {
    step_cure_ = kCrossingCure;
    return false;
  }
  why = self_crossing(n.q1, t1, path);
  if (!why.empty()) {
    step_cure_ = kSelfCrossingCure;
    return false;
  }
  stopped_early_ = early;
  // An acceleration error e (RMS over the masses) moves the local error estimate (RMS
  // over the coordinates) by at most coefficient h^2 e / sqrt(D).
  early_stop_share_ = early && tolerance > 0 ? local_error_coefficient(kind, rho_inf) * h * h *
                                                   n.error_test.error_estimate() /
                                                   (std::sqrt(static_cast<double>(D)) * tolerance * error_scale_)
                                             : 0.0;
  last_local_error = local_error_estimate(state_.acc, n.acc, h, kind);
  // A guess's miss e would have left Newton a residual of about J e.
  predictor_.learn(n.guess, state_.acc, n.acc, h, it, [&](const VectorXd& miss) {
    VectorXd e = VectorXd::Zero(num_unknowns());
    e.head(nm) = miss;
    return rms_acceleration(lin_.elements.multiply(e, split_work_));
  });
  commit_step(step, n.q1, n.v1, n.acc, n.lam, t1);
  if (!model_.colliders.empty()) {
    touched_.assign(num_masses(), 0);
    for (const ContactState& c : contacts_) touched_[c.mass] = 1;
  }
  last_newton_iterations = it;
  newton_iterations += it;
  if (reproject_accelerations()) make_consistent(path, 0.0);
  return true;
}

template <int D>
bool Simulator<D>::newton_correct(NewtonIteration& n, const NewmarkStep& step, const NewtonTolerances& tol,
                               double round_off) {
  const int nm = D * num_masses();
  const int nc = static_cast<int>(model_.constraints.size());
  const double last_correction_err = n.correction_err;
  n.correction_err = std::numeric_limits<double>::infinity();
  // The first correction tighter while calm: linear_tolerance (time/newton.hpp). contacts_
  // is the assembly's just made. (A multigrid that fails within this solve falls back to
  // the factor at the same tolerance, for this one solve.)
  const bool first_correction = n.corrections++ == 0;
  const bool calm = contacts_.empty() && !self_touching_ && stencils_braced_ && lin_.multigrid();
  if (calm && first_correction && tolerance > 0) ++tight_first_corrections;
  const double linear_tol = linear_tolerance(tolerance > 0, first_correction, calm);
  if (!lin_.solve(n.rhs, n.delta, linear_tol, &n.lam)) return false;
  double correction_squares = in_coordinate_chunks([&](Eigen::Index at, Eigen::Index size) {
    n.acc_prev.segment(at, size) = n.acc.segment(at, size);
    n.acc.segment(at, size) += n.delta.segment(at, size);
    return MassPartial{0.0, n.delta.segment(at, size).squaredNorm()};
  }).sum;
  if (!contacts_.empty()) {
    limit_contact_corrections(n.acc_prev, step.bq, n.v1, step.v_pred, step.bv, n.acc);
    n.delta.head(nm) = n.acc - n.acc_prev;  // the correction taken, for the measures below
    correction_squares = n.delta.head(nm).squaredNorm();
  }
  n.lam += n.delta.tail(nc);
  n.correction_err = correction_error(n.delta, tol.acc, round_off);
  const double correction_rms = std::sqrt(correction_squares / static_cast<double>(num_masses()));
  if (tolerance > 0) n.error_test.add_correction(correction_rms);
  // Newton's error after this correction, estimated from its rate as SUNDIALS IDA does
  // (NewtonErrorTest; without error control, the max-norm correction_err and the rate
  // of the last two corrections): when it is within the tolerance, the next residual
  // is computed before the matrix, which is then assembled only if Newton goes on. The
  // decisions are those of a full assembly; most steps save the matrix of their last
  // iterate (docs/performance.md). Without a rate yet (a step's first correction, or the
  // first after a halving), one of 1/2 is assumed: a sheet resting on a floor stops
  // after its first correction in most steps, and did assemble a matrix there for nothing
  // (docs/performance.md, "What a contact costs to evaluate").
  const bool known_rate = std::isfinite(last_correction_err) && last_correction_err > 0;
  const double rate = known_rate ? n.correction_err / last_correction_err : 0.5;
  const double estimate = known_rate ? n.error_test.error_estimate() : correction_rms;  // rate 1/2
  n.check_residual_first = rate < 1 && (rate / (1 - rate) * n.correction_err <= 1.0 ||
                                        (tolerance > 0 && estimate <= tol.close_enough));
  return true;
}

// Projected, damped Newton on the step's accelerations and multipliers. The Newton matrix
// leaves out the destabilizing parts of the geometric stiffness (compressed springs,
// pushing rods), which keeps it definite, so that crumpling cloth does not send Newton
// wandering (test_crumpling_sheet_*). Where nothing is compressed it is the exact
// Jacobian. When a full correction still increases the error (from the fourth iteration
// on: the first ones may overshoot on the way to convergence), it is halved once. Only
// once: the error is the largest force residual, which on fine sheets sits in stiff
// springs and can grow while the iterate gets closer, so that more halvings stall Newton;
// a pendulum stepped at 1e-7 s still needs the one (test_newton_converges_for_any_step_size).
template <int D>
bool Simulator<D>::implicit_step(double h, const FixPath<D>& path, std::string& why) {
  step_cure_.clear();
  const State<D>& s = state_;
  const int nm = D * num_masses();
  const int nc = static_cast<int>(model_.constraints.size());
  list_self_pairs(h, path);
  const IntegratorKind kind = step_kind(h, path);
  double acc_max;
  const NewmarkStep step = predict(h, kind, acc_max);
  const double t1 = s.time + h;
  const NewtonTolerances tol = newton_tolerances(newton_settings(), model_.gravity.norm(), acc_max, step.bq);
  NewtonIteration n;
  // Initial guess: see NewtonPredictor. The last acceleration alone is far off in stiff
  // springs: bq times its error is a position error of hundreds of amplitudes, where the
  // springs are far from their linearization; from q + h v, Newton starts within their
  // reach on fine sheets.
  n.guess = [&](NewtonPredictor::Guess k) {
    return predictor_.guess(k, s.acc, h, [&] { return VectorXd((s.q + h * s.v - step.q_pred) / step.bq); });
  };
  const bool retry = strict_retry_.time == s.time && strict_retry_.h == h && strict_retry_.acc.size() == nm;
  if (retry) {  // the same step again, from where Newton stopped
    n.acc = strict_retry_.acc;
    n.lam = strict_retry_.lam;
  } else {
    n.acc = n.guess(predictor_.choice);
    guess_arrivals(s.q, step, t1, n.acc);
    n.lam = s.lam;
  }
  strict_retry_ = StrictRetry();
  n.acc_prev = n.acc;
  n.lam_prev = n.lam;
  n.rhs.resize(num_unknowns());
  n.q1.resize(nm);
  n.v1.resize(nm);
  definite_newton_ = newton_matrix == NewtonMatrix::Projected;

  for (int it = 0; it <= max_newton_iterations; ++it) {
    const double q_max = in_coordinate_chunks([&](Eigen::Index at, Eigen::Index size) {
      n.q1.segment(at, size) = step.q_pred.segment(at, size) + step.bq * n.acc.segment(at, size);
      n.v1.segment(at, size) = step.v_pred.segment(at, size) + step.bv * n.acc.segment(at, size);
      return size > 0 ? n.q1.segment(at, size).cwiseAbs().maxCoeff() : 0.0;
    });
    const Kinematics kin = kinematics(n.q1, n.v1, path, t1);
    const bool matrix_assembled = !n.check_residual_first;
    if (n.check_residual_first) {
      forces(kin, n.lam, n.F, n.g);
    } else {
      forces_and_matrix(kin, n.lam, 1.0, step.bq, step.bv, n.F, n.g, lin_);
      ++matrix_assemblies;
    }
    n.check_residual_first = false;
    const NewtonResidual residual = newton_residual(n.F, n.g, n.acc, q_max, tol.acc, tol.pos, step.bq, n.rhs);
    const double err = std::max(residual.force_err, residual.constraint_err);
    // Error control only; the constraint rows are not accelerations (rms_acceleration).
    if (tolerance > 0) n.error_test.add_residual(std::sqrt(residual.acceleration_squares / std::max(num_masses(), 1)));
    // A NaN in the force rows makes the sum NaN (a maximum may pass over it); only a sum
    // that is not finite needs the rows read again.
    const bool finite = (std::isfinite(residual.acceleration_squares) || n.rhs.head(nm).allFinite()) &&
                        n.rhs.tail(nc).allFinite();
    if (!std::isfinite(err) || !finite) {
      why = "the forces became NaN or Inf";
      return false;
    }
    const NewtonProgress progress{it, err, residual.constraint_err, n.err_prev, n.correction_err,
                                  n.error_test.error_estimate()};
    NewtonStop stop = newton_may_stop(progress, tol, tolerance > 0, strict_newton_);
    // An early stop that gains energy is refused for Newton's stricter tests (as its retry
    // would stop), except at the last iteration: then advance_controlled's test decides.
    if (stop.early && it < max_newton_iterations && !early_stop_keeps_energy(kin))
      stop = newton_may_stop(progress, tol, tolerance > 0, true);
    if (stop.stop) return accept_step(n, step, h, kind, it, path, stop.early, why);
    if (it == max_newton_iterations) break;
    if (!matrix_assembled) {
      forces_and_matrix(kin, n.lam, 1.0, step.bq, step.bv, n.F, n.g, lin_);
      ++matrix_assemblies;
    }
    // The multigrid's smoother takes the matrix's values anew at every time step, and at
    // every Newton iteration while something touches: a contact's stiffness, damping and
    // friction change by orders of magnitude from one iteration to the next as masses
    // enter the contact band and stick or slide, and a smoother that has not seen them
    // costs GMRES three times the iterations on a sheet landing on a floor
    // (docs/performance.md, "The smoother follows the contacts").
    if (it == 0 || !contacts_.empty() || self_touching_) lin_.renew_smoother();
    if (newton_matrix == NewtonMatrix::OnDemand && err > n.err_prev && !definite_newton_) {
      definite_newton_ = true;  // the error grew: projected from the next assembly on
      lin_.invalidate_factor();
    }
    if (it >= 3 && err > n.err_prev && n.fraction == 1.0) {  // halve the last correction
      n.correction_err = std::numeric_limits<double>::infinity();
      n.fraction = 0.5;
      n.acc = n.acc_prev + n.fraction * n.delta.head(nm);
      n.lam = n.lam_prev + n.fraction * n.delta.tail(nc);
      continue;
    }
    n.err_prev = err;
    n.lam_prev = n.lam;  // acc_prev: with the correction
    n.fraction = 1.0;
    if (!newton_correct(n, step, tol, residual.round_off)) {
      why = "the Newton matrix is singular";
      return false;
    }
  }
  why = "Newton's method did not converge in " + std::to_string(max_newton_iterations) +
        " iterations";
  return false;
}

// Newton's early stop (at its error estimate, an RMS over the masses) must keep the
// energy within the share of what advance_controlled's test of the step allows (both its
// rise in the step and its margin over the ceiling) that Newton's stop may take of the
// step's error (kShareOfTolerance): otherwise Newton goes on. On a 449^2 sheet released
// from two corners, early stops left the masses next to the pins far from converged and
// gained energy; the step was rejected, and its retry to the force tolerance ground
// through every Newton iteration there (docs/performance.md, "Large sheets";
// test_an_early_newton_stop_keeps_the_energy). A share: with all of the test's allowance,
// early stops let a rope's energy creep up to its bound step after step
// (test_a_rope_gains_energy_with_fixed_steps_and_not_under_error_control).
template <int D>
bool Simulator<D>::early_stop_keeps_energy(const Kinematics& kin) {
  constexpr double kEarlyStopEnergyShare = NewtonTolerances::kShareOfTolerance;
  early_stop_energy_ = std::numeric_limits<double>::quiet_NaN();
  if (!energy_test_.active) return true;
  Kinematics state_to_be = kin;  // its energy as the state's (total_energy() once accepted)
  state_to_be.penalty_v = kin.v;
  const double energy = kinetic_energy(*kin.v) + potential_energy(state_to_be);
  if (!energy_kept(energy_test_.before, energy, kEarlyStopEnergyShare * energy_test_.scale, tolerance,
                   energy_test_.ceiling))
    return false;
  early_stop_energy_ = energy;
  return true;
}

template <int D>
bool Simulator<D>::explicit_step(double h, const FixPath<D>& path, std::string& why) {
  step_cure_.clear();
  list_self_pairs(h, path);
  const VectorXd no_lam;
  auto accel = [&](const VectorXd& q, const VectorXd& v, double t) {
    VectorXd F, g;
    forces(kinematics(q, v, path, t), no_lam, F, g);
    for (int i = 0; i < num_masses(); ++i) F.template segment<D>(D * i) /= model_.mass[i];
    return F;
  };
  const State<D>& s = state_;
  VectorXd q1, v1;
  switch (integrator) {
    case IntegratorKind::ExplicitEuler: {
      const VectorXd a0 = accel(s.q, s.v, s.time);
      q1 = s.q + h * s.v;
      v1 = s.v + h * a0;
      break;
    }
    case IntegratorKind::SymplecticEuler: {
      v1 = s.v + h * accel(s.q, s.v, s.time);
      q1 = s.q + h * v1;
      break;
    }
    default: {  // RK2, midpoint rule as on the seeds' page
      const VectorXd a0 = accel(s.q, s.v, s.time);
      const VectorXd qm = s.q + 0.5 * h * s.v, vm = s.v + 0.5 * h * a0;
      const VectorXd am = accel(qm, vm, s.time + 0.5 * h);
      q1 = s.q + h * vm;
      v1 = s.v + h * am;
    }
  }
  if (!q1.allFinite() || !v1.allFinite()) {
    why = "the state became NaN or Inf";
    return false;
  }
  why = collider_crossing(s.q, q1, s.time, s.time + h);
  if (!why.empty()) {
    step_cure_ = kCrossingCure;
    return false;
  }
  why = self_crossing(q1, s.time + h, path);
  if (!why.empty()) {
    step_cure_ = kSelfCrossingCure;
    return false;
  }
  state_.q = q1;
  state_.v = v1;
  state_.time += h;
  state_.consistent = false;  // acc/aux are not tracked by explicit methods
  last_newton_iterations = 0;
  return true;
}

// A mass held only by rods that all lie in one plane (in 2-D: on one line), three or more
// of them (two in 2-D), cannot be held against a load across that plane: to first order
// the rods cannot push it there, to second order they would need to stretch. A flat
// triangulated plate of rods under gravity is such a network: it fails at once, or under
// error control swings on its pins until its creases fold through
// (test_a_flat_rod_plate_is_named_as_the_cause, test_flat_rod_plate_names_the_cause).
template <int D>
std::string Simulator<D>::flat_rod_diagnosis(const VectorXd& q, const std::vector<VecD>& fix_pos,
                                          bool at_start) const {
  using MatD = Eigen::Matrix<double, D, D>;
  std::vector<MatD> spread(num_masses(), MatD::Zero());
  std::vector<int> rods(num_masses(), 0);
  FixPath<D> at_rest;
  at_rest.start = at_rest.target = &fix_pos;
  const Kinematics kin = kinematics(q, q, at_rest, state_.time);
  for (const DistanceConstraint& c : model_.constraints) {
    const VecD d = kin.pos(c.c[1]) - kin.pos(c.c[0]);
    if (!(d.norm() > 0)) continue;
    const VecD n = d.normalized();
    for (const Connector& end : c.c) {
      if (end.type == FIX) continue;
      spread[end.nr] += n * n.transpose();
      ++rods[end.nr];
    }
  }
  std::vector<int> flat;
  for (int i = 0; i < num_masses(); ++i) {
    if (rods[i] < D) continue;
    // The spread's smallest eigenvalue: the rods' squared sines out of their best plane.
    const double across = Eigen::SelfAdjointEigenSolver<MatD>(spread[i], Eigen::EigenvaluesOnly)
                              .eigenvalues()(0);
    if (across < 1e-6 * rods[i]) flat.push_back(i);
  }
  if (flat.empty()) return {};
  // A system built from arrays names its vertices, as the caller (a mesh) numbers them.
  const bool by_vertex = !model_.vertices.empty();
  if (by_vertex) {
    std::vector<int> vertex_of(num_masses());
    for (std::size_t v = 0; v < model_.vertices.size(); ++v)
      if (model_.vertices[v].type == MASS) vertex_of[model_.vertices[v].nr] = static_cast<int>(v);
    for (int& i : flat) i = vertex_of[i];
    std::sort(flat.begin(), flat.end());
  }
  std::string names;
  for (std::size_t k = 0; k < std::min<std::size_t>(flat.size(), 5); ++k)
    names += (k ? ", " : "") + std::to_string(flat[k]);
  if (flat.size() > 5) names += " and " + std::to_string(flat.size() - 5) + " more";
  const bool one = flat.size() == 1;
  const std::string noun = by_vertex ? (one ? "vertex " : "vertices ") : (one ? "mass " : "masses ");
  return noun + names +
         (one ? " is" : " are") + " held only by rods that " + (at_start ? "lay " : "lie ") +
         (D == 3 ? "in one plane" : "on one line") + (at_start ? " at the start of the run" : "") +
         ", a flat rod network: rods cannot hold a load across it (they would need to "
         "stretch), so no step size helps. Cures: give the structure some depth across "
         "that " + (D == 3 ? "plane" : "line") + ", or make some of those rods springs";
}

template <int D>
std::string Simulator<D>::failure_cures(const std::string& usual) const {
  if (model_.constraints.empty()) return usual;
  // A flat network that has since bent (a plate swinging on its pins) fails where its
  // creases fold through: named as it started (test_flat_rod_plate_names_the_cause).
  std::string flat = flat_rod_diagnosis(state_.q, state_.fix_pos, false);
  if (flat.empty() && rods_checked_q_.size() == state_.q.size() &&
      static_cast<int>(rods_checked_fix_pos_.size()) == num_fixes())
    flat = flat_rod_diagnosis(rods_checked_q_, rods_checked_fix_pos_, true);
  return flat.empty() ? usual : "Likely cause: " + flat;
}

template <int D>
void Simulator<D>::require_bounded_positions() const {
  const double bound = 1e12 * length_scale_;
  if (state_.q.size() > 0 && state_.q.cwiseAbs().maxCoeff() > bound) {
    // Committed but absurd: the run has diverged, or flown off; no halving brings it back
    // (test_core_input.py, test_a_mass_flying_off_stops_the_run_under_error_control).
    throw SimulationError("the simulation diverged at t=" + fmt(state_.time) +
                          " (positions beyond " + fmt(bound) + "); with " +
                          integrator_name(integrator) +
                          " use more steps, or an implicit integrator");
  }
}

template <int D>
void Simulator<D>::advance(double h, const FixPath<D>& path, int depth) {
  std::string why;
  const bool ok = is_explicit(integrator) ? explicit_step(h, path, why)
                                          : implicit_step(h, path, why);
  if (ok) require_bounded_positions();
  if (ok) return;
  // An explicit step fails for good unless it passed through something: a smaller one
  // may not (test_an_explicit_integrator_halves_a_step_that_crossed).
  const bool crossed = step_cure_ == kCrossingCure || step_cure_ == kSelfCrossingCure;
  if (depth >= max_halvings || (is_explicit(integrator) && !crossed))
    throw SimulationError("step from t=" + fmt(state_.time) + " with h=" + fmt(h) +
                          " failed" +
                          (depth > 0 ? " after halving it " + std::to_string(depth) + " times"
                                     : std::string()) +
                          ": " + why + ". " +
                          failure_cures(!step_cure_.empty()
                                            ? step_cure_
                                            : "Likely cures: more steps (substeps), softer springs "
                                              "or more damping, a smaller rho_inf, or check the "
                                              "input for degenerate geometry"));
  ++halved_steps;
  predictor_.forget();  // a failed step starts its halves from q + h v, as the first step
  // A new step size re-excites the index-3 multiplier transient, which successive
  // halvings amplify (accelerations ~ 1/h^2): restart from consistent values instead.
  if (!model_.constraints.empty() && !is_explicit(integrator)) make_consistent(path, 0.0);
  advance(0.5 * h, path, depth + 1);
  advance(0.5 * h, path, depth + 1);
}

template <int D>
IntegratorKind Simulator<D>::step_kind(double h, const FixPath<D>& path) const {
  if constexpr (D == 3) {
    if (self_touching_) return IntegratorKind::ImplicitEuler;  // as on a collider
    if (model_.colliders.empty() || integrator == IntegratorKind::ImplicitEuler) return integrator;
    const double t1 = state_.time + h;
    for (int i = 0; i < num_masses(); ++i) {
      const Vec3 p = state_.q.template segment<3>(3 * i), v = state_.v.template segment<3>(3 * i);
      if (model_.colliders.nearest(p, state_.time).touching || model_.colliders.nearest(p + h * v, t1).touching)
        return IntegratorKind::ImplicitEuler;
    }
  }
  return integrator;
}

template <int D>
std::string Simulator<D>::collider_crossing(const VectorXd& q0, const VectorXd& q1, double t0, double t1) const {
  if constexpr (D != 3) {
    return {};
  } else {
    if (model_.colliders.empty()) return {};
    // In chunks of masses on the workers (a tree query a mass at every step's end), each
    // finding its first mass that crosses: the first of those is the one a single pass
    // finds, so the message is the same on any number of workers.
    std::vector<int> first_crossing(contact_chunks(), -1);
    in_contact_chunks([&](int c, int first, int last) {
      for (int i = first; i < last; ++i)
        if (model_.colliders.crosses(q0.template segment<3>(3 * i), q1.template segment<3>(3 * i), t0, t1)) {
          first_crossing[c] = i;
          return;
        }
    });
    for (const int i : first_crossing) {
      if (i < 0) continue;
      const Vec3 p0 = q0.template segment<3>(3 * i), p1 = q1.template segment<3>(3 * i);
      // Named by its vertex where it has one: masses may be numbered in locality order.
      return model_.connector_name(Connector{MASS, i, model_.id}) + " would pass through a collider (it moves at " +
             fmt((p1 - p0).norm() / (t1 - t0)) + " m/s, the colliders at up to " +
             fmt(model_.colliders.largest_speed()) + " m/s; the thinnest is " + fmt(model_.colliders.thinnest()) +
             " m thick)";
    }
    return {};
  }
}

template <int D>
void Simulator<D>::list_self_pairs(double h, const FixPath<D>& path) {
  self_touching_ = false;
  if constexpr (D == 3) {
    if (!model_.self_contact.enabled()) {
      self_pairs_.clear();
      return;
    }
    const State<D>& s = state_;
    const Kinematics k0 = kinematics(s.q, s.v, path, s.time);
    // the predicted end (explicit methods keep no acceleration)
    VectorXd q1 = s.q + h * s.v;
    if (s.acc.size() == s.q.size()) q1 += (0.5 * h * h) * s.acc;
    const std::vector<Vec3> x0 = vertex_points(k0);
    std::vector<Vec3> x1 = vertex_points(kinematics(q1, s.v, path, s.time + h));
    const int n = num_vertices();
    std::vector<Vec3> v0(n);
    const std::vector<double> inverse_mass = vertex_inverse_masses();
    std::vector<double> springs(n, 0.0);
    for (int i = 0; i < n; ++i) {
      const Connector c = vertex(i);
      v0[i] = k0.vel(c);
      if (c.type == MASS) springs[i] = model_.spring_stiffness_at[c.nr];
    }
    // A mass predicted deep into a collider is stopped by its penalty: predicted where the
    // penalty is fully stiff instead, or a sheet landing strayed from its prediction at
    // every step and had its pairs listed twice (docs/performance.md, "Self-collision").
    // Not a mass predicted to move less than kSelfStill of the skin, among colliders that
    // stand still: it ends the step where it starts, as far as the pairs care (resting on
    // a collider, it cost a query per vertex and step).
    const double skin = self_skin();
    const double still = model_.colliders.moving() ? 0.0 : kSelfStill * skin;
    if (!model_.colliders.empty())
      for (int i : model_.self_contact.points()) {
        if (!(inverse_mass[i] > 0) || (x1[i] - x0[i]).norm() < still) continue;
        const ContactPoint c = model_.colliders.nearest(x1[i], s.time + h, v0[i]);
        const double stiff = c.thickness - (c.ramp > 0 ? c.ramp : contact_ramp(c.thickness));
        if (c.touching && c.distance < stiff) x1[i] += (stiff - c.distance) * c.normal;
      }
    self_predicted_ = x1;
    const std::vector<double>& margins = self_margins();
    const SelfContact& contact = model_.self_contact;
    if (contact.window_holds(self_window_, x0, x1, &margins)) {
      self_touching_ = contact.touching(x0, x1, self_pairs_, self_listing_positions_);
      return;
    }
    ++self_contact_listings;
    self_window_ = contact.open_window(x0, x1, margins, skin);
    if (self_window_.open()) {
      // Listed for every vertex anywhere within half the skin around x0: its end x0, with
      // that as its margin.
      list_pairs(contact.pairs(x0, x0, std::vector<double>(n, 0.5 * skin), v0, inverse_mass, springs,
                               contact_gravity(), self_pairs_, self_touching_),
                 k0, x0);
      self_touching_ = contact.touching(x0, x1, self_pairs_, x0);
      return;
    }
    list_pairs(contact.pairs(x0, x1, margins, v0, inverse_mass, springs, contact_gravity(), self_pairs_,
                             self_touching_),
               k0, x0);
  }
}

// Pairs listed anew change the energy the steps are tested with: a pair listed already
// within its distance (at the first step, after a restart) would add its energy to the
// step however short, which then failed at the smallest step size
// (test_pairs_listed_touching_do_not_count_as_energy_the_step_gained). The energy of the
// state the step starts from, and the ceiling, take it in. Only a new pair within its
// distance where it was listed has any: a pair carried on keeps its energy (its
// stiffness comes along), and one dropped was not within its distance (it would be
// listed again).
template <int D>
void Simulator<D>::list_pairs(std::vector<SelfContactPair> pairs, const Kinematics& start,
                              const std::vector<Vec3>& listed_at) {
  self_pairs_ = std::move(pairs);
  self_seen_apart_.assign(self_pairs_.size(), PairSeenApart());
  self_listing_positions_ = listed_at;
  if (!energy_test_.active) return;
  double added = 0;
  for (const SelfContactPair& pair : self_pairs_)
    if (!pair.carried && pair.clearance < 0) added += self_contact_terms(pair, start).energy;
  energy_test_.before += added;
  energy_test_.ceiling += added;
  energy_ceiling_ = energy_test_.ceiling;  // (kept if the step then throws)
}

template <int D>
std::vector<double> Simulator<D>::vertex_inverse_masses() const {
  std::vector<double> inverse(num_vertices(), 0.0);
  for (int i = 0; i < num_vertices(); ++i) {
    const Connector c = vertex(i);
    if (c.type == MASS) inverse[i] = 1 / model_.mass[c.nr];
  }
  return inverse;
}

template <int D>
const std::vector<double>& Simulator<D>::self_margins() {
  if (self_margins_.size() != static_cast<std::size_t>(num_vertices()))
    self_margins_.assign(num_vertices(), std::max(kMarginStart * model_.self_contact.distance(), least_self_margin()));
  return self_margins_;
}

template <int D>
std::string Simulator<D>::self_crossing(const VectorXd& q1, double t1, const FixPath<D>& path) {
  if constexpr (D != 3) {
    return {};
  } else {
    if (!model_.self_contact.enabled()) return {};
    const std::vector<Vec3> x0 = vertex_points(kinematics(state_.q, state_.v, path, state_.time));
    const std::vector<Vec3> x1 = vertex_points(kinematics(q1, state_.v, path, t1));
    std::string why;
    // Only the vertices that collide: others (a structure simulated with these that has no
    // self-collision) may stray as they like (test_only_colliding_vertices_must_keep_to_the_margin).
    // A vertex that strayed beyond its margin gets three times the stray as its margin
    // (up to kMarginMost) for the smaller steps that follow; one that did not, three times
    // its stray, or a tenth less than its margin if that is more (within kMarginLeast and
    // kMarginMost).
    std::vector<double>& margins = self_margins_;
    self_margins();
    const double least = least_self_margin();
    const double most = kMarginMost * model_.self_contact.distance();
    std::vector<double> next = margins;
    std::vector<char> strayed(x1.size(), 0);
    if (self_window_.open() && !model_.self_contact.window_holds(self_window_, x0, x1, nullptr))
      why = "the vertices moved relative to each other beyond what their self-collision pairs were listed for";
    for (int i : model_.self_contact.points()) {
      const double stray = (x1[i] - self_predicted_[i]).norm();
      if (!self_window_.open() && stray > margins[i] && why.empty())
        why = "vertex " + std::to_string(i) + " ended the step " + fmt(stray) +
              " m from where its self-collision pairs were listed for";
      if (stray > margins[i]) {
        strayed[i] = 1;
        next[i] = std::min(most, std::max(margins[i], 3 * stray));
      } else {
        next[i] = std::min(most, std::max(least, std::max(3 * stray, kMarginKept * margins[i])));
      }
    }
    if (!why.empty()) {
      for (int i : model_.self_contact.points()) margins[i] = std::max(margins[i], next[i]);
      // The pairs listed may miss some. An implicit step stands if the pairs listed anew
      // over it as taken that it missed do not act at its ends, where its forces are
      // evaluated, nor cross (test_a_step_beyond_its_margins_stands_if_it_missed_no_pair).
      // An explicit one is halved: cheap, and what keeps its contact forces stable
      // (test_an_explicit_integrator_halves_a_step_that_crossed).
      if (!is_explicit(integrator)) {
        ++self_contact_relistings;
        // Listed for margins (no window), the pairs of vertices that all kept to theirs
        // were listed if they could come near: only pairs with a vertex that strayed.
        const std::string missed = model_.self_contact.missed(x0, x1, self_pairs_, vertex_inverse_masses(),
                                                              self_window_.open() ? nullptr : &strayed);
        why = missed.empty() ? "" : why + ", and " + missed;
      }
    } else {
      margins = next;
    }
    if (why.empty()) why = model_.self_contact.crossing(x0, x1, self_pairs_, &self_listing_positions_);
    if (why.empty()) return why;
    ++self_contact_refusals;
    return "in the step from t=" + fmt(state_.time) + ", " + why;
  }
}

template <int D>
double Simulator<D>::rms_acceleration(const VectorXd& forces) const {
  double sum = 0;
  for (int i = 0; i < num_masses(); ++i)
    sum += forces.template segment<D>(D * i).squaredNorm() / (model_.mass[i] * model_.mass[i]);
  return std::sqrt(sum / std::max(num_masses(), 1));
}

template <int D>
double Simulator<D>::local_error_estimate(const VectorXd& acc0, const VectorXd& acc1,
                                       double h, IntegratorKind kind) const {
  const Eigen::Index n = acc1.size();
  if (n == 0) return 0.0;
  const double rms = (acc1 - acc0).norm() / std::sqrt(static_cast<double>(n));
  return local_error_coefficient(kind, rho_inf) * h * h * rms;
}

template <int D>
void Simulator<D>::advance_controlled(double t_end, double h_max, const FixPath<D>& path) {
  // Energy can only be checked where the physics cannot add any: fixes at rest.
  const bool check_energy = !path.moving && !model_.colliders.moving();
  // The energy at stake, independent of where the origin is: the weight times the
  // structure's size, plus the kinetic and spring energy it has now.
  double weight_energy = 0, gravity_potential = 0, total_mass = 0;
  for (int i = 0; i < num_masses(); ++i) {
    weight_energy += model_.mass[i] * model_.gravity.norm() * length_scale_;
    gravity_potential -= model_.mass[i] * model_.gravity.dot(pos(i));
    total_mass += model_.mass[i];
  }
  const double energy_now = total_energy();
  // And at least the kinetic energy of the structure moving by a thousandth of a step's
  // position tolerance in one step: without gravity a structure at rest has an energy of
  // round-off (1e-37 J for a folded hinge, 2e-19 J for a bent wire), and against it every
  // step's round-off was a gain; steps were rejected and cut without end
  // (test_a_structure_at_rest_without_gravity_stays_at_rest). Newton's own position
  // tolerance as the floor was still too small for the wire.
  const double step_speed = 1e-3 * tolerance * error_scale_ / h_max;
  const double energy_scale = weight_energy + std::abs(energy_now - gravity_potential) +
                              0.5 * total_mass * step_speed * step_speed;
  // Fixes that move add energy: the ceiling starts again after them.
  if (!check_energy || model_.gravity != ceiling_gravity_)
    energy_ceiling_ = std::numeric_limits<double>::quiet_NaN();
  if (check_energy && std::isnan(energy_ceiling_)) {
    energy_ceiling_ = energy_now;
    ceiling_gravity_ = model_.gravity;
  }
  // The energy of the state the next step starts from (only while it is checked): an
  // accepted step's is the one it was checked with. Self-contact pairs listed anew move
  // it and the ceiling along (list_pairs), also in a step that is then rejected:
  // its pairs stay listed for the retry.
  energy_test_ = {check_energy, check_energy ? energy_now : 0.0, energy_scale, energy_ceiling_};
  struct EnergyTestOff {  // however the call ends: other steps have no energy test
    EnergyTest& test;
    ~EnergyTestOff() { test.active = false; }
  } energy_test_off{energy_test_};
  double h = step_proposal_ > 0 ? std::min(step_proposal_, h_max) : h_max;
  const double h_min = 1e-12 * std::max(h_max, 1.0);
  strict_newton_ = false;
  while (t_end - state_.time > 1e-12 * h_max) {
    stop_if_interrupted(path);
    const double left = t_end - state_.time;
    const double proposal = h;
    h = step_within(h, left);
    const State<D> before = state_;
    const NewtonPredictor predictor_before = predictor_;  // a rejected step teaches nothing
    std::string why;
    early_stop_energy_ = std::numeric_limits<double>::quiet_NaN();
    const bool solved = implicit_step(h, path, why);
    const double err = solved ? last_local_error / (tolerance * error_scale_)
                              : std::numeric_limits<double>::infinity();
    // An early stop's energy is the step's where it was kept (early_stop_keeps_energy).
    const double energy_after = !solved || !check_energy ? 0.0
                                : std::isnan(early_stop_energy_) ? total_energy()
                                                                 : early_stop_energy_;
    const bool kept = !solved || !check_energy ||
                      energy_kept(energy_test_.before, energy_after, energy_scale, tolerance, energy_test_.ceiling);
    if (solved && err <= 1.0 && kept && state_.q.allFinite()) {
      require_bounded_positions();
      ++total_steps;
      energy_test_.before = energy_after;
      strict_newton_ = false;
      if (left - h <= 1e-12 * h_max) state_.time = t_end;  // exactly, not by round-off
      h = step_after_accepted(err, h, proposal, h_max);
      continue;
    }
    const State<D> rejected = std::move(state_);
    state_ = before;
    predictor_ = predictor_before;
    if (!solved) predictor_.forget();
    ++rejected_steps;
    energy_rejections += solved && !kept;
    // A step whose Newton stopped at its error estimate may fail the error or energy
    // test by Newton's own error (accelerations a little out of balance): it is solved
    // again to the force tolerance before it is cut, unless Newton's error cannot account
    // for the excess (then the retry came out the same, at the cost of a full solve: most
    // retries on a sheet landing on a floor).
    const bool newton_may_explain = !kept || err - early_stop_share_ <= 1.0;
    if (solved && stopped_early_ && !strict_newton_ && newton_may_explain) {
      strict_newton_ = true;
      strict_retry_ = {before.time, h, rejected.acc, rejected.lam};
      continue;
    }
    strict_newton_ = false;
    h = step_after_rejected(h, solved && kept, err);
    // A retry with a smaller step re-excites the index-3 multiplier transient, which
    // repeated cuts amplify (accelerations ~ 1/h^2): restart from consistent values. An
    // accepted step's gentle change of size (at most 2x) keeps generalized-alpha's
    // auxiliary acceleration: restarting there loses energy every change.
    if (!model_.constraints.empty()) {
      make_consistent(path, 0.0);
      if (check_energy) energy_test_.before = total_energy();
    }
    if (h < h_min)
      throw SimulationError(
          "step from t=" + fmt(state_.time) + " failed at the smallest step size " + fmt(h) +
          (solved ? std::string(kept ? ": the local error stays above the tolerance"
                                     : ": the energy keeps growing")
                  : ": " + why) + ". " +
          failure_cures(!solved && !step_cure_.empty()
                            ? step_cure_
                            : "Likely cures: a larger tolerance, softer springs or more damping, or "
                              "check the input for degenerate geometry"));
  }
  state_.time = t_end;  // what is left is below round-off of the step sizes
  step_proposal_ = h;
}

template <int D>
void Simulator<D>::stop_if_interrupted(const FixPath<D>& path) {
  if (!interrupted_ || !interrupted_()) return;
  state_.fix_pos = kinematics(state_.q, state_.v, path, state_.time).fix_pos;
  throw Interrupted("simulate() interrupted at t=" + fmt(state_.time) +
                    ": the state is that of the last whole step");
}

template <int D>
void Simulator<D>::simulate(double tend, int steps, std::function<bool()> interrupted) {
  if (busy_.exchange(true))
    throw SimulationError("simulate() is already running on this system in another thread: "
                          "one system can be simulated by one thread at a time");
  struct BusyGuard {  // clears the flag and the interrupt check however simulate() ends
    std::atomic<bool>& flag;
    std::function<bool()>& interrupted;
    ~BusyGuard() {
      interrupted = nullptr;
      flag.store(false);
    }
  } guard{busy_, interrupted_};
  interrupted_ = std::move(interrupted);
  // At most 1e9 s, like every other magnitude: a call of 1e12 s under error control takes
  // days of steps of the size the physics allows (found by tests/fuzz_core.py).
  if (!(std::isfinite(tend) && tend > 0 && tend <= 1e9))
    throw InputError("simulate: tend must be a positive duration of at most 1e9 s, got " + fmt(tend));
  if (steps < 1)
    throw InputError("simulate: steps must be >= 1, got " + std::to_string(steps));
  // Steps below a picosecond (or below the resolution of the time) are no physics an
  // implicit step can resolve: its h^2 terms overflow (test_a_step_too_short_is_refused).
  if (tend / steps < 1e-12 || state_.time + tend / steps == state_.time)
    throw InputError("simulate: a step of tend/steps = " + fmt(tend / steps) +
                     " s is too short (at least 1e-12 s, and resolvable at t=" + fmt(state_.time) +
                     "): give a longer tend or fewer steps");
  if (!(std::isfinite(rho_inf) && rho_inf >= 0 && rho_inf <= 1))
    throw InputError("rho_inf must lie in [0, 1], got " + fmt(rho_inf));
  if (!(newton_tol > 0)) throw InputError("newton_tol must be positive");
  if (is_explicit(integrator) && !model_.constraints.empty())
    throw InputError(integrator_name(integrator) +
                     " cannot enforce DistanceConstraints (rigid rods); use "
                     "generalized_alpha, newmark or implicit_euler");
  if (num_masses() == 0) {
    state_.time += tend;
    state_.fix_pos = model_.fix_target;
    colliders_.end_call();
    return;
  }
  require_rods_fit_positions();
  ensure_pattern();
  colliders_.begin_call(state_.time, tend);
  // However the call ends, the colliders stay where the state's time has them.
  struct CollidersGuard {
    Colliders& colliders;
    const double& time;
    ~CollidersGuard() { colliders.stop_at(time); }
  } colliders_guard{colliders_, state_.time};
  const std::vector<VecD> start = state_.fix_pos;
  FixPath<D> path;
  path.t0 = state_.time;
  path.duration = tend;
  path.start = &start;
  path.target = &model_.fix_target;
  path.moving = false;
  for (int k = 0; k < num_fixes(); ++k) path.moving |= (start[k] != model_.fix_target[k]);
  if (!is_explicit(integrator) && !state_.consistent) make_consistent(path, tend / steps);

  // A moving collider moves at most half its thickness in a step, so that it cannot pass
  // a mass within one (test_fast_collider_does_not_pass_a_resting_mass).
  if (model_.colliders.moving() && model_.colliders.thinnest() > 0) {
    const double needed = std::ceil(model_.colliders.largest_move() / (0.5 * model_.colliders.thinnest()));
    steps = static_cast<int>(std::min(std::max(needed, static_cast<double>(steps)), 1e4));
  }
  const double h = tend / steps;
  if (tolerance > 0 && !is_explicit(integrator)) {
    advance_controlled(state_.time + tend, h, path);
  } else {
    for (int s = 0; s < steps; ++s) {
      stop_if_interrupted(path);
      advance(h, path, 0);
      ++total_steps;
    }
  }
  state_.fix_pos = model_.fix_target;
  colliders_.end_call();
}

// The members defined in this file; the class is instantiated in time/simulator.cpp.
#define MS_INSTANTIATE(D)                                                              \
  template void Simulator<D>::make_consistent(const FixPath<D>&, double);                 \
  template void Simulator<D>::consistent_acceleration(const VectorXd&, const VectorXd&, double, \
                                                   const FixPath<D>&, VectorXd&, VectorXd&); \
  template bool Simulator<D>::implicit_step(double, const FixPath<D>&, std::string&);     \
  template bool Simulator<D>::reproject_accelerations() const;                            \
  template bool Simulator<D>::explicit_step(double, const FixPath<D>&, std::string&);     \
  template void Simulator<D>::advance(double, const FixPath<D>&, int);                    \
  template void Simulator<D>::require_bounded_positions() const;                          \
  template void Simulator<D>::simulate(double, int, std::function<bool()>);               \
  template double Simulator<D>::rms_acceleration(const VectorXd&) const;                   \
  template std::string Simulator<D>::collider_crossing(const VectorXd&, const VectorXd&, double, double) const; \
  template IntegratorKind Simulator<D>::step_kind(double, const FixPath<D>&) const;
MS_INSTANTIATE(2)
MS_INSTANTIATE(3)
#undef MS_INSTANTIATE

}  // namespace ms
