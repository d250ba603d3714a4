// The pieces of Newton's iteration in an implicit step that are pure functions (tested
// alone in tests/test_core_step_pieces.py): its error estimate, its starting guess, its
// tolerances and its stop test. Simulator::implicit_step (time/integrators.cpp) strings them
// together with the assembly and the linear solver.
#pragma once

#include <Eigen/Dense>
#include <functional>

namespace ms {

// Newton's error as an acceleration, RMS over the masses of |a_i|, estimated the way
// SUNDIALS IDA estimates it: from the size of the last correction and the rate at which
// Newton contracts, rate / (1 - rate) * |last correction|. The rate is the ratio of the
// last two corrections; after the first correction, the ratio of the residuals (R / m)
// before and after it.
struct NewtonErrorTest {
  void add_residual(double rms_acceleration);
  void add_correction(double size);
  double error_estimate() const;  // infinite while it cannot tell

 private:
  double residual = -1, residual_rate = -1;
  double correction = -1, correction_rate = -1;
};

// Newton's starting acceleration for a step: of three guesses, the one whose residual
// would have been smallest at a recent step. The acceleration that puts the masses at
// q + h v suits stiff springs ringing at the step rate, whose accelerations flip sign
// every step; the last acceleration, and its linear extrapolation, suit smooth motion,
// where they start Newton an order closer (test_core_newton.py,
// test_the_predictor_follows_smooth_motion). The residuals cost a product with the Newton
// matrix each: they are reviewed every kReviewInterval steps, and after a step that took
// more corrections than the one before. A smooth guess is taken only if it starts Newton
// kMargin times closer: on a folding sheet one a few times closer costs more iterations
// (its springs start further from their linearization) and steps (docs/performance.md).
struct NewtonPredictor {
  enum Guess { Inertial, Last, Extrapolated, kGuesses };
  static constexpr int kReviewInterval = 8;
  static constexpr double kMargin = 10.0;
  Guess choice = Inertial;
  Eigen::VectorXd previous_acc;  // the acceleration at the start of the last step
  double previous_h = 0.0;       // the last step's size; 0: nothing to extrapolate from
  int steps_to_review = 0, last_corrections = 0;
  void forget() { *this = NewtonPredictor(); }
  // Guess k for a step of size h from acceleration `acc`; inertial() makes the first. Made
  // when needed: the chosen one at every step, the others at a review only.
  Eigen::VectorXd guess(Guess k, const Eigen::VectorXd& acc, double h,
                        const std::function<Eigen::VectorXd()>& inertial) const;
  // After a step from `acc` of size h that Newton solved with `solution` in `corrections`
  // corrections; residual_of(e): the size of the residual a guess that missed by e would
  // have started Newton with.
  void learn(const std::function<Eigen::VectorXd(Guess)>& guess, const Eigen::VectorXd& acc,
             const Eigen::VectorXd& solution, double h, int corrections,
             const std::function<double(const Eigen::VectorXd&)>& residual_of);
};

// The settings Newton's tolerances follow: newton_tol relative to the length scale, and
// error control's tolerance (0: off) relative to the error scale (Simulator::error_scale).
struct NewtonSettings {
  double newton_tol = 1e-10;
  double tolerance = 0.0;
  double length_scale = 1.0;
  double error_scale = 1.0;
};

// The relative tolerance of Newton's force residual: newton_tol, or under error control
// no tighter than 1e-3 of the tolerance. The acceleration criterion admits a relative
// error of 1e3 times this, which integrates into velocities like a force bias: at 1e-3 of
// the tolerance (1 % at the add-on's 0.01) a mass falling free stays within 1 mm over 4
// frames (tests/test_addon_bake.py, test_rope_edges_go_slack); 1e-2 misses it. Rods keep
// newton_tol.
double force_tolerance(const NewtonSettings& s);

// Convergence is measured in two units. Positions (`pos`): every constraint and the
// position correction a force residual implies (bq R / m) within newton_tol x length
// scale. Accelerations (`acc`): R / m within 1000 force_tolerance x a_ref, a_ref the
// largest of gravity, the largest acceleration now and 1e-3 length scale / s^2 (1e-7 of
// the largest acceleration by default), so that force errors do not pile up in the
// velocities over many small steps, and no looser than the position unit for a step of
// bq. `close_enough`: under error control, Newton's estimated error may stop it once its
// position error bq da is kShareOfTolerance of the local error the step may make; and the
// energy it may gain is that share of what the step's energy test allows
// (Simulator::early_stop_keeps_energy).
struct NewtonTolerances {
  static constexpr double kShareOfTolerance = 0.33;  // the share SUNDIALS IDA uses
  double pos = 0, acc = 0, close_enough = 0;
};
NewtonTolerances newton_tolerances(const NewtonSettings& s, double gravity, double acc_max, double bq);

// The relative residual each of Newton's linear systems is solved to (inexact Newton).
// Without error control 1e-2: this Newton contracts the error by 20x or more per
// iteration, so solving more accurately buys little and costs Krylov iterations, and much
// looser (1e-1) stalls it at newton_tol 1e-10. Under error control Newton stops 1e5 times
// earlier, where 1e-1 is enough, except for a step's first correction (a retried or
// shortened step starts anew; not the first after Newton halves a correction) while the
// step is `calm`: the multigrid preconditions, nothing touches a collider or itself, and
// the only stencils are braced hinges (Simulator::hinges_braced: no wire bending, no quad
// without shear springs). Its accuracy decides whether Newton's error estimate can stop
// after the second correction, which on folding sheets, hinged ones too, and closed meshes
// saves Newton iterations. Where things touch it costs Krylov iterations and saves no
// Newton iterations; on stiff hinged sheets without shear springs (their quads shear
// flat) it tipped some into failing and others into the factor's fallback; and with a
// factor (small systems, solved all but exactly) it saves nothing, and a mass bouncing at
// a sphere's pole kept bouncing (test_core_contact.py,
// test_mass_inside_a_sphere_stays_inside_and_comes_to_rest). The measurements are in
// docs/performance.md, "The first correction"; the rule's test is
// tests/test_core_step_pieces.py, test_the_first_correction_is_solved_tighter_only_when_calm
// and test_braced_hinges_take_the_tighter_first_correction.
inline constexpr double kFirstCorrectionTolerance = 3e-2;
double linear_tolerance(bool error_control, bool first_correction, bool calm);

// What Newton knows when it decides whether to stop at an iteration.
struct NewtonProgress {
  int iteration = 0;
  double err = 0;             // the largest residual against its tolerance (<= 1: converged)
  double constraint_err = 0;  // the constraints' share of it
  double err_prev = 0;        // err before the last full correction
  double correction_err = 0;  // the last full correction as a force, against the tolerance
  double error_estimate = 0;  // NewtonErrorTest's (error control only)
};
struct NewtonStop {
  bool stop = false;
  bool early = false;  // on the error estimate (error control) rather than the residual
};
// `strict`: a retried step, which Newton solves to the residual tolerance.
NewtonStop newton_may_stop(const NewtonProgress& p, const NewtonTolerances& tol, bool error_control,
                           bool strict);

}  // namespace ms
