// Smoothed-aggregation algebraic multigrid (Vanek, Mandel & Brezina 1996) as the
// preconditioner of the Newton matrix of big spring networks without rods.
//
// Why: an LDL^T factor of a 2D sheet fills in superlinearly, and stale factors need many
// Krylov iterations as the cloth swings. A V-cycle costs a few matrix-vector products, and with the rigid-body
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
  // extra Krylov iterations that costs come from the finest smoother, and renewing it
  // costs one pass over the elements (about half a V-cycle) instead of a setup (tens of
  // V-cycles). The solver renews it once per time step. False if a diagonal block is
  // singular.
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
  // A sparse matrix in float node blocks, row node by row node: row node k's blocks are the
  // column nodes col[row_start[k] ...], each row-major, stored from values[value_start[k]]
  // on. Why float and blocks: the V-cycle streams these matrices, and a preconditioner
  // needs no more than float accuracy (the Krylov method multiplies by the exact matrix);
  // a block shares one column index among its entries. About 4.2 bytes per nonzero
  // instead of the compressed double matrix's 12.
  struct FloatBlocks {
    std::vector<int> row_start, col, value_start;
    std::vector<float> values;
  };
  // The node blocks of M (row nodes by row_nodes, column nodes by col_nodes, as
  // block_start); with strictly_lower only those with column node < row node.
  static FloatBlocks float_blocks(const RowMat& M, const std::vector<int>& row_nodes,
                                  const std::vector<int>& col_nodes, bool strictly_lower);
  struct Level {
    RowMat A;  // as built (level 0: refresh_smoother renews only its smoother data)
    std::vector<int> block_start;    // node k owns unknowns [block_start[k], block_start[k+1])
    std::vector<double> block_inv;   // inverse of each diagonal block, row-major
    std::vector<int> block_inv_start;
    // A's strictly lower node blocks, for the smoother: A is symmetric, and the two sweeps
    // of a V-cycle read half of A each (about 2.2 bytes per nonzero of A).
    FloatBlocks lower;
    FloatBlocks P;  // prolongation from the next level (its nodes are the columns)
    int num_nodes() const { return static_cast<int>(block_start.size()) - 1; }
  };
  // Block Gauss-Seidel sweep on level l: forward from x = 0, leaving the residual b - A x
  // in `pending`; backward from the given x (`pending` is workspace).
  void sweep(int l, const Eigen::VectorXd& b, Eigen::VectorXd& x, Eigen::VectorXd& pending,
             bool forward) const;
  // x_fine += P x_coarse and r_coarse = P^T r_fine with level l's prolongation.
  void prolongate(int l, const Eigen::VectorXd& coarse, Eigen::VectorXd& fine) const;
  Eigen::VectorXd restrict_to_coarse(int l, const Eigen::VectorXd& fine) const;
  template <bool transpose>
  void prolongation_product(int l, const double* in, double* out) const;
  template <int D>
  void lower_block_sweep(const Level& level, const Eigen::VectorXd& b, Eigen::VectorXd& x,
                         Eigen::VectorXd& pending, bool forward) const;
  bool invert_diagonal_blocks(Level& level) const;
  std::vector<int> aggregate(const Level& level, int& num_aggregates) const;
  void cycle(int l, const Eigen::VectorXd& b, Eigen::VectorXd& x) const;

  std::vector<Level> levels_;
  std::vector<int> pair_block_offset_;  // each pair's block in level 0's lower.values
  std::vector<double> diagonal_scratch_;
  Eigen::SimplicialLDLT<SpMat> coarse_;
  int dim_ = 0;
  double cycle_flops_ = 0, setup_flops_ = 0;
};

}  // namespace ms
