// Sums that chunks of elements scatter into one vector (forces, matrix products), made
// the same on any number of workers: the first chunk adds into the vector itself, every
// other into a buffer of its own that covers only the entries its elements reach (its
// span: on meshes numbered row by row, a few rows), and the buffers are then added into
// the vector in chunk order.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <vector>

#include "parallel/parallel_for.hpp"

namespace ms {

struct ChunkSpan {
  Eigen::Index first = 0, size = 0;  // entries [first, first + size)
};

// Elements cut into chunks by where they lie: element e goes to the chunk of its first
// end among `chunks` equal ranges of `num_nodes` nodes, in the elements' order within a
// chunk. On a mesh numbered row by row a chunk's elements then reach only a row or two
// beyond its own nodes, whatever order the elements come in (a grid's row edges, then its
// column edges, ...), so the chunks' buffers (ChunkSums) add up to about one vector.
// ends(e, visit) calls visit(node) for each end of element e (node < 0: none).
struct ChunkPlan {
  std::vector<int> start;  // chunk c's elements are order[start[c]] ... order[start[c + 1] - 1]
  std::vector<int> order;
  std::vector<ChunkSpan> spans;
  int chunks() const { return static_cast<int>(start.size()) - 1; }
};

template <class Ends>
ChunkPlan plan_by_nodes(long n, int num_nodes, int chunks, int dim, const Ends& ends) {
  ChunkPlan plan;
  std::vector<int> chunk_of(n, 0);
  plan.start.assign(chunks + 1, 0);
  for (long e = 0; e < n; ++e) {
    long first = -1;
    ends(e, [&](long node) {
      if (node >= 0 && first < 0) first = node;
    });
    if (first >= 0 && num_nodes > 0) chunk_of[e] = static_cast<int>(first * chunks / num_nodes);
    ++plan.start[chunk_of[e] + 1];
  }
  for (int c = 0; c < chunks; ++c) plan.start[c + 1] += plan.start[c];
  plan.order.resize(n);
  std::vector<int> next(plan.start.begin(), plan.start.end() - 1);
  for (long e = 0; e < n; ++e) plan.order[next[chunk_of[e]]++] = static_cast<int>(e);
  plan.spans.assign(chunks, ChunkSpan());
  for (int c = 0; c < chunks; ++c) {
    long lo = -1, hi = -1;
    for (int q = plan.start[c]; q < plan.start[c + 1]; ++q)
      ends(plan.order[q], [&](long node) {
        if (node < 0) return;
        lo = lo < 0 ? node : std::min(lo, node);
        hi = std::max(hi, node);
      });
    if (lo >= 0) plan.spans[c] = {static_cast<Eigen::Index>(dim) * lo, static_cast<Eigen::Index>(dim) * (hi - lo + 1)};
  }
  return plan;
}

class ChunkSums {
 public:
  // Chunk 0 adds into `target` (whatever it holds then is part of the sum's start).
  ChunkSums(const std::vector<ChunkSpan>& spans, Eigen::VectorXd* target)
      : spans_(&spans), target_(target), sums_(spans.size()) {}
  // Where chunk c adds: the target for chunk 0, else its buffer, zeroed. Entry i of the
  // vector is entry i - offset(c) there.
  Eigen::VectorXd* sum(int c) {
    if (c == 0 || !target_) return target_;
    sums_[c].setZero((*spans_)[c].size);
    return &sums_[c];
  }
  Eigen::Index offset(int c) const { return c == 0 ? 0 : (*spans_)[c].first; }
  // The target += the other chunks' buffers, in chunk order for each entry; long vectors
  // in chunks of entries at once. After every chunk has run.
  void finish() const {
    if (!target_) return;
    Eigen::VectorXd& y = *target_;
    const long n = y.size();
    for_chunks(n, chunk_count(n, kVectorGrain), [&](long first, long last) {
      for (std::size_t c = 1; c < sums_.size(); ++c) {
        const ChunkSpan& span = (*spans_)[c];
        const Eigen::Index lo = std::max<Eigen::Index>(first, span.first);
        const Eigen::Index hi = std::min<Eigen::Index>(last, span.first + span.size);
        if (hi > lo) y.segment(lo, hi - lo) += sums_[c].segment(lo - span.first, hi - lo);
      }
    });
  }

 private:
  const std::vector<ChunkSpan>* spans_;
  Eigen::VectorXd* target_;
  std::vector<Eigen::VectorXd> sums_;
};

}  // namespace ms
