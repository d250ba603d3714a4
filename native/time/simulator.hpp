// The simulator of a mass-spring system: the time integrators, Newton's linear solver,
// their settings and caches, and the assembly of forces and Newton matrices from the
// model's laws. It reads the model (model/system_model.hpp) and advances the state
// (model/state.hpp), both owned by System<D> (system.hpp), which tells it what changed
// (changed()). Its member functions live where their concept does: assembly in
// forces/assembly.cpp, the steps in time/integrators.cpp, the rest in time/simulator.cpp.
//
// Unknowns: positions q of the masses (D per mass) and one multiplier per constraint.
//     M q'' = F(q, q', lam) = f(q, q') - G^T lam,      g(q) = 0
// with the constraint in the smooth squared form of rod_terms (laws.hpp), so lam is the
// rod tension (positive = pulling).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "contact/contact.hpp"
#include "contact/self_contact.hpp"
#include "forces/stencils.hpp"
#include "linear_solver/krylov.hpp"
#include "linear_solver/newton_solver.hpp"
#include "model/model.hpp"
#include "model/state.hpp"
#include "model/system_model.hpp"
#include "parallel/chunk_sums.hpp"
#include "time/integrators.hpp"
#include "time/newton.hpp"

namespace ms {

template <int D>
class Simulator {
 public:
  using VecD = Vec<D>;
  using MatD = Mat<D>;

  // `colliders` is the model's: a simulate() call moves them along their path.
  Simulator(const Model<D>& model, Colliders& colliders, State<D>& state)
      : model_(model), colliders_(colliders), state_(state) {}
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // What a change of the model, the state or the settings makes stale (Change bits).
  void changed(unsigned what);
  // SimulationError if simulate() runs on this system in another thread: System refuses
  // changes meanwhile, and reads that would solve refuse too.
  void require_idle(const char* change) const;

  // ---- integrator settings ----
  IntegratorKind integrator = IntegratorKind::GeneralizedAlpha;
  // Each setting is read here and set through its set_* below, which checks the value
  // (the one place settings are validated; the bindings only convert types).
  double rho_inf = 0.8;
  double newton_tol = 1e-10;  // relative to the structure's length scale
  int max_newton_iterations = 25;
  void set_rho_inf(double r);
  void set_newton_tol(double t);
  void set_max_newton_iterations(int n);
  // How Newton's linear systems are preconditioned: "direct" (LDL^T factor), "multigrid"
  // (smoothed aggregation; systems without constraints only) or "auto" (multigrid for
  // big systems without constraints).
  std::string linear_solver() const { return linear_solver_; }
  void set_linear_solver(const std::string& name);
  // Systems of this many masses run assembly, contact and the linear solver's loops in
  // chunks on the workers (parallel/parallel_for.hpp): springs kSpringGrain a chunk,
  // masses kContactGrain a chunk in the nearest-point searches.
  static constexpr int kSplitMinMasses = 1000;
  static constexpr long kSpringGrain = 1024;
  static constexpr long kStencilGrain = 512;  // a hinge costs about what two springs do
  static constexpr long kContactGrain = 256;
  static constexpr int kMultigridMinMasses = 4000;
  // Under error control Newton's linear systems are solved to 1e-1, where a V-cycle beats
  // an LDL^T factor that a moving sheet makes stale almost every step from about 150
  // masses on (a 13^2 sheet in 0.6 of the time, 25^2 in 0.35, a closed 642-vertex
  // icosphere in 0.4); a sheet hanging still is slower with it, but takes little time
  // either way (docs/performance.md, "Where things touch").
  static constexpr int kMultigridMinMassesControlled = 150;
  int multigrid_min_masses() const {
    return tolerance > 0 ? kMultigridMinMassesControlled : kMultigridMinMasses;
  }
  // "auto" takes multigrid only for springs that give the masses on average at least this
  // many neighbours (a surface or a volume): a chain's or a wire's banded matrix factors
  // for about the cost of a product, and the factor wins at any size (a chain of 1000 in
  // 0.7 of multigrid's time).
  static constexpr double kMultigridMinNeighbours = 3.0;
  double mean_spring_neighbours() const;
  // Switching error control on or off also changes "auto"'s choice of linear solver.
  void set_tolerance(double t);
  int max_halvings = 12;
  void set_max_halvings(int n);
  // Newton's matrix in implicit steps (docs/performance.md, "The step solve"): projected
  // (the default: compressed springs' and pushing rods' negative stiffness left out),
  // exact (the Jacobian), or exact until the error grows within a step, projected from
  // the next Newton iteration on (project on demand). Kept for the measurements that chose the default.
  enum class NewtonMatrix { Projected, Exact, OnDemand };
  NewtonMatrix newton_matrix = NewtonMatrix::Projected;
  // Error control (0, the default: off). With tolerance > 0 the implicit integrators take
  // steps of any size up to tend/steps, chosen so that each step's local error estimate,
  // as a weighted RMS over the masses, stays within tolerance × length scale and the
  // total energy does not grow (when no fix moves); the last step ends exactly at tend.
  double tolerance = 0.0;

