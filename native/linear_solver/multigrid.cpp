#include "linear_solver/multigrid.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace ms {

using Eigen::VectorXd;

namespace {

constexpr int kCoarsestUnknowns = 500;  // solved directly
constexpr int kMaxLevels = 12;
constexpr double kStrength = 0.08;      // a neighbour is strong above this relative coupling
// Power iterations for the spectral radius of D^-1 A (the smoothing weight): from a fixed
// start, or fewer from the last setup's vector (the matrix changes little between setups).
constexpr int kPowerIterations = 12;
constexpr int kWarmPowerIterations = 3;
// A block multiply-add of the setup's sparse products (index lookups, accumulation) costs
// about this many of a V-cycle's streamed ones: with this weight the setup's flop count
// matches its time. The solver weighs a setup against the Krylov iterations it would
// save, so an undercounted setup would be rebuilt too often.
constexpr double kProductFlopCost = 2.0;

template <int D>
using Block = Eigen::Matrix<double, D, D, Eigen::RowMajor>;
template <int D>
using BlockMap = Eigen::Map<Block<D>>;
template <int D>
using ConstBlockMap = Eigen::Map<const Block<D>>;
using DoubleBlocks = SmoothedAggregation::Blocks<double>;
using FloatBlocks = SmoothedAggregation::Blocks<float>;

// Gustavson's row-by-row sparse accumulator: the blocks added to one column of the
// current output row land in one block.
template <int D>
class RowAccumulator {
 public:
  explicit RowAccumulator(int cols) : slot_(cols, -1) {}
  BlockMap<D> at(DoubleBlocks& out, int col) {
    if (slot_[col] < 0) {
      slot_[col] = out.num_blocks();
      out.col.push_back(col);
      out.values.resize(out.values.size() + D * D, 0.0);
      touched_.push_back(col);
    }
    return BlockMap<D>(&out.values[static_cast<std::size_t>(slot_[col]) * D * D]);
  }
  void end_row(DoubleBlocks& out) {
    for (int c : touched_) slot_[c] = -1;
    touched_.clear();
    out.row_start.push_back(out.num_blocks());
  }

