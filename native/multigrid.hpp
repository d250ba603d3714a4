// Smoothed-aggregation algebraic multigrid (Vanek, Mandel & Brezina 1996) as the
// preconditioner of the Newton matrix of big spring networks without rods.
//
// Why: an LDL^T factor of a 2D sheet fills in superlinearly (a 129x129 sheet: ~0.4 s per
// factorization, ~20 ms per solve, and stale factors need many Krylov iterations as the
// cloth swings). A V-cycle costs a few matrix-vector products, and with the rigid-body
// modes as near-null space its convergence rate does not depend on the mesh size, so a
// step costs O(unknowns).
//
// The hierarchy: nodes (a mass's D unknowns, later an aggregate's coarse unknowns) are
// grouped into aggregates of strongly coupled neighbours; the tentative prolongator maps
// each aggregate's coarse unknowns onto the rigid-body modes (translations and
// rotations) restricted to it, orthonormalized; one damped block-Jacobi step smooths it;
// the coarse matrix is the Galerkin product P^T A P. The smoother is block Gauss-Seidel
// (forward before, backward after the coarse correction), so the V-cycle is symmetric.
#pragma once

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>
#include <vector>

#include "element_matrix.hpp"

namespace ms {

class SmoothedAggregation {
 public:
  using SpMat = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;
  using RowMat = Eigen::SparseMatrix<double, Eigen::RowMajor, int>;

  // A: symmetric positive definite, `dim` unknowns per node in node order; coords: the
  // nodes' positions (dim per node) for the rotation modes. False if a diagonal block or
  // the coarsest matrix could not be factored.
  bool compute(const SpMat& A, const Eigen::VectorXd& coords, int dim);
  // One V-cycle for A x = b, starting from x = 0.
  void apply(const Eigen::VectorXd& b, Eigen::VectorXd& x) const;
  // The finest level's smoother from new values of A, given as the elements it was
  // assembled from (same topology as at compute(), no rods); the coarse levels stay. Why:
  // as cloth swings, the springs turn and the hierarchy goes stale, but nearly all of the
  // extra Krylov iterations that costs come from the finest smoother (129x129 corner
  // sheet, 24 steps: 453 iterations stale, 378 with this, 372 with a new hierarchy every
  // solve), and this costs one pass over the elements instead of a setup. False if a
  // diagonal block is singular.
  bool refresh_smoother(const ElementMatrix& elements);

  int num_levels() const { return static_cast<int>(levels_.size()); }
  // Unknowns and nonzeros of each level's matrix, finest first.
  std::vector<std::pair<long, long>> level_sizes() const {
    std::vector<std::pair<long, long>> out;
    for (const Level& l : levels_) out.emplace_back(l.A.rows(), l.A.nonZeros());
    return out;
  }
  // Work of one V-cycle and of compute(), in multiply-adds (deterministic cost model).
  double cycle_flops() const { return cycle_flops_; }
  double setup_flops() const { return setup_flops_; }

 private:
  struct Level {
    RowMat A;
    std::vector<int> block_start;    // node k owns unknowns [block_start[k], block_start[k+1])
    std::vector<double> block_inv;   // inverse of each diagonal block, row-major
    std::vector<int> block_inv_start;
    RowMat P;                        // prolongation from the next level
    // A again for the smoother, as its strictly lower node blocks with float values, row
    // by row: the two sweeps of a V-cycle stream A, and this layout moves about 2.2 bytes
    // per nonzero of A instead of 12 (a preconditioner needs no more than float accuracy;
    // the Krylov method multiplies by the exact matrix). Row k's blocks are the columns
    // node_col[node_row_start[k] ...], their values from node_blocks[node_value_start[k]].
    std::vector<int> node_row_start, node_col, node_value_start;
    std::vector<float> node_blocks;
    int num_nodes() const { return static_cast<int>(block_start.size()) - 1; }
  };
  void build_node_blocks(Level& level) const;
  // Block Gauss-Seidel sweep on level l: forward from x = 0, leaving the residual b - A x
  // in `pending`; backward from the given x (`pending` is workspace).
  void sweep(int l, const Eigen::VectorXd& b, Eigen::VectorXd& x, Eigen::VectorXd& pending,
             bool forward) const;
  template <int D>
  void lower_block_sweep(const Level& level, const Eigen::VectorXd& b, Eigen::VectorXd& x,
                         Eigen::VectorXd& pending, bool forward) const;
  bool invert_diagonal_blocks(Level& level) const;
  std::vector<int> aggregate(const Level& level, int& num_aggregates) const;
  void cycle(int l, const Eigen::VectorXd& b, Eigen::VectorXd& x) const;

  std::vector<Level> levels_;
  std::vector<int> pair_block_offset_;  // each pair's lower block in level 0's node_blocks
  std::vector<double> diagonal_scratch_;
  Eigen::SimplicialLDLT<SpMat> coarse_;
  int dim_ = 0;
  double cycle_flops_ = 0, setup_flops_ = 0;
};

}  // namespace ms
