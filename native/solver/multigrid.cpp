#include "multigrid.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace ms {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

constexpr int kMaxBlock = 8;           // unknowns per node: D <= 3, coarse <= 6 modes
constexpr int kCoarsestUnknowns = 500;  // solved directly
constexpr int kMaxLevels = 12;
constexpr double kStrength = 0.08;      // a neighbour is strong above this relative coupling
constexpr int kPowerIterations = 12;    // spectral radius estimate for the smoothing weight
// A multiply-add of a sparse matrix product (index lookups, accumulation, sorting) costs
// about 4 of a V-cycle's streamed ones: with this weight the setup's flop count matches
// its time. The solver weighs a setup against the Krylov iterations it would save, so an
// undercounted setup would be rebuilt too often.
constexpr double kProductFlopCost = 4.0;

// Rigid-body modes of the nodes: D translations and D(D-1)/2 rotations about the
// centroid, scaled to the structure's size so that all columns have similar norms.
MatrixXd rigid_body_modes(const VectorXd& coords, int dim) {
  const int n = static_cast<int>(coords.size()) / dim;
  const int m = dim == 2 ? 3 : 6;
  MatrixXd B = MatrixXd::Zero(coords.size(), m);
  if (n == 0) return B;
  VectorXd c = VectorXd::Zero(dim);
  for (int i = 0; i < n; ++i) c += coords.segment(dim * i, dim);
  c /= n;
  double r2 = 0;
  for (int i = 0; i < n; ++i) r2 += (coords.segment(dim * i, dim) - c).squaredNorm();
  const double scale = r2 > 0 ? std::sqrt(n / r2) : 1.0;
  for (int i = 0; i < n; ++i) {
    const VectorXd p = (coords.segment(dim * i, dim) - c) * scale;
    const int r = dim * i;
    for (int k = 0; k < dim; ++k) B(r + k, k) = 1.0;
    if (dim == 2) {
      B(r, 2) = -p(1);
      B(r + 1, 2) = p(0);
    } else {  // e_k x p for k = x, y, z
      B(r + 1, 3) = -p(2), B(r + 2, 3) = p(1);
      B(r, 4) = p(2), B(r + 2, 4) = -p(0);
      B(r, 5) = -p(1), B(r + 1, 5) = p(0);
    }
  }
  return B;
}

// Multiply-adds of the sparse product X * Y.
double product_flops(const SmoothedAggregation::RowMat& X, const SmoothedAggregation::RowMat& Y) {
  double f = 0;
  const int* outer = Y.outerIndexPtr();
  for (int k = 0; k < X.nonZeros(); ++k) {
    const int j = X.innerIndexPtr()[k];
    f += outer[j + 1] - outer[j];
  }
  return f;
}

}  // namespace

bool SmoothedAggregation::invert_diagonal_blocks(Level& level) const {
  const RowMat& A = level.A;
  const int nn = level.num_nodes();
  level.block_inv.clear();
  level.block_inv_start.assign(nn + 1, 0);
  for (int k = 0; k < nn; ++k) {
    const int s = level.block_start[k], bs = level.block_start[k + 1] - s;
    MatrixXd block = MatrixXd::Zero(bs, bs);
    for (int i = 0; i < bs; ++i)
      for (RowMat::InnerIterator it(A, s + i); it; ++it)
        if (it.col() >= s && it.col() < s + bs) block(i, it.col() - s) = it.value();
    const MatrixXd inv = block.inverse();
    if (!inv.allFinite()) return false;
    level.block_inv_start[k + 1] = level.block_inv_start[k] + bs * bs;
    for (int i = 0; i < bs; ++i)
      for (int j = 0; j < bs; ++j) level.block_inv.push_back(inv(i, j));
  }
  return true;
}