 private:
  std::vector<int> slot_, touched_;
};

// Room for the blocks that `count` input blocks from `first` on can make (count_of(p)
// each, an upper bound): growing a big vector block by block copies it again and again.
template <int D, class CountOf>
void reserve_blocks(DoubleBlocks& out, int count, const CountOf& count_of, int first) {
  std::size_t bound = 0;
  for (int p = first; p < first + count; ++p) bound += count_of(p);
  out.col.reserve(bound);
  out.values.reserve(bound * D * D);
}

// The room reserve_blocks left over in a matrix that is kept: its bound counts every block
// product, up to tens of times the blocks a Galerkin product keeps.
void release_spare_room(DoubleBlocks& out) {
  out.col.shrink_to_fit();
  out.values.shrink_to_fit();
}

// The row chunks of a loop over `num_rows` rows: by the rows alone (parallel_for.hpp).
int row_chunks(bool parallel, int num_rows) {
  return parallel ? chunk_count(num_rows, SmoothedAggregation::kRowGrain) : 1;
}

// Rows [0, num_rows) of a block matrix from build(first, last, out, products), which
// appends rows [first, last) to `out` and counts its block products: in chunks at once
// when `parallel`, then joined in order. Each row is built alone, so the blocks are the
// same either way.
template <class BuildRows>
DoubleBlocks rows_by_chunks(int num_rows, bool parallel, double& products, const BuildRows& build) {
  const int chunks = row_chunks(parallel, num_rows);
  if (chunks == 1) {
    DoubleBlocks out;
    build(0, num_rows, out, products);
    return out;
  }
  std::vector<DoubleBlocks> part(chunks);
  std::vector<double> counted(chunks, 0.0);
  WorkerPool::shared().run(chunks, [&](int c) {
    DoubleBlocks mine;  // not part[c] itself: neighbouring chunks' vector ends would share a cache line
    double count = 0;
    build(static_cast<int>(chunk_begin(num_rows, chunks, c)), static_cast<int>(chunk_begin(num_rows, chunks, c + 1)),
          mine, count);
    part[c] = std::move(mine);
    counted[c] = count;
  });
  DoubleBlocks& out = part[0];
  for (int c = 1; c < chunks; ++c) {
    const int offset = out.num_blocks();
    out.col.insert(out.col.end(), part[c].col.begin(), part[c].col.end());
    out.values.insert(out.values.end(), part[c].values.begin(), part[c].values.end());
    for (std::size_t r = 1; r < part[c].row_start.size(); ++r) out.row_start.push_back(part[c].row_start[r] + offset);
  }
  for (double count : counted) products += count;
  return std::move(out);
}

// Calls rows(first, last) for [0, num_rows) in chunks at once when `parallel`.
template <class Rows>
void in_row_chunks(int num_rows, bool parallel, const Rows& rows) {
  for_chunks(num_rows, row_chunks(parallel, num_rows),
             [&](long first, long last) { rows(static_cast<int>(first), static_cast<int>(last)); });
}

// target += X's block times Y's block, where a matrix marked scalar holds one value per
// block, standing for that value times I (the prolongators: see coarsen).
template <int D, bool x_scalar, bool y_scalar>
void add_block_product(double* target, const double* x, const double* y) {
  static_assert(!(x_scalar && y_scalar), "the product of two scalar matrices is not made");
  BlockMap<D> t(target);
  if constexpr (x_scalar)
    t.noalias() += *x * ConstBlockMap<D>(y);
  else if constexpr (y_scalar)
    t.noalias() += *y * ConstBlockMap<D>(x);
  else
    t.noalias() += ConstBlockMap<D>(x) * ConstBlockMap<D>(y);
}

// The work of X's block p times Y's row j, in D x D block multiply-adds: a product with a
// scalar is one block's worth, of two blocks D of them.
template <int D, bool x_scalar, bool y_scalar>
double product_count(const DoubleBlocks& Y, int j) {
  return (x_scalar || y_scalar ? 1.0 : D) * (Y.row_start[j + 1] - Y.row_start[j]);
}

// X Y, with Y's columns numbered below `cols`; adds its work to `products` (block
// multiply-adds, see product_count).
template <int D, bool x_scalar = false, bool y_scalar = false>
DoubleBlocks multiply(const DoubleBlocks& X, const DoubleBlocks& Y, int cols, double& products, bool parallel) {
  constexpr int x_size = x_scalar ? 1 : D * D, y_size = y_scalar ? 1 : D * D;
  return rows_by_chunks(X.rows(), parallel, products, [&](int first, int last, DoubleBlocks& out, double& count) {
    RowAccumulator<D> acc(cols);
    reserve_blocks<D>(out, X.row_start[last] - X.row_start[first], [&](int p) {
      return Y.row_start[X.col[p] + 1] - Y.row_start[X.col[p]];
    }, X.row_start[first]);
    for (int k = first; k < last; ++k) {
      for (int p = X.row_start[k]; p < X.row_start[k + 1]; ++p) {
        const int j = X.col[p];
        const double* x = &X.values[static_cast<std::size_t>(p) * x_size];
        for (int q = Y.row_start[j]; q < Y.row_start[j + 1]; ++q)
          add_block_product<D, x_scalar, y_scalar>(acc.at(out, Y.col[q]).data(), x,
                                                    &Y.values[static_cast<std::size_t>(q) * y_size]);
        count += product_count<D, x_scalar, y_scalar>(Y, j);
      }
      acc.end_row(out);
    }
  });
}

// The values of X Y into `out`, which has the pattern multiply() made for X's and Y's
// patterns: no pattern made, nothing allocated but a marker per column. Adds its work to
// `products`.
template <int D, bool x_scalar, bool y_scalar>
void multiply_values(const DoubleBlocks& X, const DoubleBlocks& Y, int cols, DoubleBlocks& out, double& products,
                     bool parallel) {
  constexpr int DD = D * D, x_size = x_scalar ? 1 : DD, y_size = y_scalar ? 1 : DD;
  auto rows = [&](int first, int last) {
    std::vector<int> slot(cols);  // out's block in the current row for each column
    double count = 0;
    for (int k = first; k < last; ++k) {
      for (int p = out.row_start[k]; p < out.row_start[k + 1]; ++p) slot[out.col[p]] = p;
      std::fill(out.values.begin() + static_cast<std::ptrdiff_t>(out.row_start[k]) * DD,
                out.values.begin() + static_cast<std::ptrdiff_t>(out.row_start[k + 1]) * DD, 0.0);
      for (int p = X.row_start[k]; p < X.row_start[k + 1]; ++p) {
        const int j = X.col[p];
        const double* x = &X.values[static_cast<std::size_t>(p) * x_size];
        for (int q = Y.row_start[j]; q < Y.row_start[j + 1]; ++q)
          add_block_product<D, x_scalar, y_scalar>(&out.values[static_cast<std::size_t>(slot[Y.col[q]]) * DD], x,
                                                    &Y.values[static_cast<std::size_t>(q) * y_size]);
        count += product_count<D, x_scalar, y_scalar>(Y, j);
      }
    }
    return count;
  };
  const int n = X.rows();
  products += sum_over_chunks<double>(n, row_chunks(parallel, n), [&](long first, long last) {
    return rows(static_cast<int>(first), static_cast<int>(last));
  });
}

// X^T for a scalar matrix (see multiply).
DoubleBlocks transpose_scalar(const DoubleBlocks& X, int cols) {
  DoubleBlocks out;
  out.row_start.assign(cols + 1, 0);
  for (int c : X.col) ++out.row_start[c + 1];
  for (int c = 0; c < cols; ++c) out.row_start[c + 1] += out.row_start[c];
  std::vector<int> next(out.row_start.begin(), out.row_start.end() - 1);
  out.col.resize(X.col.size());
  out.values.resize(X.values.size());
  for (int k = 0; k < X.rows(); ++k)
    for (int p = X.row_start[k]; p < X.row_start[k + 1]; ++p) {
      const int q = next[X.col[p]]++;
      out.col[q] = k;
      out.values[q] = X.values[p];
    }
  return out;
}

// The pattern of A's strictly lower blocks, for the smoother: lower's rows and columns,
// and the block of A each comes from (source). The rows are cut into blocks of rows at
// block_start (empty: one block); in each row the blocks whose column lies in an earlier
// block of rows come first, and first_inner[k] is where the rest start; cross_rows lists
// the rows that have such blocks.
void smoother_pattern(const DoubleBlocks& A, int DD, const std::vector<int>& block_start, FloatBlocks& lower,
                      std::vector<int>& source, std::vector<int>& first_inner, std::vector<int>& cross_rows) {
  lower = FloatBlocks();
  source.clear();
  cross_rows.clear();
  std::vector<int> inner(A.rows(), 0);  // into first_inner last: its size marks a pattern made
  auto append = [&](int p) {
    lower.col.push_back(A.col[p]);
    source.push_back(p);
  };
  std::size_t block = 0;
  for (int k = 0; k < A.rows(); ++k) {
    while (block + 1 < block_start.size() && k >= block_start[block + 1]) ++block;
    const int own = block_start.empty() ? 0 : block_start[block];  // the first row of k's block
    const int p0 = A.row_start[k], p1 = A.row_start[k + 1];
    for (int p = p0; p < p1; ++p)
      if (A.col[p] < own) append(p);
    inner[k] = lower.num_blocks();
    if (inner[k] > lower.row_start[k]) cross_rows.push_back(k);
    for (int p = p0; p < p1; ++p)
      if (A.col[p] < k && A.col[p] >= own) append(p);
    lower.row_start.push_back(lower.num_blocks());
  }
  lower.values.resize(source.size() * DD);
  first_inner = std::move(inner);
}

int find_block(const DoubleBlocks& X, int row, int col) {
  for (int p = X.row_start[row]; p < X.row_start[row + 1]; ++p)
    if (X.col[p] == col) return p;
  return -1;
}

// Standard aggregation on the graph of strong couplings: (1) every node whose strong
// neighbours are all free roots an aggregate of itself and them; (2) the remaining nodes
// join a neighbouring aggregate of step 1; (3) what is left forms aggregates with its free
// neighbours. Nodes without strong neighbours stay out: the smoother solves them exactly.
std::vector<int> aggregate(const DoubleBlocks& A, int DD, int& num_aggregates) {
  const int nn = A.rows();
  auto norm2 = [&](int p) {
    double s = 0;
    for (int e = 0; e < DD; ++e) s += A.values[static_cast<std::size_t>(p) * DD + e] * A.values[static_cast<std::size_t>(p) * DD + e];
    return s;
  };
  std::vector<double> diag(nn, 0.0);
  for (int k = 0; k < nn; ++k)
    if (const int p = find_block(A, k, k); p >= 0) diag[k] = norm2(p);
  std::vector<int> start(1, 0), neighbours;
  for (int k = 0; k < nn; ++k) {
    const std::size_t first = neighbours.size();
    for (int p = A.row_start[k]; p < A.row_start[k + 1]; ++p) {
      const int j = A.col[p];
      if (j != k && norm2(p) > kStrength * kStrength * std::sqrt(diag[k] * diag[j])) neighbours.push_back(j);
    }
    std::sort(neighbours.begin() + first, neighbours.end());
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

// y = Dinv A x by blocks, the rows in chunks at once when `parallel`.
template <int D>
void jacobi_product(const DoubleBlocks& A, const std::vector<double>& block_inv, const VectorXd& x, VectorXd& y,
                    bool parallel) {
  using Vec = Eigen::Matrix<double, D, 1>;
  y.resize(x.size());
  auto rows = [&](int first, int last) {
    for (int k = first; k < last; ++k) {
      Vec s = Vec::Zero();
      for (int p = A.row_start[k]; p < A.row_start[k + 1]; ++p)
        s.noalias() += ConstBlockMap<D>(&A.values[static_cast<std::size_t>(p) * D * D]) * x.template segment<D>(D * A.col[p]);
      y.template segment<D>(D * k).noalias() = ConstBlockMap<D>(&block_inv[static_cast<std::size_t>(k) * D * D]) * s;
    }
  };
  in_row_chunks(A.rows(), parallel, rows);
}

// Block Gauss-Seidel on the strictly lower blocks L of a symmetric matrix
// A = L + diag + L^T, over rows [first, last) (in reverse order when backward), each row k
// reading its blocks from first_block[k] on. Row k of a sweep gathers A_kj x_j over its
// lower blocks and scatters A_kj^T x_k (= A_jk x_k) into `pending` for the rows j < k, so
// each block is read once per sweep (half of A).
//
// Forward from x = 0: x_k = D_k^-1 (b_k - sum_{j<k} A_kj x_j), and since the upper part
// met zeros, the residual b - A x is exactly -sum_{j>k} A_kj x_j: what was scattered.
// Backward: row k's upper part acts on the rows j > k already updated (scattered into
// `pending`), its lower part on the x_j not yet updated (gathered).
template <int D>
void lower_block_sweep(const FloatBlocks& lower, const int* first_block, const std::vector<double>& block_inv,
                       const VectorXd& b, VectorXd& x, VectorXd& pending, bool forward, int first, int last) {
  const int* col = lower.col.data();
  for (int step = first; step < last; ++step) {
    const int k = forward ? step : first + last - 1 - step;
    const int p0 = first_block[k], p1 = lower.row_start[k + 1];
    const float* row = &lower.values[static_cast<std::size_t>(p0) * D * D];
    double s[D];
    for (int i = 0; i < D; ++i) s[i] = b[D * k + i] - (forward ? 0.0 : pending[D * k + i]);
    const float* B = row;
    for (int p = p0; p < p1; ++p, B += D * D) {
      const double* xj = x.data() + D * col[p];
      for (int i = 0; i < D; ++i) {
        double t = 0;  // one subtraction per block row keeps the dependency chains short
        for (int c = 0; c < D; ++c) t += B[D * i + c] * xj[c];
        s[i] -= t;
      }
    }
    const double* Ik = &block_inv[static_cast<std::size_t>(k) * D * D];
    double* xk = x.data() + D * k;
    for (int i = 0; i < D; ++i) {
      double acc = 0;
      for (int c = 0; c < D; ++c) acc += Ik[D * i + c] * s[c];
      xk[i] = acc;
    }
    const double sign = forward ? -1.0 : 1.0;  // forward: residual; backward: A_jk x_k
    B = row;
    for (int p = p0; p < p1; ++p, B += D * D) {
      double* pj = pending.data() + D * col[p];
      for (int c = 0; c < D; ++c) {
        double t = 0;
        for (int i = 0; i < D; ++i) t += B[D * i + c] * xk[i];
        pj[c] += sign * t;
      }
    }
  }
}

// The lower blocks between the blocks of rows of a split smoother (columns in an earlier
// block than the row, stored first in their rows): pending_k += sign A_kj x_j and
// pending_j += sign A_kj^T x_k. Only the rows that have such blocks are visited (on a
// sheet, a grid line or two of each block's rows).
template <int D>
void add_cross_blocks(const FloatBlocks& lower, const std::vector<int>& first_inner, const std::vector<int>& cross_rows,
                      const VectorXd& x, VectorXd& pending, double sign) {
  for (int k : cross_rows)
    for (int p = lower.row_start[k]; p < first_inner[k]; ++p) {
      const float* B = &lower.values[static_cast<std::size_t>(p) * D * D];
      const int j = lower.col[p];
      for (int i = 0; i < D; ++i)
        for (int c = 0; c < D; ++c) {
          pending[D * k + i] += sign * B[D * i + c] * x[D * j + c];
          pending[D * j + c] += sign * B[D * i + c] * x[D * k + i];
        }
    }
}

// out_k += sum_j X_kj in_j over the rows [first, last) of a scalar matrix X (see
// multiply): the prolongation (X = P, fine rows) and the restriction (X = P^T, coarse rows).
template <int D>
void scalar_product(const DoubleBlocks& X, const double* in, double* out, int first, int last) {
  for (int k = first; k < last; ++k) {
    double s[D] = {};
    for (int p = X.row_start[k]; p < X.row_start[k + 1]; ++p) {
      const double* xj = in + D * X.col[p];
      for (int i = 0; i < D; ++i) s[i] += X.values[p] * xj[i];
    }
    for (int i = 0; i < D; ++i) out[D * k + i] += s[i];
  }
}

// With `skew`, each block k plus skew's block k (D x D row-major per node) is inverted.
template <int D>
bool invert_blocks(const DoubleBlocks& A, std::vector<double>& inv, int first, int last, const double* skew) {
  for (int k = first; k < last; ++k) {
    const int p = find_block(A, k, k);
    if (p < 0) return false;
    Block<D> diagonal = ConstBlockMap<D>(&A.values[static_cast<std::size_t>(p) * D * D]);
    if (skew) diagonal += ConstBlockMap<D>(skew + static_cast<std::size_t>(k) * D * D);
    const Block<D> out = diagonal.inverse();
    if (!out.allFinite()) return false;
    BlockMap<D> target(inv.data() + static_cast<std::size_t>(k) * D * D);
    target = out;
  }
  return true;
}

}  // namespace

std::vector<std::pair<long, long>> SmoothedAggregation::level_sizes() const {
  std::vector<std::pair<long, long>> out;
  for (const Level& l : levels_)
    out.emplace_back(static_cast<long>(l.num_nodes()) * dim_, static_cast<long>(l.A.num_blocks()) * dim_ * dim_);
  return out;
}

bool SmoothedAggregation::prepare_smoother(Level& level) const {
  const int nn = level.num_nodes(), DD = dim_ * dim_;
  if (static_cast<int>(level.first_inner.size()) != nn) {  // a new level: its pattern first
    level.block_start = smoother_blocks(nn, parallel);
    smoother_pattern(level.A, DD, level.block_start, level.lower, level.lower_source, level.first_inner,
                     level.cross_rows);
    level.block_inv.resize(static_cast<std::size_t>(nn) * DD);
  }
  std::atomic<bool> ok{true};
  in_row_chunks(nn, parallel, [&](int first, int last) {
    for (int q = level.lower.row_start[first]; q < level.lower.row_start[last]; ++q)
      for (int e = 0; e < DD; ++e)
        level.lower.values[static_cast<std::size_t>(q) * DD + e] =
            static_cast<float>(level.A.values[static_cast<std::size_t>(level.lower_source[q]) * DD + e]);
    const double* skew = &level == &levels_[0] && !finest_skew_.empty() ? finest_skew_.data() : nullptr;
    const bool inverted = dim_ == 3 ? invert_blocks<3>(level.A, level.block_inv, first, last, skew)
                                    : invert_blocks<2>(level.A, level.block_inv, first, last, skew);
    if (!inverted) ok = false;
  });
  return ok;
}

bool SmoothedAggregation::same_topology(const ElementMatrix& elements) const {
  const int np = elements.num_pairs();
  if (levels_.empty() || elements.dim() != dim_ || levels_[0].num_nodes() != elements.num_masses() ||
      static_cast<int>(pair_nodes_.size()) != np)
    return false;
  for (int p = 0; p < np; ++p)
    if (pair_nodes_[p] != elements.pair_nodes(p)) return false;
  return stencil_nodes_ == elements.stencil_vertices();
}

void SmoothedAggregation::finest_pattern(const ElementMatrix& elements) {
  const int nn = elements.num_masses(), np = elements.num_pairs();
  levels_.assign(1, Level());
  std::vector<std::vector<int>> neighbours(nn);
  for (int k = 0; k < nn; ++k) neighbours[k].push_back(k);
  for (int p = 0; p < np; ++p)
    if (const auto [a, b] = elements.pair_nodes(p); a >= 0 && b >= 0 && a != b && !left_out(p))
      neighbours[a].push_back(b), neighbours[b].push_back(a);
  DoubleBlocks& A = levels_[0].A;
  for (auto& row : neighbours) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    A.col.insert(A.col.end(), row.begin(), row.end());
    A.row_start.push_back(A.num_blocks());
  }
  A.values.assign(static_cast<std::size_t>(A.num_blocks()) * dim_ * dim_, 0.0);
  diagonal_.resize(nn);
  for (int k = 0; k < nn; ++k) diagonal_[k] = find_block(A, k, k);
  pair_blocks_.assign(np, {-1, -1});
  for (int p = 0; p < np; ++p)
    if (const auto [a, b] = elements.pair_nodes(p); a >= 0 && b >= 0 && a != b && !left_out(p))
      pair_blocks_[p] = {find_block(A, a, b), find_block(A, b, a)};
  pair_nodes_.resize(np);
  for (int p = 0; p < np; ++p) pair_nodes_[p] = elements.pair_nodes(p);
  stencil_nodes_ = elements.stencil_vertices();
  // Each node's pairs (a pair from a mass to itself adds nothing), in the pairs' order.
  node_pairs_start_.assign(nn + 1, 0);
  auto each_end = [&](const auto& visit) {
    for (int p = 0; p < np; ++p)
      if (const auto [a, b] = elements.pair_nodes(p); a != b) {
        if (a >= 0) visit(a, p);
        if (b >= 0) visit(b, p);
      }
  };
  each_end([&](int node, int) { ++node_pairs_start_[node + 1]; });
  for (int k = 0; k < nn; ++k) node_pairs_start_[k + 1] += node_pairs_start_[k];
  node_pairs_.resize(node_pairs_start_[nn]);
  std::vector<int> next(node_pairs_start_.begin(), node_pairs_start_.end() - 1);
  each_end([&](int node, int p) { node_pairs_[next[node]++] = p; });
}

// The matrix of level 0 is sym(J): each pair adds sym(W) to its ends' diagonal blocks and
// -sym(W) to the blocks between them; a pair from a mass to itself adds nothing, and the
// pairs left out add nothing at all (leaving out only the blocks between the ends would
// give translations energy, which the coarse levels are built to leave free). The
// masses' own blocks (contacts) also keep their antisymmetric part apart, for the smoother
// (finest_skew_).
void SmoothedAggregation::fill_finest(const ElementMatrix& elements) {
  const bool stencils = elements.num_stencils() > 0;
  if (elements.block_nodes().empty())
    finest_skew_.clear();
  else
    finest_skew_.resize(static_cast<std::size_t>(elements.num_masses()) * dim_ * dim_);
  if (stencils) elements.stencil_incidence();  // made before the chunks read it
  index_finest_rows(elements);
  // Each chunk of rows adds what lands in its own blocks.
  in_row_chunks(levels_[0].A.rows(), parallel, [&](int first, int last) {
    if (dim_ == 3) {
      fill_finest_rows<3>(elements, first, last);
      if (stencils) add_stencils<3>(elements, first, last);
    } else {
      fill_finest_rows<2>(elements, first, last);
      if (stencils) add_stencils<2>(elements, first, last);
    }
  });
}

void SmoothedAggregation::index_finest_rows(const ElementMatrix& elements) {
  // A mass has at most one block (ElementMatrix::set_node_block), so their order is free.
  finest_block_nodes_ = elements.block_nodes();
  if (!std::is_sorted(finest_block_nodes_.begin(), finest_block_nodes_.end()))
    std::sort(finest_block_nodes_.begin(), finest_block_nodes_.end());
  const std::vector<ElementMatrix::Coupling>& couplings = elements.couplings();
  coupling_start_.assign(couplings.empty() ? 0 : elements.num_masses() + 1, 0);
  coupling_entries_.resize(4 * couplings.size());
  if (couplings.empty()) return;
  for (const ElementMatrix::Coupling& coupling : couplings)
    for (int node : coupling.node)
      if (node >= 0) ++coupling_start_[node + 1];
  for (int i = 0; i < elements.num_masses(); ++i) coupling_start_[i + 1] += coupling_start_[i];
  std::vector<int> next(coupling_start_.begin(), coupling_start_.end() - 1);
  for (std::size_t k = 0; k < couplings.size(); ++k)
    for (int j = 0; j < 4; ++j)
      if (couplings[k].node[j] >= 0) coupling_entries_[next[couplings[k].node[j]]++] = static_cast<int>(4 * k) + j;
}

// Rows first ... last - 1 of level 0 (D fixed, so that the block loops unroll).
template <int D>
void SmoothedAggregation::fill_finest_rows(const ElementMatrix& elements, int first, int last) {
  constexpr int DD = D * D;
  DoubleBlocks& A = levels_[0].A;
  auto block = [&](int b) { return &A.values[static_cast<std::size_t>(b) * DD]; };
  // out += sym(B), and with minus_out (the off-diagonal block of a pair) minus_out -= it.
  auto add_sym = [](const double* B, double* out, double* minus_out) {
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c) {
        const double s = 0.5 * (B[D * r + c] + B[D * c + r]);
        out[D * r + c] += s;
        if (minus_out) minus_out[D * r + c] -= s;
      }
  };
  std::fill(A.values.begin() + static_cast<std::ptrdiff_t>(A.row_start[first]) * DD,
            A.values.begin() + static_cast<std::ptrdiff_t>(A.row_start[last]) * DD, 0.0);
  for (int i = first; i < last; ++i)
    for (int r = 0; r < D; ++r) block(diagonal_[i])[r * D + r] = elements.mass_value(i);
  const auto own_first = std::lower_bound(finest_block_nodes_.begin(), finest_block_nodes_.end(), first);
  const auto own_last = std::lower_bound(own_first, finest_block_nodes_.end(), last);
  for (auto i = own_first; i != own_last; ++i) add_sym(elements.node_block(*i), block(diagonal_[*i]), nullptr);
  if (!finest_skew_.empty()) {  // sized by fill_finest, before the chunks
    std::fill(finest_skew_.begin() + static_cast<std::ptrdiff_t>(first) * DD,
              finest_skew_.begin() + static_cast<std::ptrdiff_t>(last) * DD, 0.0);
    for (auto i = own_first; i != own_last; ++i) {
      const double* B = elements.node_block(*i);
      double* skew = &finest_skew_[static_cast<std::size_t>(*i) * DD];
      for (int r = 0; r < D; ++r)
        for (int c = 0; c < D; ++c) skew[D * r + c] = 0.5 * (B[D * r + c] - B[D * c + r]);
    }
  }
  if (!coupling_start_.empty())  // the couplings' diagonal blocks only
    for (int i = first; i < last; ++i)
      for (int q = coupling_start_[i]; q < coupling_start_[i + 1]; ++q) {
        const int entry = coupling_entries_[q];
        double B[DD] = {};
        elements.add_coupling_diagonal(elements.couplings()[entry / 4], entry % 4, B);
        add_sym(B, block(diagonal_[i]), nullptr);
      }
  // Each row's pairs in the pairs' order (node_pairs_): the sums are those of one pass
  // over the pairs, and a chunk reads only its own rows' pairs.
  for (int i = first; i < last; ++i) {
    double* diagonal = block(diagonal_[i]);
    for (int q = node_pairs_start_[i]; q < node_pairs_start_[i + 1]; ++q) {
      const int p = node_pairs_[q];
      if (left_out(p)) continue;
      const int off = pair_blocks_[p][0] < 0 ? -1 : pair_blocks_[p][elements.pair_nodes(p)[0] == i ? 0 : 1];
      add_sym(elements.pair_block(p), diagonal, off < 0 ? nullptr : block(off));
    }
  }
}