  // Advances the state by `tend` seconds in `steps` equal steps (with error control: in
  // steps no longer than tend / steps).
  // `interrupted`, if given, is asked between steps; true stops the call with Interrupted
  // (the bindings check Python's signals there, so that Ctrl-C stops a long call).
  void simulate(double tend, int steps, std::function<bool()> interrupted = {});

  // ---- contact ----
  // The force of the colliders on each mass now (D per mass).
  VectorXd contact_forces() const;
  // The acceleration the contact stiffness is scaled by: gravity, at least 9.81 m/s^2.
  double contact_gravity() const { return std::max(model_.gravity.norm(), 9.81); }
  // Pairs the last step listed, steps refused because parts would pass through each
  // other or (explicit integrators) a step ended outside what its pairs were listed for,
  // and steps that ended so and whose pairs were listed anew to check them (stats).
  int self_contact_pairs() const { return static_cast<int>(self_pairs_.size()); }
  long self_contact_refusals = 0;
  long self_contact_relistings = 0;
  long self_contact_listings = 0;  // steps whose pairs were listed (not kept from the last)
  // Pairs' forces evaluated (at assemblies, residuals and energies): those not skipped as
  // apart since listed or since last seen apart.
  mutable long self_contact_evaluations = 0;

  // ---- diagnostics ----
  int last_newton_iterations = 0;
  long total_steps = 0, halved_steps = 0, rejected_steps = 0, newton_iterations = 0;
  // Newton matrices assembled by implicit steps (a step stopping at its last iterate's
  // residual assembles none there: newton_correct's check_residual_first).
  long matrix_assemblies = 0;
  // Step's first corrections solved to the tighter tolerance of a calm step (newton_correct).
  long tight_first_corrections = 0;
  long energy_rejections = 0;  // of rejected_steps, those whose solution gained energy
  double last_local_error = 0.0;  // of the last implicit step, in length units (RMS)
  // The energies now; the potential one of gravity, springs, stencils, self-contact and
  // colliders.
  double kinetic_energy() const;
  double potential_energy() const;
  double total_energy() const { return kinetic_energy() + potential_energy(); }
  VectorXd constraint_forces();             // rod tension, + pulls (lam scaled by |d|/L0)
  double constraint_force(int j);           // the same for one rod
  double length_scale();
  // The length error control's tolerance is a fraction of (see ensure_pattern).
  double error_scale() {
    ensure_pattern();
    return error_scale_;
  }
  std::vector<char> soft_springs() const;
  const NewtonLinearSolver& newton_solver() const { return lin_; }
  // What a failed multigrid solve does, for tests: LDL^T until the next restart point.
  void fall_back_to_direct() { lin_.fall_back(); }
  // NewtonLinearSolver::precondition on the Newton matrix of the last step.
  VectorXd precondition(const VectorXd& b, bool rebuild, bool keep_aggregates = false);

  // F = f(q, v) - G^T lam and g(q) at the fixes' current positions (for tests).
  void evaluate(const VectorXd& q, const VectorXd& v, const VectorXd& lam, VectorXd& F,
                VectorXd& g) const;
  // Exact derivatives as triplets: d(F, g)/d(q, lam) and dF/dv.
  void jacobian(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                std::vector<Eigen::Triplet<double>>& d_qlam,
                std::vector<Eigen::Triplet<double>>& d_v) const;

