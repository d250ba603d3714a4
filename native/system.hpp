// A mass-spring system: model (masses, fixes, springs, constraints, gravity), its state,
// the residual of the equations of motion with its exact sparse Jacobian, and the
// integrators that advance the state.
//
// Unknowns: positions q of the masses (D per mass) and one multiplier per constraint.
//     M q'' = F(q, q', lam) = f(q, q') - G^T lam,      g(q) = 0
// with the constraint in the smooth squared form g = (|p_b - p_a|^2 - L0^2) / (2 L0),
// whose gradient has length |p_b - p_a| / L0 = 1 on the constraint manifold, so lam is
// the rod tension (positive = pulling).
#pragma once

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>
#include <Eigen/SparseLU>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model.hpp"
#include "element_matrix.hpp"
#include "multigrid.hpp"

namespace ms {

using Eigen::VectorXd;
using SpMat = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;

// Everything needed to continue a run exactly.
template <int D>
struct State {
  double time = 0.0;
  VectorXd q, v;    // positions and velocities of the masses
  VectorXd acc;     // true acceleration q''
  VectorXd aux;     // generalized-alpha auxiliary (pseudo-)acceleration
  VectorXd lam;     // constraint multipliers
  std::vector<Vec<D>> fix_pos;  // where the fixes are at `time`
  bool consistent = false;      // acc and lam solve the equations at `time`
};

// Linear anchor motion during one simulate() call: from where the fixes are at its start
// to where the user put them for its end.
template <int D>
struct FixPath {
  double t0 = 0.0, duration = 1.0;
  const std::vector<Vec<D>>* start = nullptr;
  const std::vector<Vec<D>>* target = nullptr;
  bool moving = false;

  Vec<D> pos(int k, double t) const {
    if (!moving) return (*target)[k];
    double s = (t - t0) / duration;
    return (*start)[k] + s * ((*target)[k] - (*start)[k]);
  }
  Vec<D> vel(int k) const {
    if (!moving) return Vec<D>::Zero();
    return ((*target)[k] - (*start)[k]) / duration;
  }
};

// Solves J x = b for the Newton matrix J on a fixed sparsity pattern. The preconditioner
// is the LDL^T factor of P = sym(J) with -delta*I in place of the zero constraint block:
// quasi-definite, so LDL^T needs no pivoting under any fill-reducing ordering, and
// regular even with redundant rods (e.g. three collinear rigid edges). It is kept across
// Newton iterations and steps and drives GMRES against the true J (unsymmetric with
// dampers); it is refreshed only when it stops being effective. If J itself is singular,
// the regularized solution P^-1 b is the Newton direction (least-squares multipliers).
class NewtonLinearSolver {
 public:
  // The matrix as assembled, in element form: Krylov methods multiply by it. After writing
  // new values, call matrix_changed().
  ElementMatrix elements;
  void matrix_changed() { matrix_stale_ = true; }
  // Renew the multigrid's finest smoother from the current values at the next solve (the
  // Newton iteration calls this once per time step; see
  // SmoothedAggregation::refresh_smoother).
  void renew_smoother() { smoother_stale_ = true; }

  // The pattern from an assembly of the elements (any values).
  void set_pattern(const ElementMatrix& pattern, double delta_);
  void invalidate_factor() { have_factor_ = false; }
  // Precondition with smoothed-aggregation multigrid instead of the LDL^T factor (for big
  // systems without constraints; `dim` unknowns per mass). It needs the masses' current
  // positions, set with the matrix values. Falls back to LDL^T if it fails.
  void use_multigrid(int dim) { multigrid_dim_ = dim; have_factor_ = false; }
  bool multigrid() const { return multigrid_dim_ > 0; }
  const SmoothedAggregation& hierarchy() const { return multigrid_; }
  // One application of the current preconditioner (factor or V-cycle).
  VectorXd apply_preconditioner(const VectorXd& b) const;
  // For tests and diagnostics: the preconditioner rebuilt from the current values, or
  // (rebuild = false) with only the multigrid's finest smoother renewed from them, applied
  // to b. Empty if it could not be built.
  VectorXd precondition(const VectorXd& b, bool rebuild);
  double setup_cost_in_cycles() const { return solves_per_factor_; }
  const VectorXd* coordinates = nullptr;
  // Solves to relative residual `tol`; returns false if no solver succeeded. `lam` (the
  // current multipliers, when x is a Newton correction) lets the singular case pick the
  // correction whose new multipliers are smallest instead of letting them drift.
  bool solve(const VectorXd& b, VectorXd& x, double tol = 1e-11, const VectorXd* lam = nullptr);