// Standard aggregation on the graph of strong couplings: (1) every node whose strong
// neighbours are all free roots an aggregate of itself and them; (2) the remaining nodes
// join a neighbouring aggregate of step 1; (3) what is left forms aggregates with its free
// neighbours. Nodes without strong neighbours stay out: the smoother solves them exactly.
std::vector<int> SmoothedAggregation::aggregate(const Level& level, int& num_aggregates) const {
  const RowMat& A = level.A;
  const int nn = level.num_nodes();
  std::vector<int> node_of(A.rows());
  for (int k = 0; k < nn; ++k)
    for (int i = level.block_start[k]; i < level.block_start[k + 1]; ++i) node_of[i] = k;
  // Squared Frobenius norms of the blocks of each block row.
  std::vector<double> diag(nn, 0.0), row(nn, 0.0);
  for (int k = 0; k < nn; ++k)
    for (int i = level.block_start[k]; i < level.block_start[k + 1]; ++i)
      for (RowMat::InnerIterator it(A, i); it; ++it)
        if (node_of[it.col()] == k) diag[k] += it.value() * it.value();
  std::vector<int> start(1, 0), neighbours, touched, seen_by(nn, -1);
  for (int k = 0; k < nn; ++k) {
    for (int i = level.block_start[k]; i < level.block_start[k + 1]; ++i)
      for (RowMat::InnerIterator it(A, i); it; ++it) {
        const int j = node_of[it.col()];
        if (j == k) continue;
        if (seen_by[j] != k) seen_by[j] = k, touched.push_back(j);
        row[j] += it.value() * it.value();
      }
    std::sort(touched.begin(), touched.end());
    for (int j : touched) {
      if (row[j] > kStrength * kStrength * std::sqrt(diag[k] * diag[j])) neighbours.push_back(j);
      row[j] = 0.0;
    }
    touched.clear();
    start.push_back(static_cast<int>(neighbours.size()));
  }

  std::vector<int> agg(nn, -1);
  std::vector<char> root_pass(nn, 0);
  num_aggregates = 0;
  for (int k = 0; k < nn; ++k) {  // pass 1
    if (agg[k] >= 0 || start[k] == start[k + 1]) continue;
    bool free = true;
    for (int p = start[k]; p < start[k + 1] && free; ++p) free = agg[neighbours[p]] < 0;
    if (!free) continue;
    agg[k] = num_aggregates;
    root_pass[k] = 1;
    for (int p = start[k]; p < start[k + 1]; ++p) agg[neighbours[p]] = num_aggregates, root_pass[neighbours[p]] = 1;
    ++num_aggregates;
  }
  std::vector<int> joined(nn, -1);
  for (int k = 0; k < nn; ++k) {  // pass 2
    if (agg[k] >= 0) continue;
    for (int p = start[k]; p < start[k + 1]; ++p)
      if (root_pass[neighbours[p]]) {
        joined[k] = agg[neighbours[p]];
        break;
      }
  }
  for (int k = 0; k < nn; ++k)
    if (joined[k] >= 0) agg[k] = joined[k];
  for (int k = 0; k < nn; ++k) {  // pass 3
    if (agg[k] >= 0 || start[k] == start[k + 1]) continue;
    agg[k] = num_aggregates;
    for (int p = start[k]; p < start[k + 1]; ++p)
      if (agg[neighbours[p]] < 0) agg[neighbours[p]] = num_aggregates;
    ++num_aggregates;
  }
  return agg;
}