// Rows first ... last - 1 of level 0: each diagonal block += sym of the stencils' diagonal
// blocks there. Only the diagonal blocks (test_core_stencils.py,
// test_the_multigrid_finest_level_holds_the_stencils_diagonal_blocks): a stencil's blocks
// between its vertices couple vertices two edges apart (a hinge's wing tips), and that
// fill made every V-cycle and setup on a hinged sheet several times as costly, for more
// Krylov iterations, not fewer (docs/performance.md, "Angular bending"). GMRES's products
// keep every block, so Newton's answers stay those of the direct solver
// (test_core_hinges.py, test_the_hinges_newton_blocks_reach_the_preconditioners).
template <int D>
void SmoothedAggregation::add_stencils(const ElementMatrix& elements, int first, int last) {
  constexpr int DD = D * D;
  DoubleBlocks& A = levels_[0].A;
  for (int a = first; a < last; ++a) {
    double B[DD] = {};
    elements.add_stencil_diagonal<D>(a, B);
    double* out = &A.values[static_cast<std::size_t>(diagonal_[a]) * DD];
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c) out[D * r + c] += 0.5 * (B[D * r + c] + B[D * c + r]);
  }
}

// One coarser level: 1 if built, 0 if the level does not coarsen (it is then the coarsest),
// -1 if a diagonal block is singular. With keep, the level's aggregates and prolongator
// stay and only the coarse matrix is multiplied anew.
template <int D>
int SmoothedAggregation::coarsen(int l, Level& next, bool keep) {
  Level& level = levels_[l];
  constexpr int DD = D * D;
  const DoubleBlocks& A = level.A;
  const int nn = level.num_nodes();
  if (!keep) level.aggregate = aggregate(A, DD, level.num_aggregates);
  const int num_agg = level.num_aggregates;
  if (num_agg == 0 || num_agg > 0.8 * nn) return 0;
  if (!prepare_smoother(level)) return -1;
  double products = 0;
  if (keep && level.P.rows() == nn && level.AP.rows() == nn) {  // the patterns stay: values only
    multiply_values<D, false, true>(A, level.P, num_agg, level.AP, products, parallel);
    multiply_values<D, true, false>(level.R, level.AP, num_agg, next.A, products, parallel);
  } else {
    if (!keep || level.P.rows() != nn) products += smooth_prolongator<D>(l, next);
    level.AP = multiply<D, false, true>(A, level.P, num_agg, products, parallel);
    release_spare_room(level.AP);
    next.A = multiply<D, true, false>(level.R, level.AP, num_agg, products, parallel);
    release_spare_room(next.A);
  }
  setup_flops_ += kProductFlopCost * products * DD;
  cycle_flops_ += (3.0 * A.num_blocks() + 2.0 * nn) * DD + (level.P.num_blocks() + level.R.num_blocks()) * D;
  return 1;
}