  long factorizations = 0, krylov_iterations = 0, lu_fallbacks = 0, regularized_solves = 0,
       multigrid_fallbacks = 0;
  double factor_seconds = 0, solve_seconds = 0;  // wall clock, for benchmarks only

 private:
  SpMat J;  // the matrix compressed, scattered from `elements` when a factor needs it
  std::vector<int> slots_;        // value index of each entry elements.scatter emits
  std::vector<int> transpose_of;  // value index of the transposed entry
  int first_constraint_row = 0;
  double delta = 1e-8;
  bool matrix_stale_ = true;
  bool smoother_stale_ = false;
  void sync_matrix();
  bool refactor();
  bool renew_smoother_if_stale();
  bool solve_impl(const VectorXd& b, VectorXd& x, double tol, const VectorXd* lam);
  // Preconditioned GMRES against J, refreshing the preconditioner when it is stale.
  bool krylov_solve(const VectorXd& b, VectorXd& x, double tol);
  bool solve_lu(const VectorXd& b, VectorXd& x);
  SpMat P_;
  // Factor reuse as ski rental: a factorization costs as much as `solves_per_factor_`
  // applications of the factor (from the flop counts of L, so the decision is
  // deterministic); once the iterations spent with the current factor have cost that
  // much, the next solve refactors.
  double solves_per_factor_ = 1.0;
  long solves_since_factor_ = 0;
  long fresh_iterations_ = -1;  // Krylov iterations of the first solve with a new hierarchy
  std::vector<int> constraint_diagonal_;  // value index of each constraint row's diagonal
  Eigen::SimplicialLDLT<SpMat, Eigen::Lower, Eigen::AMDOrdering<int>> ldlt_;
  Eigen::SparseLU<SpMat, Eigen::COLAMDOrdering<int>> lu_;
  SmoothedAggregation multigrid_;
  int multigrid_dim_ = 0;
  bool ldlt_analyzed_ = false, lu_analyzed_ = false, have_factor_ = false;
};

template <int D>
class System {
 public:
  using VecD = Vec<D>;
  using MatD = Mat<D>;

  System();
  std::uint64_t id() const { return id_; }

  // ---- building (each validates and names the offending item) ----
  Connector add_mass(double mass, const VecD& pos, const VecD& vel);
  // Bulk versions for big meshes: validate and grow the state once.
  void add_masses(const std::vector<double>& mass, const std::vector<VecD>& pos,
                  const std::vector<VecD>& vel);
  void add_constraints(const std::vector<DistanceConstraint>& cs);
  Connector add_fix(const VecD& pos);
  int add_spring(const Spring& s);
  int add_constraint(const DistanceConstraint& c);

  int num_masses() const { return static_cast<int>(mass_.size()); }
  int num_fixes() const { return static_cast<int>(fix_target_.size()); }
  const std::vector<Spring>& springs() const { return springs_; }
  const std::vector<DistanceConstraint>& constraints() const { return constraints_; }
  std::vector<Spring>& springs_mut() { topology_changed(); return springs_; }

  // ---- model parameters ----
  VecD gravity = VecD::Zero();
  double mass(int i) const { return mass_[i]; }
  void set_mass(int i, double m);
  VecD fix_pos(int k) const { return fix_target_[k]; }
  void set_fix_pos(int k, const VecD& p);

  // ---- state ----
  const State<D>& state() const { return state_; }
  // A checkpoint also restarts the linear solver's factor reuse, so that continuing from
  // a checkpoint and from its restore follow the same arithmetic: bit-identical runs.
  const State<D>& checkpoint() {
    lin_.invalidate_factor();
    consistency_lin_.invalidate_factor();
    return state_;
  }
  void set_state(const State<D>& s);
  VecD pos(int i) const { return state_.q.template segment<D>(D * i); }
  VecD vel(int i) const { return state_.v.template segment<D>(D * i); }
  void set_pos(int i, const VecD& p);
  void set_vel(int i, const VecD& v);
  double time() const { return state_.time; }