bool SmoothedAggregation::compute(const SpMat& A, const VectorXd& coords, int dim) {
  levels_.clear();
  pair_block_offset_.clear();
  dim_ = dim;
  cycle_flops_ = setup_flops_ = 0;
  levels_.emplace_back();
  levels_[0].A = A;
  for (int i = 0; i <= A.rows() / dim; ++i) levels_[0].block_start.push_back(dim * i);
  MatrixXd B = rigid_body_modes(coords, dim);

  while (static_cast<int>(levels_.size()) < kMaxLevels) {
    Level& level = levels_.back();
    const RowMat& Al = level.A;
    if (Al.rows() <= kCoarsestUnknowns) break;
    int num_agg = 0;
    const std::vector<int> agg = aggregate(level, num_agg);
    if (num_agg == 0) break;
    // Tentative prolongator: Gram-Schmidt of the modes on each aggregate (B_a = Q R); the
    // coarse near-null space is R. Modes dependent on the ones before them are dropped
    // (a rotation about the axis of a two-node aggregate).
    std::vector<std::vector<int>> members(num_agg);
    for (int k = 0; k < level.num_nodes(); ++k)
      if (agg[k] >= 0) members[agg[k]].push_back(k);
    const int m = static_cast<int>(B.cols());
    std::vector<Eigen::Triplet<double>> t;
    std::vector<int> coarse_start(1, 0);
    MatrixXd Bc(num_agg * m, m);
    for (int a = 0; a < num_agg; ++a) {
      std::vector<int> rows;
      for (int k : members[a])
        for (int i = level.block_start[k]; i < level.block_start[k + 1]; ++i) rows.push_back(i);
      MatrixXd Ba(rows.size(), m);
      for (std::size_t i = 0; i < rows.size(); ++i) Ba.row(i) = B.row(rows[i]);
      MatrixXd Q(rows.size(), m), R = MatrixXd::Zero(m, m);
      int r = 0;
      for (int j = 0; j < m; ++j) {
        VectorXd v = Ba.col(j);
        const double norm0 = v.norm();
        for (int pass = 0; pass < 2; ++pass)
          for (int k = 0; k < r; ++k) {
            const double c = Q.col(k).dot(v);
            R(k, j) += c;
            v -= c * Q.col(k);
          }
        const double norm = v.norm();
        if (norm > 1e-6 * norm0 && norm > 0) {
          Q.col(r) = v / norm;
          R(r, j) = norm;
          ++r;
        }
      }
      const int c0 = coarse_start.back();
      for (std::size_t i = 0; i < rows.size(); ++i)
        for (int k = 0; k < r; ++k) t.emplace_back(rows[i], c0 + k, Q(i, k));
      Bc.middleRows(c0, r) = R.topRows(r);
      coarse_start.push_back(c0 + r);
    }
    const int nc = coarse_start.back();
    if (nc > 0.8 * Al.rows()) break;  // no longer coarsening
    if (!invert_diagonal_blocks(level)) return false;
    level.lower = float_blocks(Al, level.block_start, level.block_start, true);
    RowMat T(Al.rows(), nc);
    T.setFromTriplets(t.begin(), t.end());
    RowMat Dinv(Al.rows(), Al.rows());
    {
      std::vector<Eigen::Triplet<double>> d;
      for (int k = 0; k < level.num_nodes(); ++k) {
        const int s = level.block_start[k], bs = level.block_start[k + 1] - s;
        const double* inv = &level.block_inv[level.block_inv_start[k]];
        for (int i = 0; i < bs; ++i)
          for (int j = 0; j < bs; ++j) d.emplace_back(s + i, s + j, inv[i * bs + j]);
      }
      Dinv.setFromTriplets(d.begin(), d.end());
    }
    // Smoothing weight 4 / (3 rho(D^-1 A)), rho from a deterministic power iteration.
    VectorXd x = VectorXd::LinSpaced(Al.rows(), 1.0, 2.0), y;
    double rho = 1.0;
    for (int it = 0; it < kPowerIterations; ++it) {
      y = Dinv * (Al * x);
      rho = y.norm() / x.norm();
      x = y / y.norm();
    }
    const RowMat AT = Al * T;
    const RowMat P = T - (4.0 / (3.0 * rho)) * RowMat(Dinv * AT);
    const RowMat R = P.transpose();
    const RowMat AP = Al * P;
    RowMat Ac = R * AP;
    level.P = float_blocks(P, level.block_start, coarse_start, false);
    setup_flops_ += kProductFlopCost * (product_flops(Al, T) + product_flops(Dinv, AT) +
                                        product_flops(Al, P) + product_flops(R, AP)) +
                    2.0 * kPowerIterations * Al.nonZeros();
    cycle_flops_ += 3.0 * Al.nonZeros() + 2.0 * P.nonZeros() + 2.0 * level.block_inv.size();
    B = Bc.topRows(nc);
    Level next;
    next.A = std::move(Ac);
    next.block_start = coarse_start;
    levels_.push_back(std::move(next));
  }
  const SpMat coarsest = levels_.back().A;
  coarse_.compute(coarsest);
  if (coarse_.info() != Eigen::Success) return false;
  const double lnnz = coarse_.matrixL().nestedExpression().nonZeros();
  cycle_flops_ += 4 * lnnz;
  setup_flops_ += 10 * lnnz;  // rough: the coarsest matrix is small
  return true;
}