// Level l's prolongator P = (I - omega Dtilde^-1 Atilde) T and its transpose R, from its
// aggregates; sets the next level's near-null space. Returns its work in block products.
//
// T (tentative): each aggregate's translations, normalized; the coarse node's near-null
// space is the norm it had. Atilde is A with each block replaced by its isotropic part
// trace/D times I, so P is a scalar matrix: a spring that turns leaves it as it was, and a
// setup can keep it and multiply only the coarse matrices anew. The full blocks' P (the
// textbook one) goes stale as a sheet folds, and cannot be kept (docs/performance.md, "A
// prolongator that does not turn"). omega = 4 / (3 rho(D^-1 A)) with the full blocks'
// D^-1 A: with Atilde's own spectral radius the V-cycles were weaker.
template <int D>
double SmoothedAggregation::smooth_prolongator(int l, Level& next) {
  Level& level = levels_[l];
  constexpr int DD = D * D;
  const DoubleBlocks& A = level.A;
  const std::vector<int>& agg = level.aggregate;
  const int nn = level.num_nodes(), num_agg = level.num_aggregates;
  std::vector<double> norm(num_agg, 0.0), t(nn, 0.0);
  for (int k = 0; k < nn; ++k)
    if (agg[k] >= 0) norm[agg[k]] += level.weight[k] * level.weight[k];
  for (double& w : norm) w = std::sqrt(w);
  for (int k = 0; k < nn; ++k)
    if (agg[k] >= 0) t[k] = level.weight[k] / norm[agg[k]];
  next.weight = norm;
  // rho from a deterministic power iteration
  if (static_cast<int>(top_modes_.size()) <= l) top_modes_.resize(l + 1);
  VectorXd& x = top_modes_[l];
  const bool warm = x.size() == static_cast<Eigen::Index>(nn) * D;
  if (!warm) x = VectorXd::LinSpaced(static_cast<Eigen::Index>(nn) * D, 1.0, 2.0);
  VectorXd y;
  double rho = 1.0;
  const int power_iterations = warm ? kWarmPowerIterations : kPowerIterations;
  for (int it = 0; it < power_iterations; ++it) {
    jacobi_product<D>(A, level.block_inv, x, y, parallel);
    const double size = y.norm();
    if (!(size > 0 && std::isfinite(size))) {  // a start with no component to grow
      rho = 1.0;
      x.resize(0);  // the next setup starts cold
      break;
    }
    rho = size / x.norm();
    x = y / size;
  }
  const double omega = 4.0 / (3.0 * rho);
  // Row k's entry for aggregate a: t_k [agg k = a] - omega / d_k sum_{j in a} a_kj t_j,
  // with a_kj = trace(A_kj) / D and d_k = a_kk.
  double products = 2.0 * power_iterations * A.num_blocks();
  level.P = rows_by_chunks(nn, parallel, products, [&](int first, int last, DoubleBlocks& out, double& count) {
    RowAccumulator<1> acc(num_agg);
    reserve_blocks<1>(out, A.row_start[last] - A.row_start[first], [](int) { return 1; }, A.row_start[first]);
    auto isotropic = [&](int p) { return ConstBlockMap<D>(&A.values[static_cast<std::size_t>(p) * DD]).trace() / D; };
    for (int k = first; k < last; ++k) {
      const int row_first = out.num_blocks();
      double diagonal = 0;
      for (int p = A.row_start[k]; p < A.row_start[k + 1]; ++p) {
        const double a_kj = isotropic(p);
        if (A.col[p] == k) diagonal = a_kj;
        if (const int a = agg[A.col[p]]; a >= 0) acc.at(out, a)(0, 0) += t[A.col[p]] * a_kj;
      }
      for (int q = row_first; q < out.num_blocks(); ++q) {
        out.values[q] *= -omega / diagonal;
        if (out.col[q] == agg[k]) out.values[q] += t[k];
      }
      count += A.row_start[k + 1] - A.row_start[k];
      acc.end_row(out);
    }
  });
  release_spare_room(level.P);
  level.R = transpose_scalar(level.P, num_agg);
  return products;
}