 private:
  // The model and state, read as System reads them.
  int num_masses() const { return model_.num_masses(); }
  int num_fixes() const { return model_.num_fixes(); }
  int num_vertices() const { return model_.num_vertices(); }
  int num_unknowns() const { return model_.num_unknowns(); }
  Connector vertex(int i) const { return model_.vertex(i); }
  VecD pos(int i) const { return state_.q.template segment<D>(D * i); }
  VecD vel(int i) const { return state_.v.template segment<D>(D * i); }
  // One system is advanced by one thread at a time: simulate() releases Python's lock, so
  // another thread could otherwise step or rebuild it mid-step (tests/test_core_input.py,
  // test_two_threads_cannot_simulate_one_system). System refuses changes while it runs.
  std::atomic<bool> busy_{false};
  // Positions and velocities of all endpoints at one instant.
  struct Kinematics {
    const VectorXd* q;
    const VectorXd* v;
    std::vector<VecD> fix_pos, fix_vel;
    double t = 0;  // the instant (where the colliders are)
    // The velocities a collider's penalty stiffness reads (contact()); none: the state's.
    // Within a step the state's are its start's, a constant, so that the derivatives stay
    // exact; an iterate's energy reads its own, as the state it may become will.
    const VectorXd* penalty_v = nullptr;
    VecD pos(const Connector& c) const {
      return c.type == MASS ? VecD(q->template segment<D>(D * c.nr)) : fix_pos[c.nr];
    }
    VecD vel(const Connector& c) const {
      return c.type == MASS ? VecD(v->template segment<D>(D * c.nr)) : fix_vel[c.nr];
    }
  };
  // `contacts`, if given, receives where masses touch colliders.
  void assemble(const Kinematics& kin, const VectorXd& lam, double cM, double cK, double cV,
                VectorXd* F, VectorXd* g, ElementMatrix* matrix,
                std::vector<ContactState>* contacts = nullptr) const;
  // F and g only.
  void forces(const Kinematics& kin, const VectorXd& lam, VectorXd& F, VectorXd& g) const;
  // F, g and the values of the Newton matrix cM M - cK dF/dq - cV dF/dv (with G, G^T)
  // written into target.elements.
  void forces_and_matrix(const Kinematics& kin, const VectorXd& lam, double cM, double cK,
                         double cV, VectorXd& F, VectorXd& g, NewtonLinearSolver& target);
  // With (nearly) undamped algebraic modes the multipliers of the index-3 form oscillate
  // step by step and, under the nonlinearity, grow: there the accelerations and
  // multipliers are re-projected after every step.
  bool reproject_accelerations() const;
  Kinematics kinematics(const VectorXd& q, const VectorXd& v, const FixPath<D>& path,
                        double t) const;
  FixPath<D> resting_path() const;
  // kinetic_energy() and potential_energy() at velocities v and at `kin`.
  double kinetic_energy(const VectorXd& v) const;
  double potential_energy(const Kinematics& kin) const;
  void require_rods_fit_positions();
  // SimulationError when a committed step left positions beyond 1e12 length scales.
  void require_bounded_positions() const;
  // The cures a failed step's message ends with: the flat-rod diagnosis if it applies,
  // else `usual`.
  std::string failure_cures(const std::string& usual) const;
  // Names the masses held only by rods in one plane at positions q (the run's start
  // positions: `at_start`); empty if none.
  std::string flat_rod_diagnosis(const VectorXd& q, const std::vector<VecD>& fix_pos,
                                 bool at_start) const;
  void ensure_pattern();
  // Consistent acceleration and multipliers at (q, v, t).
  void consistent_acceleration(const VectorXd& q, const VectorXd& v, double t,
                               const FixPath<D>& path, VectorXd& acc, VectorXd& lam);
  // Sets acc, lam and the generalized-alpha auxiliary for steps of size h (0: aux = acc).
  void make_consistent(const FixPath<D>& path, double h);
  // An implicit step in its pieces: predict (the step's known part from the state, and
  // the largest |acc| of the state), Newton on the new acceleration (implicit_step), and
  // commit_step (the state at t1 from the accepted acceleration).
  NewmarkStep predict(double h, IntegratorKind kind, double& acc_max) const;
  void commit_step(const NewmarkStep& step, const VectorXd& q1, const VectorXd& v1, const VectorXd& acc,
                   const VectorXd& lam, double t1);
  // Newton's residual at (F, g, acc) into rhs (minus the residual (M acc - F, g / bq)):
  // the largest force and constraint residuals against their tolerances (<= 1:
  // converged), the sum of the squared accelerations the force rows stand for, and the
  // force round-off they were measured against.
  struct NewtonResidual {
    double force_err = 0, constraint_err = 0, acceleration_squares = 0, round_off = 0;
  };
  NewtonResidual newton_residual(const VectorXd& F, const VectorXd& g, const VectorXd& acc, double q_max,
                                 double acc_tol, double pos_tol, double bq, VectorXd& rhs) const;
  bool implicit_step(double h, const FixPath<D>& path, std::string& why);
  // The pieces of implicit_step's Newton iteration (time/integrators.cpp; the pure ones in
  // time/newton.hpp): its settings, its state from one iteration to the next, the
  // acceptance of the step, and one correction.
  NewtonSettings newton_settings() const;
  struct NewtonIteration;
  // Commits the step Newton solved in `it` iterations (false, with `why`, if a mass would
  // pass through a collider).
  bool accept_step(const NewtonIteration& n, const NewmarkStep& step, double h, IntegratorKind kind, int it,
                   const FixPath<D>& path, bool early, std::string& why);
  // One Newton correction of n.acc and n.lam (false if the matrix is singular).
  bool newton_correct(NewtonIteration& n, const NewmarkStep& step, const NewtonTolerances& tol, double round_off);
  // Size of a Newton correction (accelerations and multipliers) as the force it stands
  // for, m da + G^T dlam, in units of the acceleration tolerance.
  double correction_error(const VectorXd& delta, double acc_tol, double round_off) const;
  bool explicit_step(double h, const FixPath<D>& path, std::string& why);
  // Whether a mass moving straight from q0 at t0 to q1 at t1 passes through a collider's
  // surface, or a moving collider through it: such a step is refused and shortened (no
  // tunnelling; tests/test_core_contact.py, test_fast_mass_does_not_pass_a_thin_plane and
  // test_fast_collider_carries_a_resting_mass). Returns what passes, with the speeds and
  // the thickness (empty: nothing).
  std::string collider_crossing(const VectorXd& q0, const VectorXd& q1, double t0, double t1) const;
  // Self-contact in a step (contact/self_contact.hpp): the pairs listed at its start for
  // vertices that end it within their margin of where they are predicted to (a pair
  // listed before keeps its stiffness: the energy stays that of the same law), and after
  // it why it cannot be kept: a vertex ended farther from the prediction (its pairs may be
  // incomplete), or two parts passed through each other.
  void list_self_pairs(double h, const FixPath<D>& path);
  void list_pairs(std::vector<SelfContactPair> pairs, const Kinematics& start, const std::vector<Vec3>& listed_at);
  std::string self_crossing(const VectorXd& q1, double t1, const FixPath<D>& path);
  // Each vertex's margin (self_margins_): how far its step's end may stray from the
  // prediction without its pairs listed anew (SelfContact::missed). It follows the
  // vertex's own strays, three times the last, between a sixteenth and a quarter of the
  // distance, and shrinks by a tenth a step: a quarter everywhere listed 4 times the
  // pairs of an eighth on a sheet swinging untouched; since a stray costs a second
  // listing, not a refused step, a sixteenth beat an eighth (docs/performance.md,
  // "Self-collision"). Starts at a sixteenth. Explicit integrators, whose strays are
  // refused, keep at least an eighth.
  static constexpr double kMarginLeast = 0.0625, kMarginMost = 0.25, kMarginStart = 0.0625,
                          kMarginExplicit = 0.125, kMarginKept = 0.9;
  double least_self_margin() const {
    return (is_explicit(integrator) ? kMarginExplicit : kMarginLeast) * model_.self_contact.distance();
  }
  // 1 / mass of every vertex (0: a fix), for the self-contact pairs' weights.
  std::vector<double> vertex_inverse_masses() const;
  std::vector<double> self_margins_;  // m, per vertex (empty: kMarginStart of the distance)
  const std::vector<double>& self_margins();
  std::vector<Vec3> vertex_points(const Kinematics& kin) const;
  std::vector<SelfContactPair> self_pairs_;
  std::vector<Vec3> self_predicted_;  // where the pairs were listed for (list_self_pairs)
  std::vector<Vec3> self_listing_positions_;  // where the vertices were when the pairs were listed
  bool self_touching_ = false;  // a listed pair is within the distance at the step's start or predicted end
  // Where no two vertices move relative to each other by more than the skin (kSelfSkin of
  // the distance) in a step, margins included (SelfContact::open_window), the pairs are
  // listed for every vertex anywhere within half the skin of where it is, and kept for
  // the steps that follow while the window holds: resting, draping, and falling or
  // carried as a whole list once in many steps
  // (test_a_resting_structure_keeps_its_pairs_over_many_steps,
  // test_a_sheet_falling_as_one_keeps_its_pairs_and_falls_as_without). A sheet swinging
  // deforms too fast for it: listed anew at every step. Not open: listed for one step.
  static constexpr double kSelfSkin = 0.5, kSelfStill = 1e-3;
  SelfWindow self_window_;
  double self_skin() const { return kSelfSkin * model_.self_contact.distance(); }
  static constexpr const char* kSelfCrossingCure =
      "Likely cures: a larger self-collision distance, more substeps, or slower motion";
  // Adds the self-contact pairs' forces (into F) and couplings (into matrix); the largest force.
  double add_self_contact(const Kinematics& kin, double cK, double cV, VectorXd* F, ElementMatrix* matrix) const;
  double self_contact_energy(const Kinematics& kin) const;
  // The terms of the listed pairs that touch at kin, with their index in self_pairs_, in
  // its order: evaluated on the workers, those that cannot touch yet skipped (stays_apart).
  std::vector<std::pair<int, SelfContactTerms>> self_contact_terms(const Kinematics& kin) const;
  SelfContactTerms self_contact_terms(const SelfContactPair& pair, const Kinematics& kin) const;  // one pair
  // The positions and velocities of a pair's vertices at kin (3-D only).
  void pair_state(const SelfContactPair& pair, const Kinematics& kin, std::array<Vec3, 4>& x,
                  std::array<Vec3, 4>& v) const;
  // Where each listed pair was last evaluated not touching, and how far beyond its
  // distance it was there (NaN: not since listed; one per pair of self_pairs_, set anew by
  // list_pairs). A pair whose vertices have since moved relative to each other by less
  // is still beyond it (stays_apart) and is not evaluated: Newton's iterates in a step
  // move little, and most pairs evaluated apart at one are apart at the next. Only pairs
  // that stay beyond their distance are skipped, as stays_apart skips them since the
  // listing, so the forces are the same bits
  // (test_pairs_evaluated_apart_are_spared_while_they_stay_apart).
  struct PairSeenApart {
    std::array<Vec3, 4> at;
    double clearance = std::numeric_limits<double>::quiet_NaN();
  };
  mutable std::vector<PairSeenApart> self_seen_apart_;
  // The cure a failed step names when it knows a better one than the usual (empty: none).
  std::string step_cure_;
  static constexpr const char* kCrossingCure =
      "Likely cures: a thicker collider (it must stop the mass within its thickness), or slower motion "
      "of the mass or the collider";
  void advance(double h, const FixPath<D>& path, int depth);
  std::function<bool()> interrupted_;  // of the running simulate() call
  // Throws Interrupted if `interrupted_` says so, leaving the fixes where the path has them.
  void stop_if_interrupted(const FixPath<D>& path);
  // Error-controlled steps from the current time to t_end, none longer than h_max.
  void advance_controlled(double t_end, double h_max, const FixPath<D>& path);
  // Local position error of a step of size h from acceleration acc0 to acc1: the
  // Zienkiewicz-Xie estimate |beta - 1/6| h^2 (acc1 - acc0) as an RMS over the masses'
  // coordinates (tests/test_core_error_control.py checks its order against the true error).
  double local_error_estimate(const VectorXd& acc0, const VectorXd& acc1, double h,
                              IntegratorKind kind) const;
  // The integrator of a step of size h from the current state: implicit Euler where a mass
  // touches a collider at its start or would at its end (moving on), else `integrator`.
  // The Newmark family applies the end-of-step acceleration again in the next step, so
  // that a stiff contact force that has just stopped a mass pushes it once more as it
  // leaves, and sheets on a floor bounce and gain energy (test_sheet_settles_on_a_plane);
  // implicit Euler does not, and restarting generalized-alpha after it is seamless (its
  // auxiliary acceleration equals the acceleration there).
  IntegratorKind step_kind(double h, const FixPath<D>& path) const;
  // RMS over the masses of |v_i| / m_i for a vector of forces v (per-mass acceleration).
  double rms_acceleration(const VectorXd& forces) const;
  // The energy a run under error control may not climb above: its energy when error
  // control started or the fixes last moved (NaN: not set yet).
  double energy_ceiling_ = std::numeric_limits<double>::quiet_NaN();
  VecD ceiling_gravity_ = VecD::Zero();  // the gravity the ceiling was measured under
  NewtonPredictor predictor_;
  bool stopped_early_ = false;  // the last step's Newton stopped at the position estimate
  // How much of the last step's local error, in units of the tolerance, Newton's early
  // stop may account for (advance_controlled's retry).
  double early_stop_share_ = 0.0;
  bool strict_newton_ = false;  // retry of a rejected step: Newton to the force tolerance
  // advance_controlled's energy test of the step being solved (energy_kept), which
  // Newton's early stop must pass too; and the energy that stop found (NaN: none).
  struct EnergyTest {
    bool active = false;
    double before = 0, scale = 0, ceiling = 0;
  };
  EnergyTest energy_test_;
  double early_stop_energy_ = std::numeric_limits<double>::quiet_NaN();
  bool early_stop_keeps_energy(const Kinematics& kin);
  double step_proposal_ = 0.0;  // the controller's next step size, carried between calls
  const Model<D>& model_;  // what the user built (model/system_model.hpp)
  Colliders& colliders_;   // the model's colliders, which a call moves along their path
  // Stencil s's vertices in ElementMatrix::resize_stencils' form (all laws' elements in
  // the order of Stencils), made with the pattern.
  std::vector<int> stencil_layout() const;
  std::vector<int> stencil_layout_;
  // Per stencil, whether its Newton block is an outer product when projected
  // (ElementMatrix::resize_stencils), made with the pattern.
  std::vector<char> stencil_outer_layout() const;
  std::vector<char> stencil_outer_;
  // Each law's stencils in chunks by where they lie (in the order of Stencils), as the
  // springs' (SpringChunks; one chunk below kSplitMinMasses masses). Made with the pattern.
  std::vector<ChunkPlan> plan_stencil_chunks() const;
  std::vector<ChunkPlan> stencil_chunks_;
  // The generic assembly (forces/assembly.cpp): one law's elements (the springs, or one
  // law's stencils) in the chunks of `plan`, each element's forces into F and its blocks
  // into its slot of the matrix (slot(e); -1: none); the largest force.
  template <class Set, class Slot>
  double add_elements(const Set& set, const ChunkPlan& plan, const Slot& slot, const Kinematics& kin, double cK,
                      double cV, VectorXd* F, ElementMatrix* matrix) const;
  // The energy of one law's elements, in chunks of `grain` at once on big systems.
  template <class Set>
  double elements_energy(const Set& set, const Kinematics& kin, long grain) const;
  // Adds the stencils' forces (into F) and blocks (into matrix); the largest force.
  double add_stencils(const Kinematics& kin, double cK, double cV, VectorXd* F, ElementMatrix* matrix) const;
  // The energy of the springs and the stencils.
  double elements_energy(const Kinematics& kin) const;
  template <class F>
  void each_stencil(const Kinematics& kin, const F& f) const;
  // An element's vertices' positions x, velocities v and masses (nodes; -1: a fix) at `kin`.
  template <int K>
  void element_vertices(const Kinematics& kin, const std::array<Connector, K>& ends, std::array<VecD, K>& x,
                        std::array<VecD, K>& v, std::array<int, K>& nodes) const;
  double max_spring_stiffness() const;
  double stencils_stiffness() const;
  // The contact force on mass i (3-D only) from the points where it touches
  // (Colliders::contacts), [first, last): their sum. `states`, if given, receives them.
  // Without `derivatives` (a residual, an energy) the force's A and B are left at zero.
  ContactForce contact_at(const Kinematics& kin, int i, const ContactPoint* first, const ContactPoint* last,
                          bool definite, std::vector<ContactState>* states, bool derivatives) const;
  // Every mass touching a collider, with its contact force, and every point where they
  // touch: in chunks of the masses (in mass order, searched at once on big systems: the
  // nearest-point searches dominate contact). The chunks are scratch kept from call to
  // call, so that evaluating the contacts allocates nothing once they have grown; the
  // next call overwrites them. Each chunk on its own cache lines: the workers grow them
  // at once.
  struct alignas(64) Touches {
    std::vector<int> mass;
    std::vector<ContactForce> force;
    std::vector<ContactState> where;
    // The points the colliders gave: mass[k]'s are points[point_start[k], point_start[k + 1]).
    std::vector<ContactPoint> points;
    std::vector<int> point_start;
  };
  const std::vector<Touches>& touches(const Kinematics& kin, bool derivatives) const;
  mutable std::vector<Touches> touch_chunks_;
  // Where the chunks' points were looked up: a call at the same positions, velocities,
  // instant and colliders finds the same points and looks up none (an energy after the
  // forces at one iterate; the matrix after a residual that did not stop Newton).
  struct TouchesFoundAt {
    VectorXd q, v;
    double t = 0;
    std::uint64_t colliders = 0;
    int chunks = 0;
    bool valid = false;
  };
  mutable TouchesFoundAt touches_found_at_;
  // Each mass's candidate triangles: those whose boxes meet a box around where the mass
  // was when they were listed, reaching the thickest collider's thickness beyond it in
  // every direction. While the mass stays in that box they hold every triangle whose box
  // holds the mass, and the search runs over them instead of the box tree (the same
  // points, in the same order). Listed anew where a mass leaves its box or the
  // colliders' box tree is rebuilt.
  struct NearTriangles {
    Eigen::AlignedBox3d box;  // empty: not listed yet
    std::vector<int> triangles;
  };
  mutable std::vector<NearTriangles> near_triangles_;
  mutable std::uint64_t near_tree_version_ = 0;
  // The masses touching a collider at the last assembly of Newton's matrix (for
  // limit_contact_corrections); written by forces_and_matrix only.
  std::vector<ContactState> contacts_;
  // Newton corrections that jump across a contact's kinks are cut short. A mass deep in a
  // collider that a correction would take out of it stops inside the smooth band at the
  // surface: the linearization in the stiff penalty sends it out, where the penalty is
  // zero, and Newton cycles between inside and outside (a sheet landing on a plane). A
  // sliding mass whose velocity along the surface a correction would reverse stops there:
  // the friction force saturates with speed, so its linearization overshoots through zero
  // speed. From there Newton converges (tests/test_core_contact.py).
  void limit_contact_corrections(const VectorXd& acc_before, double bq, const VectorXd& v_before,
                                 const VectorXd& v_pred, double bv, VectorXd& acc) const;
  // Newton's first guess for a mass arriving at a collider: one that touched none at the
  // last solved step and that the guess puts deeper into one than the penalty's ramp is
  // moved back out along the contact's normal to the ramp's depth, where the penalty is
  // fully stiff. Predicted into the floor, landing masses start Newton at residuals of
  // 1e3-1e4 times its tolerance; a sheet landing on a floor then took a fifth more Newton
  // iterations and twice the rejected steps. Masses that already touched keep their guess:
  // a draped sheet presses some deeper than the ramp, and moving those out too pulled them
  // from their equilibrium at every step (docs/performance.md, "Where things touch";
  // tests/test_core_contact.py, test_masses_landing_start_newton_at_the_ramp).
  void guess_arrivals(const VectorXd& q_start, const NewmarkStep& step, double t1, VectorXd& acc) const;
  // The masses that touched a collider at the last solved step (at its last assembly of
  // Newton's matrix), for guess_arrivals; empty: none known (a new or restored state). A
  // rejected step counts: its retry ends where it did, and a mass that touched there is
  // no arrival (with the accepted steps' only, a landing sheet's retries took a tenth
  // more Newton iterations).
  std::vector<char> touched_;
  // A step whose Newton stopped early and failed the step's tests is solved again to the
  // force tolerance (advance_controlled): from the iterate it stopped at, not from the
  // guess. The same step, so the same first iterations, 4 of a landing retry's 11
  // (docs/performance.md, "Where things touch").
  struct StrictRetry {
    double time = 0, h = 0;  // the step it is for
    VectorXd acc, lam;
  };
  StrictRetry strict_retry_;
  State<D>& state_;
  // Rods and positions were set by the user and not yet checked against each other: the
  // first simulate() after building, set_state or moving a mass checks them.
  bool rods_unchecked_ = true;
  // The positions the rods were last checked at (the start of a run): a flat rod network
  // is named from them once it has bent (failure_cures).
  VectorXd rods_checked_q_;
  std::vector<VecD> rods_checked_fix_pos_;