SmoothedAggregation::FloatBlocks SmoothedAggregation::float_blocks(const RowMat& M,
                                                                   const std::vector<int>& row_nodes,
                                                                   const std::vector<int>& col_nodes,
                                                                   bool strictly_lower) {
  const int nr = static_cast<int>(row_nodes.size()) - 1, nc = static_cast<int>(col_nodes.size()) - 1;
  std::vector<int> node_of(M.cols());
  for (int j = 0; j < nc; ++j)
    for (int c = col_nodes[j]; c < col_nodes[j + 1]; ++c) node_of[c] = j;
  FloatBlocks out;
  out.row_start.assign(1, 0);
  out.value_start.assign(1, 0);
  std::vector<int> offset(nc), row_of(nc, -1);  // block (k, j) of row k: values[offset[j]]
  for (int k = 0; k < nr; ++k) {
    const int bk = row_nodes[k + 1] - row_nodes[k];
    for (int i = 0; i < bk; ++i)
      for (RowMat::InnerIterator it(M, row_nodes[k] + i); it; ++it) {
        const int j = node_of[it.col()];
        if (strictly_lower && j >= k) continue;
        const int bj = col_nodes[j + 1] - col_nodes[j];
        if (row_of[j] != k) {
          row_of[j] = k;
          offset[j] = static_cast<int>(out.values.size());
          out.col.push_back(j);
          out.values.resize(out.values.size() + bk * bj, 0.0f);
        }
        out.values[offset[j] + bj * i + (it.col() - col_nodes[j])] = static_cast<float>(it.value());
      }
    out.row_start.push_back(static_cast<int>(out.col.size()));
    out.value_start.push_back(static_cast<int>(out.values.size()));
  }
  return out;
}

// Block Gauss-Seidel on the strictly lower blocks L of a symmetric matrix
// A = L + diag + L^T, row k's blocks A_kj (j < k) stored in node order (row-major, D x D
// with D > 0, else sized by block_start). Row k of a sweep gathers A_kj x_j over its
// lower blocks and scatters A_kj^T x_k (= A_jk x_k) into `pending` for the rows j < k,
// so each block is read once per sweep (half of A).
//
// Forward from x = 0: x_k = D_k^-1 (b_k - sum_{j<k} A_kj x_j), and since the upper part
// met zeros, the residual b - A x is exactly -sum_{j>k} A_kj x_j: what was scattered.
// Backward: row k's upper part acts on the rows j > k already updated (scattered into
// `pending`), its lower part on the x_j not yet updated (gathered).
template <int D>
void SmoothedAggregation::lower_block_sweep(const Level& level, const VectorXd& b, VectorXd& x,
                                            VectorXd& pending, bool forward) const {
  const int nn = level.num_nodes();
  const int* start = level.block_start.data();
  const FloatBlocks& lower = level.lower;
  const int* col = lower.col.data();
  auto first = [&](int k) { return D > 0 ? D * k : start[k]; };
  auto size = [&](int k) { return D > 0 ? D : start[k + 1] - start[k]; };
  for (int step = 0; step < nn; ++step) {
    const int k = forward ? step : nn - 1 - step;
    const int bk = size(k), ok = first(k);
    const int p0 = lower.row_start[k], p1 = lower.row_start[k + 1];
    const float* row = &lower.values[lower.value_start[k]];
    double s[kMaxBlock];
    for (int i = 0; i < bk; ++i) s[i] = b[ok + i] - (forward ? 0.0 : pending[ok + i]);
    const float* B = row;
    for (int p = p0; p < p1; ++p) {
      const int bj = size(col[p]);
      const double* xj = x.data() + first(col[p]);
      for (int i = 0; i < bk; ++i) {
        double t = 0;  // one subtraction per block row keeps the dependency chains short
        for (int c = 0; c < bj; ++c) t += B[bj * i + c] * xj[c];
        s[i] -= t;
      }
      B += bk * bj;
    }
    const double* Ik = &level.block_inv[level.block_inv_start[k]];
    double* xk = x.data() + ok;
    for (int i = 0; i < bk; ++i) {
      double acc = 0;
      for (int c = 0; c < bk; ++c) acc += Ik[bk * i + c] * s[c];
      xk[i] = acc;
    }
    const double sign = forward ? -1.0 : 1.0;  // forward: residual; backward: A_jk x_k
    B = row;
    for (int p = p0; p < p1; ++p) {
      const int bj = size(col[p]);
      double* pj = pending.data() + first(col[p]);
      for (int c = 0; c < bj; ++c) {
        double t = 0;
        for (int i = 0; i < bk; ++i) t += B[bj * i + c] * xk[i];
        pj[c] += sign * t;
      }
      B += bk * bj;
    }
  }
}