bool SmoothedAggregation::compute(const ElementMatrix& elements) { return build_levels(elements, false); }

bool SmoothedAggregation::refresh(const ElementMatrix& elements) {
  return build_levels(elements, can_refresh(elements));
}

bool SmoothedAggregation::build_levels(const ElementMatrix& elements, bool keep_aggregates) {
  if (elements.num_rods() > 0 || (elements.dim() != 2 && elements.dim() != 3)) return false;
  if (!same_topology(elements)) {
    dim_ = elements.dim();
    finest_pattern(elements);
  }
  const int kept_levels = keep_aggregates ? num_levels() : 1;
  levels_.resize(kept_levels);
  cycle_flops_ = setup_flops_ = 0;
  fill_finest(elements);
  levels_[0].weight.assign(levels_[0].num_nodes(), 1.0);
  // Kept aggregates: the levels are rebuilt in place (their patterns stay the same).
  for (int l = 0; l + 1 < kept_levels; ++l) {
    const int built = dim_ == 3 ? coarsen<3>(l, levels_[l + 1], true) : coarsen<2>(l, levels_[l + 1], true);
    if (built <= 0) return false;
  }
  while (!keep_aggregates && static_cast<int>(levels_.size()) < kMaxLevels &&
         levels_.back().num_nodes() * dim_ > kCoarsestUnknowns) {
    Level next;
    const int l = num_levels() - 1;
    const int built = dim_ == 3 ? coarsen<3>(l, next, false) : coarsen<2>(l, next, false);
    if (built < 0) return false;
    if (built == 0) break;
    levels_.push_back(std::move(next));
  }
  return factor_coarsest(keep_aggregates);
}

