// NewtonLinearSolver: pattern set-up, factor reuse, GMRES and the fallbacks.
#include "linear_solver/newton_solver.hpp"

#include <algorithm>
#include <chrono>

#include "linear_solver/krylov.hpp"

namespace ms {

namespace {

struct PatternSink {
  std::vector<Eigen::Triplet<double>> entries;
  void add(int r, int c, double) { entries.emplace_back(r, c, 0.0); }
};

struct ValueSink {
  double* values;
  const int* slots;
  std::size_t next = 0;
  void add(int, int, double v) { values[slots[next++]] += v; }
};

}  // namespace

void NewtonLinearSolver::set_pattern(const ElementMatrix& pattern, double delta_) {
  elements = pattern;
  matrix_stale_ = true;
  matrix_pattern_ = false;
  first_constraint_row = pattern.num_unknowns() - pattern.num_rods();
  delta = delta_;
  ldlt_analyzed_ = lu_analyzed_ = have_factor_ = false;
}

void NewtonLinearSolver::make_matrix_pattern() {
  PatternSink sink;
  elements.scatter(sink);
  const int n = elements.num_unknowns();
  J = SpMat(n, n);
  J.setFromTriplets(sink.entries.begin(), sink.entries.end());
  J.makeCompressed();
  const int* outer = J.outerIndexPtr();
  const int* inner = J.innerIndexPtr();
  slots_.resize(sink.entries.size());
  for (std::size_t e = 0; e < sink.entries.size(); ++e) {
    const int r = sink.entries[e].row(), c = sink.entries[e].col();
    slots_[e] = static_cast<int>(std::lower_bound(inner + outer[c], inner + outer[c + 1], r) - inner);
  }
  transpose_of.assign(J.nonZeros(), -1);
  for (int c = 0; c < n; ++c)
    for (int k = outer[c]; k < outer[c + 1]; ++k) {
      const int r = inner[k];
      const int* found = std::lower_bound(inner + outer[r], inner + outer[r + 1], c);
      transpose_of[k] = static_cast<int>(found - inner);  // pattern is structurally symmetric
    }
  constraint_diagonal_.clear();
  for (int r = first_constraint_row; r < n; ++r)
    for (int k = outer[r]; k < outer[r + 1]; ++k)
      if (inner[k] == r) constraint_diagonal_.push_back(k);
  P_ = J;
  matrix_pattern_ = true;
}

void NewtonLinearSolver::sync_matrix() {
  if (!matrix_pattern_) make_matrix_pattern();
  if (!matrix_stale_) return;
  std::fill(J.valuePtr(), J.valuePtr() + J.nonZeros(), 0.0);
  ValueSink sink{J.valuePtr(), slots_.data()};
  elements.scatter(sink);
  matrix_stale_ = false;
}

bool NewtonLinearSolver::refactor() {
  if (multigrid_dim_ > 0) {
    const auto start = std::chrono::steady_clock::now();
    const bool regroup = regroup_next_ || setups_since_regroup_ + 1 >= kRegroupInterval ||
                         !multigrid_.can_refresh(elements);
    const bool ok = regroup ? multigrid_.compute(elements) : multigrid_.refresh(elements);
    setups_since_regroup_ = regroup ? 0 : setups_since_regroup_ + 1;
    regroupings += regroup;
    regroup_next_ = false;
    factor_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++factorizations;
    solves_since_factor_ = 0;
    fresh_iterations_ = -1;
    if (ok) {
      smoother_stale_ = false;
      solves_per_factor_ = std::max(1.0, multigrid_.setup_flops() / multigrid_.cycle_flops());
      return have_factor_ = true;
    }
    fall_back();  // a singular block: LDL^T from now on
  }
  sync_matrix();
  // P = (J + J^T) / 2 with -delta on the constraint diagonal: symmetric quasi-definite.
  const double* jv = J.valuePtr();
  double* pv = P_.valuePtr();
  for (Eigen::Index k = 0; k < P_.nonZeros(); ++k) pv[k] = 0.5 * (jv[k] + jv[transpose_of[k]]);
  for (int k : constraint_diagonal_) pv[k] -= delta;
  if (!ldlt_analyzed_) {
    ldlt_.analyzePattern(P_);
    ldlt_analyzed_ = true;
  }
  const auto start = std::chrono::steady_clock::now();
  ldlt_.factorize(P_);
  factor_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (factorizations == 0 && ldlt_.info() == Eigen::Success) {
    // Column counts of L: factoring costs sum(c^2), one solve 4 nnz(L) flops.
    const SpMat& L = ldlt_.matrixL().nestedExpression();
    double factor_flops = 0, solve_flops = 0;
    for (Eigen::Index j = 0; j < L.outerSize(); ++j) {
      const double cj = L.outerIndexPtr()[j + 1] - L.outerIndexPtr()[j];
      factor_flops += cj * cj;
      solve_flops += 4 * cj;
    }
    solves_per_factor_ = std::max(1.0, factor_flops / std::max(solve_flops, 1.0));
  }
  solves_since_factor_ = 0;
  fresh_iterations_ = -1;
  ++factorizations;
  have_factor_ = ldlt_.info() == Eigen::Success;
  return have_factor_;
}

bool NewtonLinearSolver::solve(const VectorXd& b, VectorXd& x, double tol,
                               const VectorXd* lam) {
  const auto start = std::chrono::steady_clock::now();
  const double factor_before = factor_seconds;
  const bool ok = solve_impl(b, x, tol, lam);
  solve_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
                   (factor_seconds - factor_before);
  return ok;
}

VectorXd NewtonLinearSolver::apply_preconditioner(const VectorXd& b) const {
  if (multigrid_dim_ == 0) return ldlt_.solve(b);
  VectorXd x;
  multigrid_.apply(b, x);
  return x;
}

bool NewtonLinearSolver::renew_smoother_if_stale() {
  if (multigrid_dim_ == 0 || !smoother_stale_) return true;
  smoother_stale_ = false;
  return multigrid_.refresh_smoother(elements) || refactor();
}

VectorXd NewtonLinearSolver::precondition(const VectorXd& b, bool rebuild, bool keep_aggregates) {
  if (rebuild) {
    have_factor_ = false;
    regroup_next_ = !keep_aggregates;
  }
  smoother_stale_ = !rebuild;
  if (!have_factor_ && !refactor()) return VectorXd();
  if (!renew_smoother_if_stale()) return VectorXd();
  return apply_preconditioner(b);
}

bool NewtonLinearSolver::krylov_solve(const VectorXd& b, VectorXd& x, double tol) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!have_factor_ && !refactor()) return false;
    if (!renew_smoother_if_stale()) return false;
    // GMRES starts from one application of a factor, which is the answer up to O(delta)
    // when J is symmetric and the factor fresh: GMRES accepts it without iterating if it
    // meets `tol`, and only then: a looser acceptance leaves Newton converging linearly
    // on a double pendulum. A V-cycle is a weaker preconditioner and costs about as much
    // as a Newton iteration's assembly: GMRES starts from zero.
    x.setZero(b.size());
    if (multigrid_dim_ == 0) {
      x = apply_preconditioner(b);
      if (!x.allFinite()) x.setZero();
    }
    const KrylovResult krylov =
        gmres([this](const VectorXd& v) { return elements.multiply(v, parallel_); },
              [this](const VectorXd& v) { return apply_preconditioner(v); }, b, x, tol,
              multigrid_dim_ > 0 ? 200 : 40, 30, parallel_);
    krylov_iterations += krylov.iterations;
    const bool ok = krylov.converged && x.allFinite();
    // A factor that needs more iterations than when it was fresh has gone stale: refresh
    // it once the iterations spent beyond those cost as much as a refactorization. A
    // fresh factor of a symmetric J needs none; of an unsymmetric one (dampers), about
    // one; a multigrid hierarchy always some. (Counting the first iteration as free on
    // symmetric J kept a stale factor for a whole run, at more Newton iterations:
    // test_core_newton.py, test_a_stale_factor_is_renewed_on_a_symmetric_matrix.)
    if (fresh_iterations_ < 0) fresh_iterations_ = krylov.iterations;
    solves_since_factor_ += std::max<long>(krylov.iterations - fresh_iterations_, 0);
    if (solves_since_factor_ >= solves_per_factor_ || !ok) have_factor_ = false;
    if (!ok) regroup_next_ = true;
    if (ok) return true;
  }
  return false;
}

