// The linear solver of Newton's method: solves J x = b for the Newton matrix J, given in
// element form, by GMRES preconditioned with a sparse LDL^T factor or a smoothed-aggregation
// multigrid hierarchy, with a sparse LU as the last resort.
#pragma once

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>
#include <Eigen/SparseLU>
#include <vector>

#include "linear_solver/element_matrix.hpp"
#include "linear_solver/multigrid.hpp"

namespace ms {

using Eigen::VectorXd;
using SpMat = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;

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
  // Forgets the factor or hierarchy and what its rebuild would start from.
  void invalidate_factor() {
    have_factor_ = false;
    regroup_next_ = true;
    multigrid_.restart();
  }
  // A restart point (System::checkpoint, set_state): the factor forgotten, and the
  // multigrid chosen again if a singular block made it fall back to LDL^T since, so that a
  // run restored from a checkpoint solves as the run that went on from it
  // (test_a_checkpoint_restored_after_the_multigrid_fell_back_gives_the_same_bits).
  void restart() {
    multigrid_dim_ = chosen_multigrid_dim_;
    invalidate_factor();
  }
  // From the multigrid to LDL^T until the next restart (a solve the multigrid failed).
  void fall_back() {
    ++multigrid_fallbacks;
    multigrid_dim_ = 0;
    have_factor_ = false;
  }
  // Precondition with smoothed-aggregation multigrid instead of the LDL^T factor (for big
  // systems without constraints; `dim` unknowns per mass), built without the pairs marked
  // in `left_out` (SmoothedAggregation::leave_out). Falls back to LDL^T if it fails.
  void use_multigrid(int dim, std::vector<char> left_out = {}) {
    multigrid_dim_ = chosen_multigrid_dim_ = dim;
    multigrid_.leave_out(std::move(left_out));
    have_factor_ = false;
    regroup_next_ = true;
  }
  bool multigrid() const { return multigrid_dim_ > 0; }
  // Runs the Krylov method's products and the multigrid's work in chunks on the workers
  // (parallel/parallel_for.hpp); false: one pass on the caller.
  void split_work(bool parallel) {
    parallel_ = parallel;
    multigrid_.parallel = parallel;
  }
  const SmoothedAggregation& hierarchy() const { return multigrid_; }
  // One application of the current preconditioner (factor or V-cycle).
  VectorXd apply_preconditioner(const VectorXd& b) const;
  // For tests and diagnostics: the preconditioner rebuilt from the current values (a
  // multigrid on the aggregates and prolongators it has if keep_aggregates), or
  // (rebuild = false) with only the multigrid's finest smoother renewed from them, applied
  // to b. Empty if it could not be built.
  VectorXd precondition(const VectorXd& b, bool rebuild, bool keep_aggregates = false);
  double setup_cost_in_cycles() const { return solves_per_factor_; }
  // Solves to relative residual `tol`; returns false if no solver succeeded. `lam` (the
  // current multipliers, when x is a Newton correction) lets the singular case pick the
  // correction whose new multipliers are smallest instead of letting them drift.
  bool solve(const VectorXd& b, VectorXd& x, double tol = 1e-11, const VectorXd* lam = nullptr);

  long factorizations = 0, regroupings = 0, krylov_iterations = 0, lu_fallbacks = 0,
       regularized_solves = 0, multigrid_fallbacks = 0;
  double factor_seconds = 0, solve_seconds = 0;  // wall clock, for benchmarks only

 private:
  SpMat J;  // the matrix compressed, scattered from `elements` when a factor needs it
  std::vector<int> slots_;        // value index of each entry elements.scatter emits
  std::vector<int> transpose_of;  // value index of the transposed entry
  int first_constraint_row = 0;
  double delta = 1e-8;
  bool matrix_stale_ = true;
  bool smoother_stale_ = false;
  // J's compressed pattern (and P's, slots_, transpose_of) is made at the first sync: a
  // multigrid solve never needs it.
  bool matrix_pattern_ = false;
  void make_matrix_pattern();
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
  long fresh_iterations_ = -1;  // Krylov iterations of the first solve with a new factor
  // Multigrid setups keep the aggregates and prolongators of the last full setup
  // (SmoothedAggregation::refresh): on cloth the strong couplings that decide the grouping
  // hardly change, and the prolongators do not turn with the springs. Every
  // kRegroupInterval-th setup, after a failed solve and after invalidate_factor() the
  // nodes are grouped anew
  // (test_a_hierarchy_on_kept_prolongators_renews_the_coarse_matrices).
  static constexpr int kRegroupInterval = 8;
  int setups_since_regroup_ = 0;
  bool regroup_next_ = true;
  std::vector<int> constraint_diagonal_;  // value index of each constraint row's diagonal
  Eigen::SimplicialLDLT<SpMat, Eigen::Lower, Eigen::AMDOrdering<int>> ldlt_;
  Eigen::SparseLU<SpMat, Eigen::COLAMDOrdering<int>> lu_;
  SmoothedAggregation multigrid_;
  bool parallel_ = false;
  int multigrid_dim_ = 0, chosen_multigrid_dim_ = 0;
  bool ldlt_analyzed_ = false, lu_analyzed_ = false, have_factor_ = false;
};

}  // namespace ms
