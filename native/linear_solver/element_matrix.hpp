// The Newton matrix in element form, as the assembler produces it:
//   - each mass's diagonal value cM m (times the identity),
//   - each spring's or rod's D x D block W, entering the matrix as +W in the two diagonal
//     blocks of its ends and -W in the two off-diagonal ones,
//   - each rod's gradient (its row of G, and of G^T in its multiplier's column),
//   - a D x D block added to the diagonal block of a few masses (contact with colliders),
//   - each stencil's (kD) x (kD) block over its k vertices (laws on three or more
//     vertices: forces/stencil.hpp), entering the matrix D x D block by D x D block,
//   - each coupling's block over four masses, w_i w_j S (self-contact pairs, listed anew
//     every step: add_coupling).
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
#include <cstdint>
#include <vector>

#include "parallel/chunk_sums.hpp"

namespace ms {

class ElementMatrix {
 public:
  // Sizes the storage; the values are then written by set_mass, set_pair and set_rod.
  void resize(int dim, int num_masses, int num_pairs, int num_rods) {
    dim_ = dim;
    pair_block_.resize(static_cast<std::size_t>(num_pairs) * dim * dim);
    rod_grad_.resize(static_cast<std::size_t>(num_rods) * dim);
    first_rod_pair_ = num_pairs - num_rods;
    // The pairs join the same masses from one assembly to the next (a new topology comes
    // as a new pattern: NewtonLinearSolver::set_pattern), so a parallel product's plan
    // holds until the sizes change.
    if (num_masses != static_cast<int>(mass_diag_.size()) || num_pairs != static_cast<int>(pair_node_.size()))
      plan_ = ChunkPlan();
    mass_diag_.resize(num_masses);
    pair_node_.resize(num_pairs);
    for (int i : block_nodes_)
      std::fill_n(&node_block_[static_cast<std::size_t>(i) * dim * dim], dim * dim, 0.0);
    block_nodes_.clear();
    node_block_.resize(static_cast<std::size_t>(num_masses) * dim * dim, 0.0);
    couplings_.clear();
  }
  void set_mass(int i, double value) { mass_diag_[i] = value; }
  // Pair p between masses a and b (-1 for a fix); W row-major.
  template <class Block>
  void set_pair(int p, int a, int b, const Block& W) {
    pair_node_[p] = {a, b};
    copy_block(W, &pair_block_[static_cast<std::size_t>(p) * dim_ * dim_]);
  }
  // Adds W to mass i's diagonal block; at most once per mass between two resizes.
  template <class Block>
  void set_node_block(int i, const Block& W) {
    block_nodes_.push_back(i);
    copy_block(W, &node_block_[static_cast<std::size_t>(i) * dim_ * dim_]);
  }
  // out = W row-major; unrolled when W's size is known at compile time (assembly writes a
  // block per spring at every Newton iteration).
  template <class Block>
  void copy_block(const Block& W, double* out) const {
    constexpr int N = Block::RowsAtCompileTime;
    const int n = N > 0 ? N : dim_;
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) out[n * r + c] = W(r, c);
  }
  // The stencils' layout: stencil s has the vertices start[s] ... start[s + 1] - 1 of the
  // list set_stencil fills, and its block is an outer product where outer[s] (empty: none
  // is). Kept while it stays the same (once per topology and kind of Newton matrix).
  void resize_stencils(const std::vector<int>& start, const std::vector<char>& outer) {
    if (start == stencil_start_ && outer == stencil_outer_) return;
    stencil_start_ = start;
    stencil_outer_ = outer;
    const int count = num_stencils();
    stencil_value_start_.assign(count + 1, 0);
    for (int k = 0; k < count; ++k) {
      const std::size_t n = static_cast<std::size_t>(stencil_start_[k + 1] - stencil_start_[k]) * dim_;
      stencil_value_start_[k + 1] = stencil_value_start_[k] + (is_outer(k) ? 1 + n : n * n);
    }
    stencil_node_.assign(stencil_start_.empty() ? 0 : stencil_start_.back(), -1);
    stencil_value_.assign(stencil_value_start_.back(), 0.0);
    incidence_fresh_ = false;  // the slots moved: made anew
  }
  // Stencil vertices from `first` on; the incidence is made anew only if they changed
  // (assembly writes the same ones every time while the topology stays).
  void set_stencil_nodes(int first, const int* nodes, int k) {
    if (std::equal(nodes, nodes + k, &stencil_node_[first])) return;
    std::copy(nodes, nodes + k, &stencil_node_[first]);
    incidence_fresh_ = false;
  }
  // Stencil s over masses nodes[0 ... k - 1] (-1 for a fix), with its block B ((kD) x (kD)).
  template <class Block>
  void set_stencil(int s, const int* nodes, const Block& B) {
    const int first = stencil_start_[s], k = stencil_start_[s + 1] - first, n = k * dim_;
    set_stencil_nodes(first, nodes, k);
    double* out = &stencil_value_[stencil_value_start_[s]];
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) out[n * r + c] = B(r, c);
  }
  // Stencil s (laid out as an outer product) with the block scale * u u^T: 1 + kD numbers
  // where the block has (kD)^2 (a hinge: 13 instead of 144; what assembly writes and the
  // products read, docs/performance.md "Angular bending").
  template <class Vector>
  void set_stencil_outer(int s, const int* nodes, double scale, const Vector& u) {
    const int first = stencil_start_[s], k = stencil_start_[s + 1] - first, n = k * dim_;
    set_stencil_nodes(first, nodes, k);
    double* out = &stencil_value_[stencil_value_start_[s]];
    out[0] = scale;
    for (int r = 0; r < n; ++r) out[1 + r] = u(r);
  }
  // A coupling over masses nodes (-1: a fix) whose D x D block (i, j) is w_i w_j S: a
  // self-contact pair (contact/self_contact.hpp). Its masses change from step to step
  // while the matrix's pattern stays, so products take it whole, but the compressed
  // matrix and the multigrid (the preconditioners) only its diagonal blocks w_i^2 S
  // (coupling_diagonal).
  struct Coupling {
    std::array<int, 4> node;
    std::array<double, 4> w;
    std::array<double, 9> S;  // row-major D x D
  };
  template <class Block>
  void add_coupling(const std::array<int, 4>& nodes, const std::array<double, 4>& w, const Block& S) {
    Coupling c{nodes, w, {}};
    for (int r = 0; r < dim_; ++r)
      for (int col = 0; col < dim_; ++col) c.S[dim_ * r + col] = S(r, col);
    couplings_.push_back(c);
  }
  const std::vector<Coupling>& couplings() const { return couplings_; }
  // out += coupling c's diagonal block of its vertex j (w_j^2 S), row-major.
  void add_coupling_diagonal(const Coupling& c, int j, double* out) const {
    for (int e = 0; e < dim_ * dim_; ++e) out[e] += c.w[j] * c.w[j] * c.S[e];
  }
  bool is_outer(int s) const { return !stencil_outer_.empty() && stencil_outer_[s]; }
  // out += the D x D block (i, j) of stencil s, row-major.
  template <int D>
  void add_stencil_block(int s, int i, int j, double* out) const {
    const double* V = &stencil_value_[stencil_value_start_[s]];
    if (is_outer(s)) {
      const double* ui = V + 1 + D * i;
      const double* uj = V + 1 + D * j;
      for (int r = 0; r < D; ++r) {
        const double row = V[0] * ui[r];
        for (int c = 0; c < D; ++c) out[D * r + c] += row * uj[c];
      }
      return;
    }
    const int n = (stencil_start_[s + 1] - stencil_start_[s]) * D;
    const double* B = V + static_cast<std::size_t>(n) * D * i + D * j;
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c) out[D * r + c] += B[n * r + c];
  }
  // Stencil s's vertices (-1: a fix) and their count.
  const int* stencil_nodes(int s) const { return &stencil_node_[stencil_start_[s]]; }
  int stencil_size(int s) const { return stencil_start_[s + 1] - stencil_start_[s]; }
  const std::vector<int>& stencil_vertices() const { return stencil_node_; }
  int num_stencils() const { return stencil_start_.empty() ? 0 : static_cast<int>(stencil_start_.size()) - 1; }
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

  // Each mass's places among the stencils' vertices (slots of stencil_vertices()), in
  // stencil order, and each slot's stencil: the products and the multigrid's diagonal
  // blocks gather by them, each mass its own sum (the same bits on any number of
  // workers). Made anew when the stencils' vertices or the number of masses change; call
  // it before a parallel loop reads it.
  struct StencilIncidence {
    std::vector<int> start, slot;       // mass a's slots: slot[start[a]] ... slot[start[a + 1] - 1]
    std::vector<int> stencil_of;        // each slot's stencil
  };
  const StencilIncidence& stencil_incidence() const {
    if (!incidence_fresh_ || static_cast<int>(incidence_.start.size()) != num_masses() + 1) {
      StencilIncidence& inc = incidence_;
      const int nm = num_masses(), slots = static_cast<int>(stencil_node_.size());
      inc.start.assign(nm + 1, 0);
      for (int a : stencil_node_)
        if (a >= 0) ++inc.start[a + 1];
      for (int a = 0; a < nm; ++a) inc.start[a + 1] += inc.start[a];
      inc.slot.resize(inc.start[nm]);
      std::vector<int> next(inc.start.begin(), inc.start.end() - 1);
      for (int q = 0; q < slots; ++q)
        if (stencil_node_[q] >= 0) inc.slot[next[stencil_node_[q]]++] = q;
      inc.stencil_of.resize(slots);
      for (int st = 0; st < num_stencils(); ++st)
        std::fill(inc.stencil_of.begin() + stencil_start_[st], inc.stencil_of.begin() + stencil_start_[st + 1], st);
      incidence_fresh_ = true;
    }
    return incidence_;
  }
  // out += the stencils' diagonal blocks at mass a, row-major, in stencil order (the
  // multigrid's finest level takes only these: multigrid.cpp, add_stencils).
  template <int D>
  void add_stencil_diagonal(int a, double* out) const {
    const StencilIncidence& inc = incidence_;  // made by stencil_incidence() before
    for (int q = inc.start[a]; q < inc.start[a + 1]; ++q) {
      const int st = inc.stencil_of[inc.slot[q]], i = inc.slot[q] - stencil_start_[st];
      add_stencil_block<D>(st, i, i, out);
    }
  }

  // The pairs a parallel product cuts into one chunk each (parallel_for.hpp), the
  // stencils, and the rows that gather the stencils' products.
  static constexpr long kPairGrain = 1024;
  static constexpr long kStencilGrain = 512;
  static constexpr long kRowGrain = 512;

  // y = J x; with `parallel`, the pairs in chunks at once (by their number alone), each
  // chunk's sum kept apart and the sums added in chunk order: the same numbers on any
  // number of workers.
  Eigen::VectorXd multiply(const Eigen::VectorXd& x, bool parallel = false) const {
    Eigen::VectorXd y(x.size());
    if (dim_ == 3)
      multiply_impl<3>(x, y, parallel);
    else
      multiply_impl<2>(x, y, parallel);
    return y;
  }

  // Emits every entry as sink.add(row, col, value), in an order that depends only on the
  // topology (zeros included): mass blocks, then each pair's blocks, then for a rod its
  // G and G^T entries and its (zero) diagonal, then the stencils' blocks. The couplings'
  // diagonal blocks come with the mass blocks (the pattern stays that of the topology);
  // with `whole_couplings` (the exact matrix, no pattern), their blocks come whole at the
  // end instead.
  template <class Sink>
  void scatter(Sink& sink, bool whole_couplings = false) const {
    const int D = dim_;
    std::vector<double> lumped;  // the couplings' diagonal blocks, per mass
    if (!couplings_.empty() && !whole_couplings) {
      lumped.assign(static_cast<std::size_t>(num_masses()) * D * D, 0.0);
      for (const Coupling& c : couplings_)
        for (int j = 0; j < 4; ++j)
          if (c.node[j] >= 0) add_coupling_diagonal(c, j, &lumped[static_cast<std::size_t>(c.node[j]) * D * D]);
    }
    for (int i = 0; i < num_masses(); ++i)
      for (int r = 0; r < D; ++r)
        for (int c = 0; c < D; ++c) {
          const std::size_t at = static_cast<std::size_t>(i) * D * D + D * r + c;
          sink.add(D * i + r, D * i + c,
                   (r == c ? mass_diag_[i] : 0.0) + node_block_[at] + (lumped.empty() ? 0.0 : lumped[at]));
        }
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
    for (int st = 0; st < num_stencils(); ++st) {
      const int first = stencil_start_[st], k = stencil_start_[st + 1] - first;
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
          const int a = stencil_node_[first + i], b = stencil_node_[first + j];
          if (a < 0 || b < 0) continue;
          double B[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
          if (D == 3)
            add_stencil_block<3>(st, i, j, B);
          else
            add_stencil_block<2>(st, i, j, B);
          for (int r = 0; r < D; ++r)
            for (int c = 0; c < D; ++c) sink.add(D * a + r, D * b + c, B[D * r + c]);
        }
    }
    if (!whole_couplings) return;
    for (const Coupling& cp : couplings_)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          if (cp.node[i] < 0 || cp.node[j] < 0) continue;
          for (int r = 0; r < D; ++r)
            for (int c = 0; c < D; ++c)
              sink.add(D * cp.node[i] + r, D * cp.node[j] + c, cp.w[i] * cp.w[j] * cp.S[D * r + c]);
        }
  }

 private:
  // y += pair p times x, y holding the entries from `offset` on.
  template <int D>
  void add_pair(const Eigen::VectorXd& x, Eigen::VectorXd& y, long p, Eigen::Index offset) const {
    using Vec = Eigen::Matrix<double, D, 1>;
    using Block = Eigen::Map<const Eigen::Matrix<double, D, D, Eigen::RowMajor>>;
    const auto [a, b] = pair_node_[p];
    Vec d = Vec::Zero();
    if (a >= 0) d += x.template segment<D>(D * a);
    if (b >= 0) d -= x.template segment<D>(D * b);
    const Vec Wd = Block(&pair_block_[static_cast<std::size_t>(p) * D * D]) * d;
    if (a >= 0) y.template segment<D>(D * a - offset) += Wd;
    if (b >= 0) y.template segment<D>(D * b - offset) -= Wd;
  }
  template <int D>
  void add_pairs(const Eigen::VectorXd& x, Eigen::VectorXd& y, const int* first, const int* last,
                 Eigen::Index offset) const {
    for (const int* p = first; p != last; ++p) add_pair<D>(x, y, *p, offset);
  }

  // y += the stencils times x, stencils and then rows in chunks at once with `parallel`
  // (each writes its own slots, then its own rows: the same bits on any number of
  // workers).
  template <int D>
  void add_stencils(const Eigen::VectorXd& x, Eigen::VectorXd& y, bool parallel) const {
    const int count = num_stencils();
    if (count == 0) return;
    const StencilIncidence& inc = stencil_incidence();
    using Vec = Eigen::Matrix<double, D, 1>;
    stencil_product_.resize(stencil_node_.size() * D);
    // Each stencil's rows of B_s x_s into its own slots, then each mass gathers its slots:
    // a hinge's outer product costs 2kD products where its blocks merged per pair of
    // masses cost (kD)^2 and a merge per assembly (docs/performance.md, "Angular bending").
    for_chunks(count, parallel ? chunk_count(count, kStencilGrain) : 1, [&](long first, long last) {
      for (long st = first; st < last; ++st)
        stencil_times<D>(static_cast<int>(st), x, &stencil_product_[static_cast<std::size_t>(stencil_start_[st]) * D]);
    });
    const long rows = num_masses();
    for_chunks(rows, parallel ? chunk_count(rows, kRowGrain) : 1, [&](long first, long last) {
      for (long a = first; a < last; ++a) {
        Vec sum = Vec::Zero();
        for (int q = inc.start[a]; q < inc.start[a + 1]; ++q)
          sum += Eigen::Map<const Vec>(&stencil_product_[static_cast<std::size_t>(inc.slot[q]) * D]);
        y.template segment<D>(D * a) += sum;
      }
    });
  }

  // out (kD numbers) = stencil st's block times its vertices' x (a fix's x: 0).
  template <int D>
  void stencil_times(int st, const Eigen::VectorXd& x, double* out) const {
    const int first = stencil_start_[st], k = stencil_start_[st + 1] - first, n = k * D;
    const double* V = &stencil_value_[stencil_value_start_[st]];
    if (is_outer(st)) {
      double t = 0;
      for (int j = 0; j < k; ++j)
        if (const int b = stencil_node_[first + j]; b >= 0)
          for (int c = 0; c < D; ++c) t += V[1 + D * j + c] * x(D * b + c);
      t *= V[0];
      for (int r = 0; r < n; ++r) out[r] = t * V[1 + r];
      return;
    }
    std::fill_n(out, n, 0.0);
    for (int j = 0; j < k; ++j)
      if (const int b = stencil_node_[first + j]; b >= 0)
        for (int r = 0; r < n; ++r)
          for (int c = 0; c < D; ++c) out[r] += V[n * r + D * j + c] * x(D * b + c);
  }

  // y += the couplings times x: y_i += w_i S sum_j w_j x_j, in the couplings' order.
  template <int D>
  void add_couplings(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    using Vec = Eigen::Matrix<double, D, 1>;
    using Block = Eigen::Map<const Eigen::Matrix<double, D, D, Eigen::RowMajor>>;
    for (const Coupling& c : couplings_) {
      Vec sum = Vec::Zero();
      for (int j = 0; j < 4; ++j)
        if (c.node[j] >= 0) sum += c.w[j] * x.template segment<D>(D * c.node[j]);
      const Vec Ssum = Block(c.S.data()) * sum;
      for (int j = 0; j < 4; ++j)
        if (c.node[j] >= 0) y.template segment<D>(D * c.node[j]) += c.w[j] * Ssum;
    }
  }

  template <int D>
  void add_masses(const Eigen::VectorXd& x, Eigen::VectorXd& y) const {
    using Block = Eigen::Map<const Eigen::Matrix<double, D, D, Eigen::RowMajor>>;
    for (int i = 0; i < num_masses(); ++i) y.template segment<D>(D * i) = mass_diag_[i] * x.template segment<D>(D * i);
    for (int i : block_nodes_)
      y.template segment<D>(D * i) += Block(&node_block_[static_cast<std::size_t>(i) * D * D]) * x.template segment<D>(D * i);
  }

  template <int D>
  void multiply_impl(const Eigen::VectorXd& x, Eigen::VectorXd& y, bool parallel) const {
    using Vec = Eigen::Matrix<double, D, 1>;
    const int nm = num_masses();
    const long np = static_cast<long>(pair_node_.size());
    const int chunks = parallel ? chunk_count(np, kPairGrain) : 1;
    if (chunks == 1) {
      add_masses<D>(x, y);
      for (long p = 0; p < np; ++p) add_pair<D>(x, y, p, 0);
    } else {
      if (plan_.chunks() != chunks)  // once per topology (resize)
        plan_ = plan_by_nodes(np, nm, chunks, D, [&](long p, auto&& visit) {
          visit(pair_node_[p][0]);
          visit(pair_node_[p][1]);
        });
      ChunkSums sums(plan_.spans, &y);
      WorkerPool::shared().run(chunks, [&](int c) {
        if (c == 0) add_masses<D>(x, y);  // where chunk 0's pairs then add
        add_pairs<D>(x, *sums.sum(c), &plan_.order[plan_.start[c]], &plan_.order[0] + plan_.start[c + 1],
                     sums.offset(c));
      });
      sums.finish();
    }
    add_stencils<D>(x, y, parallel);
    add_couplings<D>(x, y);
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
  std::vector<Coupling> couplings_;
  std::vector<int> stencil_start_, stencil_node_;
  std::vector<char> stencil_outer_;  // per stencil: its block is an outer product (empty: none)
  std::vector<std::size_t> stencil_value_start_;
  std::vector<double> stencil_value_;
  // A parallel product's chunks of pairs, by where they lie.
  mutable ChunkPlan plan_;
  mutable StencilIncidence incidence_;
  mutable bool incidence_fresh_ = false;
  mutable std::vector<double> stencil_product_;  // add_stencils' rows of each stencil
};

}  // namespace ms
