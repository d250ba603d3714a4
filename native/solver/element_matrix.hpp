// The Newton matrix in element form, as the assembler produces it:
//   - each mass's diagonal value cM m (times the identity),
//   - each spring's or rod's D x D block W, entering the matrix as +W in the two diagonal
//     blocks of its ends and -W in the two off-diagonal ones,
//   - each rod's gradient (its row of G, and of G^T in its multiplier's column),
//   - a D x D block added to the diagonal block of a few masses (contact with colliders).
//
// Why: assembly writes it sequentially, and the Krylov method multiplies by it directly,
// reading about a third of the memory of the compressed sparse matrix, which assembly
// then need not scatter into every Newton iteration.
// The compressed matrix is scattered from it only when a factorization or a multigrid
// hierarchy needs it. `scatter` emits the entries in an order fixed by the topology, so
// the pattern recorded once maps every later value to its slot.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <vector>

#include "two_way.hpp"

namespace ms {

class ElementMatrix {
 public:
  // Sizes the storage; the values are then written by set_mass, set_pair and set_rod.
  void resize(int dim, int num_masses, int num_pairs, int num_rods) {
    dim_ = dim;
    mass_diag_.resize(num_masses);
    pair_node_.resize(num_pairs);
    pair_block_.resize(static_cast<std::size_t>(num_pairs) * dim * dim);
    rod_grad_.resize(static_cast<std::size_t>(num_rods) * dim);
    first_rod_pair_ = num_pairs - num_rods;
    for (int i : block_nodes_)
      std::fill_n(&node_block_[static_cast<std::size_t>(i) * dim * dim], dim * dim, 0.0);
    block_nodes_.clear();
    node_block_.resize(static_cast<std::size_t>(num_masses) * dim * dim, 0.0);
  }
  void set_mass(int i, double value) { mass_diag_[i] = value; }
  // Pair p between masses a and b (-1 for a fix); W row-major.
  template <class Block>
  void set_pair(int p, int a, int b, const Block& W) {
    pair_node_[p] = {a, b};
    double* out = &pair_block_[static_cast<std::size_t>(p) * dim_ * dim_];
    for (int r = 0; r < dim_; ++r)
      for (int c = 0; c < dim_; ++c) out[dim_ * r + c] = W(r, c);
  }
  // Adds W to mass i's diagonal block; at most once per mass between two resizes.
  template <class Block>
  void set_node_block(int i, const Block& W) {
    double* out = &node_block_[static_cast<std::size_t>(i) * dim_ * dim_];
    block_nodes_.push_back(i);
    for (int r = 0; r < dim_; ++r)
      for (int c = 0; c < dim_; ++c) out[dim_ * r + c] = W(r, c);
  }
  const std::vector<int>& block_nodes() const { return block_nodes_; }
  const double* node_block(int i) const { return &node_block_[static_cast<std::size_t>(i) * dim_ * dim_]; }
  // Rod j (the pair first_rod_pair + j): dg/dp_b, and dg/dp_a = -grad.
  template <class Vector>
  void set_rod(int j, const Vector& grad) {
    for (int k = 0; k < dim_; ++k) rod_grad_[static_cast<std::size_t>(j) * dim_ + k] = grad(k);
  }

  int dim() const { return dim_; }
  int num_pairs() const { return static_cast<int>(pair_node_.size()); }
  double mass_value(int i) const { return mass_diag_[i]; }
  const std::array<int, 2>& pair_nodes(int p) const { return pair_node_[p]; }
  const double* pair_block(int p) const { return &pair_block_[static_cast<std::size_t>(p) * dim_ * dim_]; }
  int num_unknowns() const { return dim_ * num_masses() + num_rods(); }
  int num_masses() const { return static_cast<int>(mass_diag_.size()); }
  int num_rods() const { return static_cast<int>(rod_grad_.size()) / (dim_ > 0 ? dim_ : 1); }

  // y = J x; with `halves`, the pairs in two halves at once, the second half's sum added
  // to the first's (the same numbers whether or not the halves ran at once).
  Eigen::VectorXd multiply(const Eigen::VectorXd& x, TwoWay* halves = nullptr) const {
    Eigen::VectorXd y(x.size());
    if (dim_ == 3)
      multiply_impl<3>(x, y, halves);
    else
      multiply_impl<2>(x, y, halves);
    return y;
  }

