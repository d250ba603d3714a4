// Right-preconditioned restarted GMRES for Newton's linear systems.
//
// Why GMRES and not BiCGSTAB: the preconditioner (a multigrid V-cycle or an LDL^T solve)
// dominates the cost of a solve, and GMRES applies it once per iteration where BiCGSTAB
// applies it twice. Newton only asks for a relative residual of 1e-2, which GMRES reaches
// in a few iterations, so the Krylov basis stays short.
#pragma once

#include <Eigen/Dense>
#include <cmath>
#include <utility>
#include <vector>

#include "parallel/parallel_for.hpp"

namespace ms {

struct KrylovResult {
  int iterations = 0;        // preconditioner applications
  double relative_residual;  // |b - A x| / |b|: from x, or the recurrence's for a loose tol
  bool converged = false;
};

// From this tolerance on, a solve that converged by GMRES's recurrence is trusted (below).
constexpr double kTrustedRecurrenceTolerance = 1e-6;

// The vector loops of GMRES in chunks at once, when `parallel` and the vectors are long
// (kVectorGrain entries a chunk). Sums are added in chunk order, and the chunks depend on
// the length alone, so the numbers do not depend on the machine or the workers.
class VectorChunks {
 public:
  VectorChunks(bool parallel, Eigen::Index n) : chunks_(parallel ? chunk_count(n, kVectorGrain) : 1), n_(n) {}
  // body(first, count) for each chunk; returns the sum of what the chunks return.
  template <class Body>
  double sum(const Body& body) const {
    return sum_over_chunks<double>(n_, chunks_, [&](long first, long last) { return body(first, last - first); });
  }

 private:
  int chunks_;
  Eigen::Index n_;
};

// Solves A x = b from the initial guess in x until |b - A x| <= tol |b|. `multiply(v)`
// returns A v, `precondition(v)` an approximation of A^-1 v.
// With `parallel`, long vectors' loops run in chunks at once (VectorChunks).
template <class Multiply, class Precondition>
KrylovResult gmres(const Multiply& multiply, const Precondition& precondition,
                   const Eigen::VectorXd& b, Eigen::VectorXd& x, double tol,
                   int max_iterations, int restart = 30, bool parallel = false) {
  using Eigen::VectorXd;
  KrylovResult result;
  const VectorChunks split(parallel, b.size());
  auto norm = [&split](const Eigen::VectorXd& v) {
    return std::sqrt(split.sum([&](Eigen::Index f, Eigen::Index c) { return v.segment(f, c).squaredNorm(); }));
  };
  const double bnorm = norm(b);
  if (bnorm == 0.0) {
    x.setZero(b.size());
    result.relative_residual = 0.0;
    result.converged = true;
    return result;
  }
  // A zero start (the usual case with multigrid) needs no product with A: the residual is
  // b (r left empty stands for it).
  VectorXd r;
  if (!x.isZero(0.0)) r = b - multiply(x);
  Eigen::MatrixXd H(restart + 1, restart);
  VectorXd cs(restart), sn(restart), g(restart + 1);
  std::vector<VectorXd> V, Z;  // Arnoldi basis and its preconditioned images
  while (true) {
    const VectorXd& residual = r.size() > 0 ? r : b;
    const double beta = r.size() > 0 ? norm(r) : bnorm;
    result.relative_residual = beta / bnorm;
    if (!std::isfinite(beta)) return result;
    if (beta <= tol * bnorm) {
      result.converged = true;
      return result;
    }
    if (result.iterations >= max_iterations) return result;
    V.assign(1, VectorXd(residual.size()));
    split.sum([&](Eigen::Index f, Eigen::Index c) {
      V[0].segment(f, c) = residual.segment(f, c) / beta;
      return 0.0;
    });
    Z.clear();
    g.setZero();
    g(0) = beta;
    int j = 0;
    while (j < restart && result.iterations < max_iterations) {
      Z.push_back(precondition(V[j]));
      VectorXd w = multiply(Z[j]);
      ++result.iterations;
      // Modified Gram-Schmidt, each subtraction in one pass with the next product.
      H(0, j) = split.sum(
          [&](Eigen::Index f, Eigen::Index c) { return w.segment(f, c).dot(V[0].segment(f, c)); });
      for (int i = 0; i <= j; ++i) {
        const double next = split.sum([&](Eigen::Index f, Eigen::Index c) {
          w.segment(f, c) -= H(i, j) * V[i].segment(f, c);
          return i < j ? w.segment(f, c).dot(V[i + 1].segment(f, c)) : w.segment(f, c).squaredNorm();
        });
        if (i < j) H(i + 1, j) = next;
        else H(j + 1, j) = std::sqrt(next);
      }
      const double h_next = H(j + 1, j);
      for (int i = 0; i < j; ++i) {  // earlier Givens rotations on the new column
        const double t = cs(i) * H(i, j) + sn(i) * H(i + 1, j);
        H(i + 1, j) = -sn(i) * H(i, j) + cs(i) * H(i + 1, j);
        H(i, j) = t;
      }
      const double rho = std::hypot(H(j, j), h_next);
      cs(j) = rho > 0 ? H(j, j) / rho : 1.0;
      sn(j) = rho > 0 ? h_next / rho : 0.0;
      H(j, j) = rho;
      g(j + 1) = -sn(j) * g(j);
      g(j) *= cs(j);
      ++j;
      // Converged by the recurrence, or the Krylov space is exhausted (exact solution).
      if (std::abs(g(j)) <= tol * bnorm || h_next <= 1e-14 * rho) break;
      split.sum([&](Eigen::Index f, Eigen::Index c) {
        w.segment(f, c) /= h_next;
        return 0.0;
      });
      V.push_back(std::move(w));
    }
    // x += Z y with H(0:j, 0:j) y = g(0:j), upper triangular.
    VectorXd y = g.head(j);
    for (int i = j - 1; i >= 0; --i) {
      for (int k = i + 1; k < j; ++k) y(i) -= H(i, k) * y(k);
      y(i) = H(i, i) != 0.0 ? y(i) / H(i, i) : 0.0;
    }
    split.sum([&](Eigen::Index f, Eigen::Index c) {
      for (int i = 0; i < j; ++i) x.segment(f, c) += y(i) * Z[i].segment(f, c);
      return 0.0;
    });
    // A loose solve (Newton under error control asks for 1e-1) that converged by the
    // recurrence is done: with right preconditioning the recurrence's residual is the true
    // one but for round-off, far below such a tolerance on a basis of a few vectors, and
    // checking it would cost a product with A per solve. Tight solves check it from x.
    if (tol >= kTrustedRecurrenceTolerance && std::abs(g(j)) <= tol * bnorm) {
      result.relative_residual = std::abs(g(j)) / bnorm;
      result.converged = true;
      return result;
    }
    r = b - multiply(x);
  }
}

}  // namespace ms