bool NewtonLinearSolver::solve_impl(const VectorXd& b, VectorXd& x, double tol,
                                    const VectorXd* lam) {
  if (b.norm() == 0.0) {
    x.setZero(b.size());
    return true;
  }
  if (krylov_solve(b, x, tol)) return true;
  if (multigrid_dim_ > 0) {  // multigrid failed: LDL^T from now on
    fall_back();
    if (krylov_solve(b, x, tol)) return true;
  }
  if (!have_factor_ && !refactor()) return solve_lu(b, x);  // LDL^T broke down
  // J is singular (redundant rods) or too unsymmetric for the preconditioner: the
  // regularized system is the sound Newton step. Regularizing the new multipliers
  // (-delta * lam_new, not -delta * correction) keeps their part that no force sees at
  // zero; otherwise round-off in the constraint rows makes it drift without bound.
  ++regularized_solves;
  if (lam && lam->size() > 0) {
    VectorXd shifted = b;
    shifted.tail(lam->size()) -= delta * (*lam);
    x = ldlt_.solve(shifted);
  } else {
    x = ldlt_.solve(b);
  }
  return x.allFinite();
}

bool NewtonLinearSolver::solve_lu(const VectorXd& b, VectorXd& x) {
  ++lu_fallbacks;
  sync_matrix();
  if (!lu_analyzed_) {
    lu_.analyzePattern(J);
    lu_analyzed_ = true;
  }
  lu_.factorize(J);
  if (lu_.info() != Eigen::Success) return false;
  x = lu_.solve(b);
  for (int k = 0; k < 2 && x.allFinite(); ++k) x += lu_.solve(VectorXd(b - J * x));
  return x.allFinite() && (b - J * x).norm() <= 1e-8 * b.norm();
}

}  // namespace ms