  bool pattern_ready_ = false;  // the Newton matrix's pattern is set up
  // Assembly's springs: each spring's pair in the Newton matrix (-1 between two fixes:
  // none), numbered in the springs' order, and their chunks by where they lie
  // (parallel/chunk_sums.hpp; none below kSplitMinMasses masses). Planned with the
  // pattern (a pass over all springs that every assembly would repeat).
  struct SpringChunks {
    int all = 0;
    std::vector<int> pair;
    ChunkPlan by_node;
  };
  SpringChunks spring_chunks_;
  SpringChunks plan_spring_chunks() const;
  NewtonLinearSolver lin_;              // Newton matrix of the implicit step
  NewtonLinearSolver consistency_lin_;  // [M G^T; G 0] for consistent accelerations
  bool split_work_ = false;  // from kSplitMinMasses masses on (ensure_pattern)
  // Every stencil is a hinge whose two triangles have springs or rods on all four outer
  // sides (ensure_pattern): a sheet that cannot shear flat under its hinges, whose first
  // corrections may be solved tighter while calm (newton_correct; time/newton.hpp).
  bool stencils_braced_ = true;
  bool hinges_braced() const;
  // What a per-mass loop over some masses found: the largest of a measure and the sum of
  // another (MassPartial::combine joins two chunks' findings).
  struct MassPartial {
    double max = 0, sum = 0;
    static MassPartial combine(const MassPartial& a, const MassPartial& b) {
      return {std::max(a.max, b.max), a.sum + b.sum};
    }
    static double combine(double a, double b) { return std::max(a, b); }
  };
  // rows(first, last) over the masses [0, num_masses()) in chunks at once where the
  // vectors are long enough for it (kVectorGrain unknowns a chunk); returns what the
  // chunks return joined: the largest of doubles, or MassPartials combined, in chunk
  // order. For the Newton iteration's per-mass loops. A maximum does not depend on the
  // chunks; a sum only in its last bits, and the chunks depend on the size alone.
  // body(c, first, last) for chunk c of the masses [first, last) on the workers, in chunks
  // of kContactGrain masses (a collider query each: touches(), guess_arrivals,
  // collider_crossing); contact_chunks() of them, which depends on the size alone.
  int contact_chunks() const { return split_work_ ? chunk_count(num_masses(), kContactGrain) : 1; }
  template <class Body>
  void in_contact_chunks(const Body& body) const {
    const int nm = num_masses(), chunks = contact_chunks();
    WorkerPool::shared().run(chunks, [&](int c) {
      body(c, static_cast<int>(chunk_begin(nm, chunks, c)), static_cast<int>(chunk_begin(nm, chunks, c + 1)));
    });
  }
  template <class Rows>
  auto in_mass_chunks(const Rows& rows) const -> decltype(rows(0, 0)) {
    const int nm = num_masses();
    const int chunks = split_work_ ? chunk_count(static_cast<long>(D) * nm, kVectorGrain) : 1;
    if (chunks == 1) return rows(0, nm);
    std::vector<decltype(rows(0, 0))> part(chunks);
    WorkerPool::shared().run(chunks, [&](int c) {
      part[c] = rows(static_cast<int>(chunk_begin(nm, chunks, c)), static_cast<int>(chunk_begin(nm, chunks, c + 1)));
    });
    auto total = part[0];
    for (int c = 1; c < chunks; ++c) total = MassPartial::combine(total, part[c]);
    return total;
  }
  // in_mass_chunks over the masses' coordinates: body(at, size) for the rows
  // [at, at + size) of q, v, acc and the like.
  template <class Body>
  auto in_coordinate_chunks(const Body& body) const {
    return in_mass_chunks([&](int first, int last) {
      return body(static_cast<Eigen::Index>(D) * first, static_cast<Eigen::Index>(D) * (last - first));
    });
  }
  double length_scale_ = 1.0;
  double error_scale_ = 1.0;  // what error control's tolerance is a fraction of (ensure_pattern)
  std::string linear_solver_ = "auto";
  // Largest force a single element exerted in the last assembly: the size of the terms
  // whose sum is the residual, hence of its round-off.
  mutable double element_force_scale_ = 0.0;
  double max_stiffness_ = 0.0;
  // Newton matrix without the negative geometric stiffness (see implicit_step); the
  // exported jacobian() is always exact.
  mutable bool definite_newton_ = false;
};

}  // namespace ms
