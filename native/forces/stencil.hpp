// Force laws on k vertices ("stencils"): the shape every law beyond a spring takes
// (bending on three or four vertices, self-contact on four), and how a law's elements are
// kept in the model. A law is a pure function of its k vertices' positions and velocities
// and its own parameters, returning StencilTerms: its energy, the forces on its vertices
// and the derivatives of those forces. Assembly (assembly.cpp) scatters any k into the
// Newton matrix (ElementMatrix's stencils); a new law needs its own file, its test, and
// one line in Stencils below (docs/architecture.md, "How to add a force law").
#pragma once

#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "model/model.hpp"

namespace ms {

// What a caller needs of a law's terms, each including the ones before: the energy (error
// control's energy check every step), the forces (a residual), their exact derivatives
// (the Jacobian; Newton's matrix) or, for Newton's projected matrix, derivatives whose
// stiffness is positive semi-definite (Simulator::definite_newton_). A law computes no more
// than asked: the derivatives of a hinge cost several times its forces.
enum class Need { kEnergy, kForces, kJacobian, kProjected };

template <int K, int D>
struct StencilTerms {
  static constexpr int N = K * D;
  using Vector = Eigen::Matrix<double, N, 1>;
  using Matrix = Eigen::Matrix<double, N, N>;
  // Everything zero: a law then sets what it has.
  StencilTerms() : StencilTerms(Need::kJacobian, false) {}
  // For a law evaluated for `need`: the matrices are zeroed only if `need` asks for them
  // and they are not an outer product (outer_projected: the law's kOuterProjected), so
  // that a residual does not clear 2 (kD)^2 numbers it never reads (a hinge's forces
  // cost about as much as clearing its two 12 x 12 matrices), nor a u it has no use for.
  StencilTerms(Need need, bool outer_projected) {
    f.setZero();
    if (need == Need::kProjected && outer_projected) u.setZero();  // read only with `outer`
    if (need == Need::kJacobian || (need == Need::kProjected && !outer_projected)) {
      dfdx.setZero();
      dfdv.setZero();
    }
  }
  double energy = 0.0;
  Vector f;     // the force on each vertex, D entries per vertex
  Matrix dfdx;  // d f / d (positions)
  Matrix dfdv;  // d f / d (velocities)
  // A law whose projected matrix is an outer product (kOuterProjected) gives it as one:
  // with `outer`, d f / d (positions) is -outer_scale u u^T and dfdx is not set (the
  // Newton matrix keeps 1 + kD numbers instead of (kD)^2: ElementMatrix::set_stencil_outer).
  bool outer = false;
  double outer_scale = 0.0;
  Vector u;
  // d f / d (positions), whichever way it is given.
  Matrix jacobian() const { return outer ? Matrix(-outer_scale * u * u.transpose()) : dfdx; }
};

// The symmetric matrix M with its negative eigenvalues set to zero: a law's stiffness
// -dfdx made positive semi-definite for the projected Newton matrix (Simulator::definite_newton_),
// as springs leave out the negative stiffness of compression.
template <int N>
Eigen::Matrix<double, N, N> positive_part(const Eigen::Matrix<double, N, N>& M) {
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix<double, N, N>> eig(M);
  const Eigen::Matrix<double, N, 1> kept = eig.eigenvalues().cwiseMax(0.0);
  return eig.eigenvectors() * kept.asDiagonal() * eig.eigenvectors().transpose();
}

// InputError naming the element (item()) unless a bending law's stiffness (N m per
// radian) is a number >= 0.
template <class Item>
void check_bending_stiffness(const Item& item, double stiffness) {
  if (!(std::isfinite(stiffness) && stiffness >= 0))
    throw InputError(item() + ": stiffness must be a number >= 0 (N m per radian), got " +
                     std::to_string(stiffness));
}

// The elements of one law: each one's parameters (the law itself) and its vertices.
template <class LawType>
struct StencilSet {
  using Law = LawType;
  static constexpr int K = Law::K;
  std::vector<Law> laws;
  std::vector<std::array<Connector, K>> ends;
  std::size_t size() const { return laws.size(); }
};

// Element e of a law's elements as the generic assembly reads them (assembly.cpp,
// Simulator::add_elements): its law and its vertices. The springs, which hold their two
// ends, are read the same way (laws.hpp).
template <class Law>
const Law& law_at(const StencilSet<Law>& set, std::size_t e) {
  return set.laws[e];
}
template <class Law>
const std::array<Connector, Law::K>& ends_at(const StencilSet<Law>& set, std::size_t e) {
  return set.ends[e];
}

// A law's terms at its vertices' positions x and velocities v, as much as `need` asks:
// StencilTerms (a stencil law's terms<D>), or PairTerms for a law in the pair form
// (laws.hpp: a spring).
template <int D, class Law, std::size_t K>
auto law_terms(const Law& law, const std::array<Vec<D>, K>& x, const std::array<Vec<D>, K>& v, Need need) {
  return law.template terms<D>(x, v, need);
}

// Whether a law gives its terms in the pair form (Law::kPairForm; stencil laws need not say).
template <class Law, class = void>
struct IsPairForm : std::false_type {};
template <class Law>
struct IsPairForm<Law, std::void_t<decltype(Law::kPairForm)>> : std::bool_constant<Law::kPairForm> {};

}  // namespace ms