bool SmoothedAggregation::factor_coarsest(bool same_pattern) {
  const DoubleBlocks& C = levels_.back().A;
  const Eigen::Index n = static_cast<Eigen::Index>(C.rows()) * dim_;
  auto for_entries = [&](const auto& take) {
    for (int k = 0; k < C.rows(); ++k)
      for (int p = C.row_start[k]; p < C.row_start[k + 1]; ++p)
        for (int r = 0; r < dim_; ++r)
          for (int c = 0; c < dim_; ++c)
            take(dim_ * k + r, dim_ * C.col[p] + c, C.values[static_cast<std::size_t>(p) * dim_ * dim_ + dim_ * r + c]);
  };
  dense_coarsest_ = n <= kCoarsestUnknowns;
  // The sparse factor's pattern also on the dense path: its fill is the coarsest level's
  // cost in the hierarchy's refresh policy (setup_cost_in_cycles), which was measured with
  // it; the dense factor's own n^2 / 2 there took a 13^2 sheet landing on a floor from
  // 206-247 to 261-316 Newton iterations over seven tolerances within 3e-4
  // (test_masses_landing_start_newton_at_the_ramp).
  if (!same_pattern || !dense_coarsest_) {
    std::vector<Eigen::Triplet<double>> entries;
    for_entries([&](Eigen::Index r, Eigen::Index c, double v) { entries.emplace_back(r, c, v); });
    SpMat coarsest(n, n);
    coarsest.setFromTriplets(entries.begin(), entries.end());
    if (!same_pattern) sparse_coarse_.analyzePattern(coarsest);  // kept aggregates: the same pattern
    if (!dense_coarsest_) {
      sparse_coarse_.factorize(coarsest);
      if (sparse_coarse_.info() != Eigen::Success) return false;
    }
    coarsest_fill_ = static_cast<double>(sparse_coarse_.matrixL().nestedExpression().nonZeros());
  }
  if (dense_coarsest_) {
    Eigen::MatrixXd coarsest = Eigen::MatrixXd::Zero(n, n);
    for_entries([&](Eigen::Index r, Eigen::Index c, double v) { coarsest(r, c) += v; });
    dense_coarse_.compute(coarsest);
    if (dense_coarse_.info() != Eigen::Success) return false;
  }
  cycle_flops_ += 4 * coarsest_fill_;
  setup_flops_ += 10 * coarsest_fill_;  // rough: the coarsest matrix is small
  return true;
}