void SmoothedAggregation::sweep(int l, const VectorXd& b, VectorXd& x, VectorXd& pending,
                                bool forward) const {
  const Level& level = levels_[l];
  pending.setZero(b.size());
  if (forward) x.setZero(b.size());
  // The finest level's nodes are the masses, with dim_ unknowns each: a fixed block size
  // lets the compiler unroll. Coarser nodes have up to 6 (rigid-body modes).
  if (l > 0)
    lower_block_sweep<0>(level, b, x, pending, forward);
  else if (dim_ == 3)
    lower_block_sweep<3>(level, b, x, pending, forward);
  else
    lower_block_sweep<2>(level, b, x, pending, forward);
}

namespace {

// x_fine += P x_coarse (transpose = false) or r_coarse += P^T r_fine (transpose = true),
// P in float node blocks; R > 0: every row node has R unknowns (the finest level, where a
// fixed size lets the compiler unroll), else sized by `rows`.
template <int R, bool transpose>
void prolongation_product(const std::vector<int>& row_start, const std::vector<int>& col,
                          const std::vector<int>& value_start, const std::vector<float>& values,
                          const std::vector<int>& rows, const std::vector<int>& cols,
                          const double* in, double* out) {
  const int nn = static_cast<int>(rows.size()) - 1;
  for (int k = 0; k < nn; ++k) {
    const int bk = R > 0 ? R : rows[k + 1] - rows[k];
    double s[kMaxBlock] = {};  // the fine rows: their sum (P x) or their values (P^T r)
    if (transpose)
      for (int i = 0; i < bk; ++i) s[i] = in[rows[k] + i];
    const float* B = &values[value_start[k]];
    for (int p = row_start[k]; p < row_start[k + 1]; ++p) {
      const int j = col[p], bj = cols[j + 1] - cols[j];
      if (transpose) {
        double* cj = out + cols[j];
        for (int c = 0; c < bj; ++c) {
          double t = 0;
          for (int i = 0; i < bk; ++i) t += B[bj * i + c] * s[i];
          cj[c] += t;
        }
      } else {
        const double* xj = in + cols[j];
        for (int i = 0; i < bk; ++i) {
          double t = 0;
          for (int c = 0; c < bj; ++c) t += B[bj * i + c] * xj[c];
          s[i] += t;
        }
      }
      B += bk * bj;
    }
    if (!transpose)
      for (int i = 0; i < bk; ++i) out[rows[k] + i] += s[i];
  }
}

}  // namespace

template <bool transpose>
void SmoothedAggregation::prolongation_product(int l, const double* in, double* out) const {
  const Level& level = levels_[l];
  const FloatBlocks& P = level.P;
  const std::vector<int>& cols = levels_[l + 1].block_start;
  auto run = [&](auto fixed) {
    ms::prolongation_product<decltype(fixed)::value, transpose>(
        P.row_start, P.col, P.value_start, P.values, level.block_start, cols, in, out);
  };
  if (l > 0)
    run(std::integral_constant<int, 0>());
  else if (dim_ == 3)
    run(std::integral_constant<int, 3>());
  else
    run(std::integral_constant<int, 2>());
}

void SmoothedAggregation::prolongate(int l, const VectorXd& coarse, VectorXd& fine) const {
  prolongation_product<false>(l, coarse.data(), fine.data());
}

VectorXd SmoothedAggregation::restrict_to_coarse(int l, const VectorXd& fine) const {
  VectorXd coarse = VectorXd::Zero(levels_[l + 1].block_start.back());
  prolongation_product<true>(l, fine.data(), coarse.data());
  return coarse;
}

