// Smoothed-aggregation algebraic multigrid (Vanek, Mandel & Brezina 1996) as the
// preconditioner of the Newton matrix of big spring networks without rods.
//
// Why: an LDL^T factor of a 2D sheet fills in superlinearly, and stale factors need many
// Krylov iterations as the cloth swings. A V-cycle costs a few matrix-vector products, and
// its convergence rate hardly depends on the mesh size, so a step costs O(unknowns).
//
// The hierarchy: nodes (a mass's D unknowns, later an aggregate's D coarse unknowns) are
// grouped into aggregates of strongly coupled neighbours; the tentative prolongator maps
// each aggregate's coarse unknowns onto the translations restricted to it, normalized; one
// damped Jacobi step on the isotropic part of each block (trace/D times I) smooths it, so
// P is a scalar matrix that the springs' turning leaves alone; the coarse matrix is the
// Galerkin product P^T A P.
// The smoother is block Gauss-Seidel (forward before, backward after the coarse
// correction), so the V-cycle is symmetric.
//
// Translations only, not the rotations as well: every level then has D unknowns per node,
// so the setup is a product of D x D blocks and the prolongation is half as big; on
// folding sheets under error control it took fewer Krylov iterations too
// (docs/performance.md, "Multigrid").
#pragma once

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>
#include <array>
#include <vector>

#include "linear_solver/element_matrix.hpp"

namespace ms {

class SmoothedAggregation {
 public:
  using SpMat = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;

  // A matrix of D x D blocks, row node by row node: row k's blocks are the column nodes
  // col[row_start[k] ...], block p row-major at values[p * D * D].
  template <class T>
  struct Blocks {
    std::vector<int> row_start{0}, col;
    std::vector<T> values;
    int rows() const { return static_cast<int>(row_start.size()) - 1; }
    int num_blocks() const { return static_cast<int>(col.size()); }
  };

  // The hierarchy of the symmetrized Newton matrix sym(J) given in element form (no rods).
  // False if a diagonal block or the coarsest matrix could not be factored.
  bool compute(const ElementMatrix& elements);
  // The hierarchy renewed from new values of the elements (same topology): the aggregates
  // and prolongators of the last compute() kept, every coarse matrix multiplied and every
  // smoother made anew (half the work of compute()). Falls back to compute() when there is
  // nothing to keep (see can_refresh).
  bool refresh(const ElementMatrix& elements);
  // Whether refresh() can keep the aggregates and prolongators: a hierarchy for the same
  // topology.
  bool can_refresh(const ElementMatrix& elements) const { return levels_.size() >= 2 && same_topology(elements); }
  // One V-cycle for A x = b, starting from x = 0.
  void apply(const Eigen::VectorXd& b, Eigen::VectorXd& x) const;
  // The finest level's smoother from new values of the elements (same topology as at
  // compute()); the coarse levels stay. Why: as cloth swings, the springs turn and the
  // hierarchy goes stale, but nearly all of the extra Krylov iterations that costs come
  // from the finest smoother, and renewing it costs one pass over the elements instead of
  // a setup. The solver renews it once per time step. False if a diagonal block is
  // singular or the topology changed.
  bool refresh_smoother(const ElementMatrix& elements);

  // Pairs (by the elements' numbering; nonzero: left out) that the hierarchy is built
  // without. Why: springs much softer than their neighbours (bending springs in cloth)
  // change the matrix little but make every level about twice as dense; the Krylov method
  // still multiplies by the whole matrix.
  void leave_out(std::vector<char> pairs) {
    left_out_ = std::move(pairs);
    pair_nodes_.clear();  // the next setup makes level 0's pattern anew
    stencil_nodes_.clear();
  }
  // Runs the setup's products, the V-cycle's smoothing and its prolongations in chunks on
  // the workers (parallel/parallel_for.hpp); false: one pass. The numbers are the same.
  bool parallel = false;
  // Rows a chunk of the row loops (setup products, restriction, prolongation).
  static constexpr long kRowGrain = 512;
  // Forgets what the next setup would start from (a restart point: see System::checkpoint).
  void restart() { top_modes_.clear(); }

  int num_levels() const { return static_cast<int>(levels_.size()); }
  // Unknowns and nonzeros of each level's matrix, finest first.
  std::vector<std::pair<long, long>> level_sizes() const;
  // Work of one V-cycle and of compute(), in multiply-adds (deterministic cost model).
  double cycle_flops() const { return cycle_flops_; }
  double setup_flops() const { return setup_flops_; }

 private:
  struct Level {
    Blocks<double> A;            // as built (level 0: as last refreshed)
    std::vector<double> weight;  // node k's near-null space: weight[k] times the identity
    std::vector<double> block_inv;  // inverse of each diagonal block, row-major
    // A's strictly lower blocks in float, for the smoother: A is symmetric, and the two
    // sweeps of a V-cycle read half of A each. Float because the V-cycle streams these
    // matrices and a preconditioner needs no more (GMRES multiplies by the exact matrix).
    Blocks<float> lower;
    // From kSplitSmootherNodes nodes on (smoother_blocks), the smoother sweeps blocks of rows (from
    // block_start[b] to block_start[b + 1]) at once, each Gauss-Seidel within itself and
    // Jacobi across; first_inner[k] is where row k's blocks within its own block start.
    std::vector<int> block_start;  // empty: one block
    std::vector<int> first_inner;
    std::vector<int> cross_rows;  // the rows with blocks in an earlier block
    std::vector<int> lower_source;  // the block of A each block of `lower` holds
    // The prolongation from the next level (its nodes are the columns) and its transpose,
    // the restriction: scalar matrices, one value per block standing for that value times I.
    Blocks<double> P, R;
    Blocks<double> AP;  // A P: its pattern serves the renewals on kept prolongators
    std::vector<int> aggregate;  // the next level's node each node belongs to (-1: none)
    int num_aggregates = 0;
    int num_nodes() const { return A.rows(); }
  };