template <int D>
void SmoothedAggregation::smooth(const Level& level, const VectorXd& b, VectorXd& x, VectorXd& pending,
                                 bool forward) const {
  const int nn = level.num_nodes();
  const int blocks = static_cast<int>(level.block_start.size()) - 1;
  if (blocks <= 1) {
    if (forward) pending.setZero();
    lower_block_sweep<D>(level.lower, level.lower.row_start.data(), level.block_inv, b, x, pending, forward, 0, nn);
    return;
  }
  // Each block of rows sweeps its own rows; across blocks each sees the others' x from
  // before the sweep: 0 in the forward sweep (the residual is completed after it), the
  // coarse correction in the backward one (added to `pending` before it). So the blocks
  // may run in any order, at once or not: the same numbers.
  if (!forward) add_cross_blocks<D>(level.lower, level.first_inner, level.cross_rows, x, pending, 1.0);
  auto sweep = [&](int block) {
    const int first = level.block_start[block], last = level.block_start[block + 1];
    // Forward, each block's own rows of `pending` start at zero; the sweep scatters within
    // its block only (the cross blocks come after).
    if (forward) pending.segment(static_cast<Eigen::Index>(D) * first, static_cast<Eigen::Index>(D) * (last - first)).setZero();
    lower_block_sweep<D>(level.lower, level.first_inner.data(), level.block_inv, b, x, pending, forward, first, last);
  };
  if (parallel) {
    WorkerPool::shared().run(blocks, sweep);
  } else {
    for (int block = 0; block < blocks; ++block) sweep(block);
  }
  if (forward) add_cross_blocks<D>(level.lower, level.first_inner, level.cross_rows, x, pending, -1.0);
}