void SmoothedAggregation::cycle(int l, const VectorXd& b, VectorXd& x) const {
  if (l + 1 == num_levels()) {
    x = coarse_.solve(b);
    return;
  }
  const Level& level = levels_[l];
  VectorXd r;
  sweep(l, b, x, r, true);
  VectorXd coarse_x;
  cycle(l + 1, restrict_to_coarse(l, r), coarse_x);
  prolongate(l, coarse_x, x);
  sweep(l, b, x, r, false);
}

void SmoothedAggregation::apply(const VectorXd& b, VectorXd& x) const { cycle(0, b, x); }

namespace {

// Inverts the D x D blocks (row-major, one after another) of `blocks` into `inv`.
template <int D>
bool invert_blocks(const std::vector<double>& blocks, std::vector<double>& inv) {
  using Block = Eigen::Matrix<double, D, D, Eigen::RowMajor>;
  for (std::size_t k = 0; k < blocks.size(); k += D * D) {
    Block out = Eigen::Map<const Block>(&blocks[k]).inverse();
    if (!out.allFinite()) return false;
    Eigen::Map<Block> target(&inv[k]);
    target = out;
  }
  return true;
}

}  // namespace

bool SmoothedAggregation::refresh_smoother(const ElementMatrix& elements) {
  if (levels_.size() < 2) return true;  // a single level is solved directly: no smoother
  Level& level = levels_[0];
  const int D = dim_, DD = D * D, nn = level.num_nodes(), np = elements.num_pairs();
  if (elements.dim() != D || elements.num_masses() != nn || elements.num_rods() > 0) return false;
  if (static_cast<int>(pair_block_offset_.size()) != np) {
    // Block (k, j), k > j, of row k: found among the row's columns once per hierarchy.
    pair_block_offset_.assign(np, -1);
    for (int p = 0; p < np; ++p) {
      const auto [a, b] = elements.pair_nodes(p);
      if (a < 0 || b < 0 || a == b) continue;
      const int k = std::max(a, b), j = std::min(a, b);
      const int* first = level.lower.col.data() + level.lower.row_start[k];
      const int* last = level.lower.col.data() + level.lower.row_start[k + 1];
      const int* found = std::find(first, last, j);
      if (found == last) return false;
      pair_block_offset_[p] = level.lower.value_start[k] + static_cast<int>(found - first) * DD;
    }
  }
  // The matrix the hierarchy was built from is sym(J): each pair adds sym(W) to its ends'
  // diagonal blocks and -sym(W) to the block between them.
  std::vector<double>& diag = diagonal_scratch_;
  diag.assign(static_cast<std::size_t>(nn) * DD, 0.0);
  for (int i = 0; i < nn; ++i)
    for (int r = 0; r < D; ++r) diag[static_cast<std::size_t>(i) * DD + r * D + r] = elements.mass_value(i);
  for (int i : elements.block_nodes()) {
    const double* B = elements.node_block(i);
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c)
        diag[static_cast<std::size_t>(i) * DD + r * D + c] += 0.5 * (B[D * r + c] + B[D * c + r]);
  }
  std::fill(level.lower.values.begin(), level.lower.values.end(), 0.0f);
  double S[kMaxBlock * kMaxBlock];
  for (int p = 0; p < np; ++p) {
    const auto [a, b] = elements.pair_nodes(p);
    const double* W = elements.pair_block(p);
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c) S[D * r + c] = 0.5 * (W[D * r + c] + W[D * c + r]);
    for (int node : {a, b})
      if (node >= 0)
        for (int e = 0; e < DD; ++e) diag[static_cast<std::size_t>(node) * DD + e] += S[e];
    if (const int off = pair_block_offset_[p]; off >= 0)
      for (int e = 0; e < DD; ++e) level.lower.values[off + e] -= static_cast<float>(S[e]);
  }
  level.block_inv.resize(diag.size());
  return D == 3 ? invert_blocks<3>(diag, level.block_inv) : invert_blocks<2>(diag, level.block_inv);
}

}  // namespace ms