  // Whether level 0's pattern was made for the elements' pairs.
  bool same_topology(const ElementMatrix& elements) const;
  // Level 0's pattern from the elements' topology, and each pair's two off-diagonal blocks
  // in it (-1 for a pair with a fixed end). Kept while the topology stays.
  void finest_pattern(const ElementMatrix& elements);
  // Level 0's values: mass, node blocks and sym(W) of every pair.
  void fill_finest(const ElementMatrix& elements);
  // The antisymmetric part of each mass's own block, D x D row-major per mass (empty
  // while no mass has one). A contact's is friction's: its force along the surface grows
  // with the depth, a coupling of the normal into the tangent as large as the penalty's
  // stiffness times the friction coefficient. Level 0 and the coarse levels keep the
  // symmetric part (the coarse solves are LDL^T), and level 0's smoother inverts each
  // diagonal block whole: without it a sheet sliding in a bowl took 9.6 Krylov
  // iterations per Newton iteration (2.9 without friction), with it 3.3
  // (docs/performance.md, "Friction in the smoother"; test_core_multigrid.py,
  // test_the_smoother_takes_friction_whole).
  std::vector<double> finest_skew_;
  // What fill_finest's chunks of rows read of the masses' blocks and the couplings, by
  // row, so that each chunk visits its own rows only (each walked every one before: 16
  // chunks, 16 walks): the masses with a block in ascending order, and each node's
  // (coupling, corner) entries as 4 coupling + corner, in the couplings' order.
  std::vector<int> finest_block_nodes_, coupling_start_, coupling_entries_;
  void index_finest_rows(const ElementMatrix& elements);
  template <int D>
  void fill_finest_rows(const ElementMatrix& elements, int first, int last);
  // The smoother's data of a level from its A (the pattern only for a new level).
  bool prepare_smoother(Level& level) const;
  // Builds the level below level l into `next`.
  template <int D>
  int coarsen(int l, Level& next, bool keep);
  template <int D>
  double smooth_prolongator(int l, Level& next);
  bool build_levels(const ElementMatrix& elements, bool keep_aggregates);
  template <int D>
  void smooth(const Level& level, const Eigen::VectorXd& b, Eigen::VectorXd& x, Eigen::VectorXd& pending,
              bool forward) const;
  template <int D>
  void cycle(int l, const Eigen::VectorXd& b, Eigen::VectorXd& x) const;

  bool left_out(int p) const { return p < static_cast<int>(left_out_.size()) && left_out_[p]; }

  // The smoother's blocks of rows of a level of a system solved in chunks (`parallel`):
  // from kSplitSmootherNodes nodes on two, and one per kSmootherBlockNodes beyond (more
  // blocks, more Jacobi between them: a weaker smoother, so they stay big). The coarse
  // levels of small systems too: swept on the caller alone, a torus of 2 304 vertices
  // spent a tenth of its solve on its second level (docs/performance.md, "The coarse
  // levels on all workers"). By the sizes alone: the same numbers on any workers.
  static constexpr int kSplitSmootherNodes = 256;
  static constexpr long kSmootherBlockNodes = 2048;
  static std::vector<int> smoother_blocks(int num_nodes, bool parallel);

  std::vector<Level> levels_;
  std::vector<char> left_out_;
  std::vector<std::array<int, 2>> pair_nodes_;  // the topology level 0's pattern is for
  std::vector<std::array<int, 2>> pair_blocks_;  // blocks (a, b) and (b, a) of each pair
  std::vector<int> diagonal_;                    // level 0's diagonal block of each row
  std::vector<int> node_pairs_start_, node_pairs_;  // each level-0 node's pairs, in order
  // The stencils' vertices level 0 was made for.
  std::vector<int> stencil_nodes_;
  template <int D>
  void add_stencils(const ElementMatrix& elements, int first, int last);
  std::vector<Eigen::VectorXd> top_modes_;  // each level's last power-iteration vector
  // The coarsest level's factor: dense up to kCoarsestUnknowns unknowns, where its fill is
  // all but full and a dense LDL^T solves in under half the time of the sparse one
  // (docs/performance.md, "The coarsest level dense"); sparse beyond, for a hierarchy
  // whose coarsening stopped early.
  bool dense_coarsest_ = false;
  Eigen::LDLT<Eigen::MatrixXd> dense_coarse_;
  Eigen::SimplicialLDLT<SpMat> sparse_coarse_;
  double coarsest_fill_ = 0;  // the sparse factor's nonzeros (factor_coarsest)
  bool factor_coarsest(bool same_pattern);
  int dim_ = 0;
  double cycle_flops_ = 0, setup_flops_ = 0;
};

}  // namespace ms