std::vector<int> SmoothedAggregation::smoother_blocks(int num_nodes, bool parallel) {
  if (!parallel || num_nodes < kSplitSmootherNodes) return {};
  const int blocks = std::max(2, chunk_count(num_nodes, kSmootherBlockNodes));
  std::vector<int> start(blocks + 1);
  for (int c = 0; c <= blocks; ++c) start[c] = static_cast<int>(chunk_begin(num_nodes, blocks, c));
  return start;
}

template <int D>
void SmoothedAggregation::cycle(int l, const VectorXd& b, VectorXd& x) const {
  if (l + 1 == num_levels()) {
    x = dense_coarsest_ ? VectorXd(dense_coarse_.solve(b)) : VectorXd(sparse_coarse_.solve(b));
    return;
  }
  const Level& level = levels_[l];
  VectorXd r(b.size());  // zeroed by the forward sweep, row half by row half
  x.resize(b.size());    // the forward sweep writes every row before it reads it
  smooth<D>(level, b, x, r, true);
  const int nc = levels_[l + 1].num_nodes();
  VectorXd coarse_r = VectorXd::Zero(static_cast<Eigen::Index>(nc) * D), coarse_x;
  in_row_chunks(nc, parallel, [&](int first, int last) { scalar_product<D>(level.R, r.data(), coarse_r.data(), first, last); });
  cycle<D>(l + 1, coarse_r, coarse_x);
  in_row_chunks(level.num_nodes(), parallel, [&](int first, int last) {
    scalar_product<D>(level.P, coarse_x.data(), x.data(), first, last);
    r.segment(static_cast<Eigen::Index>(D) * first, static_cast<Eigen::Index>(D) * (last - first)).setZero();
  });
  smooth<D>(level, b, x, r, false);
}

void SmoothedAggregation::apply(const VectorXd& b, VectorXd& x) const {
  if (dim_ == 3)
    cycle<3>(0, b, x);
  else
    cycle<2>(0, b, x);
}

bool SmoothedAggregation::refresh_smoother(const ElementMatrix& elements) {
  if (levels_.size() < 2) return true;  // a single level is solved directly: no smoother
  if (elements.num_rods() > 0 || !same_topology(elements)) return false;
  fill_finest(elements);
  return prepare_smoother(levels_[0]);
}

}  // namespace ms