  // Emits every entry as sink.add(row, col, value), in an order that depends only on the
  // topology (zeros included): mass blocks, then each pair's blocks, then for a rod its
  // G and G^T entries and its (zero) diagonal.
  template <class Sink>
  void scatter(Sink& sink) const {
    const int D = dim_;
    for (int i = 0; i < num_masses(); ++i)
      for (int r = 0; r < D; ++r)
        for (int c = 0; c < D; ++c)
          sink.add(D * i + r, D * i + c,
                   (r == c ? mass_diag_[i] : 0.0) + node_block_[static_cast<std::size_t>(i) * D * D + D * r + c]);
    const int rows_lam = D * num_masses();
    for (std::size_t p = 0; p < pair_node_.size(); ++p) {
      const auto [a, b] = pair_node_[p];
      const double* W = &pair_block_[p * D * D];
      auto block = [&](int i, int j, double sign) {
        for (int r = 0; r < D; ++r)
          for (int c = 0; c < D; ++c) sink.add(D * i + r, D * j + c, sign * W[D * r + c]);
      };
      if (a >= 0) block(a, a, 1.0);
      if (b >= 0) block(b, b, 1.0);
      if (a >= 0 && b >= 0) {
        block(a, b, -1.0);
        block(b, a, -1.0);
      }
      const int j = static_cast<int>(p) - first_rod_pair_;
      if (j < 0) continue;
      const double* grad = &rod_grad_[static_cast<std::size_t>(j) * D];
      const int row = rows_lam + j;
      for (int side = 0; side < 2; ++side) {
        const int node = side == 0 ? a : b;
        if (node < 0) continue;
        const double sign = side == 0 ? -1.0 : 1.0;
        for (int k = 0; k < D; ++k) {
          sink.add(row, D * node + k, sign * grad[k]);
          sink.add(D * node + k, row, sign * grad[k]);
        }
      }
      sink.add(row, row, 0.0);
    }
  }

 private:
  template <int D>
  void add_pairs(const Eigen::VectorXd& x, Eigen::VectorXd& y, std::size_t first, std::size_t last) const {
    using Vec = Eigen::Matrix<double, D, 1>;
    using Block = Eigen::Map<const Eigen::Matrix<double, D, D, Eigen::RowMajor>>;
    for (std::size_t p = first; p < last; ++p) {
      const auto [a, b] = pair_node_[p];
      Vec d = Vec::Zero();
      if (a >= 0) d += x.template segment<D>(D * a);
      if (b >= 0) d -= x.template segment<D>(D * b);
      const Vec Wd = Block(&pair_block_[p * D * D]) * d;
      if (a >= 0) y.template segment<D>(D * a) += Wd;
      if (b >= 0) y.template segment<D>(D * b) -= Wd;
    }
  }

  template <int D>
  void multiply_impl(const Eigen::VectorXd& x, Eigen::VectorXd& y, TwoWay* halves) const {
    using Vec = Eigen::Matrix<double, D, 1>;
    using Block = Eigen::Map<const Eigen::Matrix<double, D, D, Eigen::RowMajor>>;
    const int nm = num_masses();
    const std::size_t np = pair_node_.size();
    auto masses = [&] {
      for (int i = 0; i < nm; ++i) y.template segment<D>(D * i) = mass_diag_[i] * x.template segment<D>(D * i);
      for (int i : block_nodes_)
        y.template segment<D>(D * i) += Block(&node_block_[static_cast<std::size_t>(i) * D * D]) * x.template segment<D>(D * i);
    };
    if (halves) {
      halves->run([&](int half) {
        if (half == 0) {
          masses();
          add_pairs<D>(x, y, 0, np / 2);
        } else {
          second_half_.setZero(x.size());
          add_pairs<D>(x, second_half_, np / 2, np);
        }
      });
      // The sum in halves too where the vectors are long (a pass the helper would idle in).
      if (x.size() >= TwoWay::kMinVectorLength)
        halves->run([&](int half) {
          const Eigen::Index middle = x.size() / 2, first = half == 0 ? 0 : middle;
          const Eigen::Index count = half == 0 ? middle : x.size() - middle;
          y.segment(first, count) += second_half_.segment(first, count);
        });
      else
        y += second_half_;
    } else {
      masses();
      add_pairs<D>(x, y, 0, np);
    }
    const int rows_lam = D * nm;
    for (int j = 0; j < num_rods(); ++j) {
      const auto [a, b] = pair_node_[first_rod_pair_ + j];
      const Eigen::Map<const Vec> grad(&rod_grad_[static_cast<std::size_t>(j) * D]);
      const double lam = x(rows_lam + j);
      double g = 0;
      if (a >= 0) {
        g -= grad.dot(x.template segment<D>(D * a));
        y.template segment<D>(D * a) -= lam * grad;
      }
      if (b >= 0) {
        g += grad.dot(x.template segment<D>(D * b));
        y.template segment<D>(D * b) += lam * grad;
      }
      y(rows_lam + j) = g;
    }
  }

  int dim_ = 0;
  int first_rod_pair_ = 0;
  std::vector<double> mass_diag_;
  std::vector<std::array<int, 2>> pair_node_;
  std::vector<double> pair_block_;
  std::vector<double> rod_grad_;
  std::vector<double> node_block_;  // D x D per mass, zero but for block_nodes_
  std::vector<int> block_nodes_;
  mutable Eigen::VectorXd second_half_;  // multiply's second half of the pairs
};

}  // namespace ms