  // ---- integrator settings ----
  IntegratorKind integrator = IntegratorKind::GeneralizedAlpha;
  double rho_inf = 0.8;
  double newton_tol = 1e-10;  // relative to the structure's length scale
  int max_newton_iterations = 25;
  // How Newton's linear systems are preconditioned: "direct" (LDL^T factor), "multigrid"
  // (smoothed aggregation; systems without constraints only) or "auto" (multigrid for
  // big systems without constraints).
  std::string linear_solver() const { return linear_solver_; }
  void set_linear_solver(const std::string& name);
  static constexpr int kMultigridMinMasses = 4000;
  int max_halvings = 12;

  // Advances the state by `tend` seconds in `steps` equal steps.
  void simulate(double tend, int steps);

  // ---- diagnostics ----
  int last_newton_iterations = 0;
  long total_steps = 0, halved_steps = 0;
  double kinetic_energy() const;
  double potential_energy() const;
  double max_constraint_violation() const;  // | |p_b - p_a| - L0 |, length units
  VectorXd constraint_forces() const;       // rod tension (lam scaled by |d|/L0)
  double constraint_force(int j) const;     // the same for one rod
  double length_scale();
  const NewtonLinearSolver& newton_solver() const { return lin_; }
  // NewtonLinearSolver::precondition on the Newton matrix of the last step.
  VectorXd precondition(const VectorXd& b, bool rebuild);

  // F = f(q, v) - G^T lam and g(q) at the fixes' current positions (for tests).
  void evaluate(const VectorXd& q, const VectorXd& v, const VectorXd& lam, VectorXd& F,
                VectorXd& g) const;
  // Exact derivatives as triplets: d(F, g)/d(q, lam) and dF/dv.
  void jacobian(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                std::vector<Eigen::Triplet<double>>& d_qlam,
                std::vector<Eigen::Triplet<double>>& d_v) const;

  // For systems built from a vertex array: the connector each vertex became.
  std::vector<Connector> vertices;

  // Dimension of the unknown vector (D * masses + constraints).
  int num_unknowns() const { return D * num_masses() + static_cast<int>(constraints_.size()); }

 private:
  // Positions and velocities of all endpoints at one instant.
  struct Kinematics {
    const VectorXd* q;
    const VectorXd* v;
    std::vector<VecD> fix_pos, fix_vel;
    VecD pos(const Connector& c) const {
      return c.type == MASS ? VecD(q->template segment<D>(D * c.nr)) : fix_pos[c.nr];
    }
    VecD vel(const Connector& c) const {
      return c.type == MASS ? VecD(v->template segment<D>(D * c.nr)) : fix_vel[c.nr];
    }
  };
  void assemble(const Kinematics& kin, const VectorXd& lam, double cM, double cK, double cV,
                VectorXd* F, VectorXd* g, ElementMatrix* matrix) const;
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

  void topology_changed();
  void ensure_pattern();
  // Consistent acceleration and multipliers at (q, v, t).
  void consistent_acceleration(const VectorXd& q, const VectorXd& v, double t,
                               const FixPath<D>& path, VectorXd& acc, VectorXd& lam);
  // Sets acc, lam and the generalized-alpha auxiliary for steps of size h (0: aux = acc).
  void make_consistent(const FixPath<D>& path, double h);
  bool implicit_step(double h, const FixPath<D>& path, std::string& why);
  // Size of a Newton correction (accelerations and multipliers) as the force it stands
  // for, m da + G^T dlam, in units of the acceleration tolerance.
  double correction_error(const VectorXd& delta, double acc_tol, double round_off) const;
  bool explicit_step(double h, const FixPath<D>& path, std::string& why);
  void advance(double h, const FixPath<D>& path, int depth);
  void check_connector(const Connector& c, const std::string& item) const;

  std::uint64_t id_;
  std::vector<double> mass_;
  std::vector<VecD> fix_target_;
  std::vector<Spring> springs_;
  std::vector<DistanceConstraint> constraints_;
  State<D> state_;
  bool has_stepped_ = false;  // a step was taken since building or set_state

  bool pattern_ready_ = false;  // the Newton matrix's pattern is set up
  NewtonLinearSolver lin_;              // Newton matrix of the implicit step
  NewtonLinearSolver consistency_lin_;  // [M G^T; G 0] for consistent accelerations
  double length_scale_ = 1.0;
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
