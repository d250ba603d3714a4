// Assembly: the forces F = f - G^T lam, the constraint values g and the Newton matrix of
// Simulator<D>, summed element by element from the force laws of laws.hpp; and the matrix's
// sparsity pattern, set up once per topology.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "forces/laws.hpp"
#include "time/simulator.hpp"

namespace ms {

namespace {

struct TripletSink {
  std::vector<Eigen::Triplet<double>>* out;
  void add(int r, int c, double v) { out->emplace_back(r, c, v); }
};

}  // namespace

// One pass over all elements computing F = f - G^T lam, g, and (into `matrix`, in element
// form) the matrix
//     cM * M - cK * dF/dq - cV * dF/dv     in the mass rows and columns,
//     G^T in the multiplier columns, G in the multiplier rows, 0 on their diagonal.
template <int D>
void Simulator<D>::assemble(const Kinematics& kin, const VectorXd& lam, double cM, double cK,
                         double cV, VectorXd* F, VectorXd* g, ElementMatrix* matrix,
                         std::vector<ContactState>* contacts) const {
  const int nm = num_masses();
  if (F) F->resize(D * nm);  // every entry is set by set_masses
  if (g) g->setZero(static_cast<Eigen::Index>(model_.constraints.size()));
  const int nc = static_cast<int>(model_.constraints.size());
  const SpringChunks planned = pattern_ready_ ? SpringChunks() : plan_spring_chunks();
  const SpringChunks& spring_chunks = pattern_ready_ ? spring_chunks_ : planned;
  if (matrix) matrix->resize(D, nm, spring_chunks.all + nc, nc);
  auto node = [](const Connector& c) { return c.type == MASS ? c.nr : -1; };
  int pair = 0;
  if (F) element_force_scale_ = 0.0;
  auto add_force = [&](const std::array<Connector, 2>& c, const VecD& fa) {
    if (!F) return;
    element_force_scale_ = std::max(element_force_scale_, fa.cwiseAbs().maxCoeff());
    if (c[0].type == MASS) F->template segment<D>(D * c[0].nr) += fa;
    if (c[1].type == MASS) F->template segment<D>(D * c[1].nr) -= fa;
  };
  // The masses' terms: F starts as their weights, the matrix's diagonal as cM times the
  // masses. Returns the largest weight (an element force).
  auto set_masses = [&] {
    double largest = 0;
    for (int i = 0; i < nm; ++i) {
      if (F) {
        F->template segment<D>(D * i) = model_.mass[i] * model_.gravity;
        largest = std::max(largest, model_.mass[i] * model_.gravity.cwiseAbs().maxCoeff());
      }
      if (matrix) matrix->set_mass(i, cM * model_.mass[i]);
    }
    return largest;
  };

  double largest = set_masses();  // first: F starts as the weights, where the elements add
  largest = std::max(largest, add_elements(model_.springs, spring_chunks.by_node,
                                           [&](long k) { return spring_chunks.pair[k]; }, kin, cK, cV, F, matrix));
  pair += spring_chunks.all;
  if (matrix) {
    const std::vector<char> none;
    matrix->resize_stencils(pattern_ready_ ? stencil_layout_ : stencil_layout(),
                            !definite_newton_ ? none : pattern_ready_ ? stencil_outer_ : stencil_outer_layout());
  }
  largest = std::max(largest, add_stencils(kin, cK, cV, F, matrix));
  largest = std::max(largest, add_self_contact(kin, cK, cV, F, matrix));
  if (F) element_force_scale_ = largest;

  if (contacts) contacts->clear();
  if (!model_.colliders.empty())
    for (const Touches& touching : touches(kin, matrix != nullptr)) {
      if (contacts) contacts->insert(contacts->end(), touching.where.begin(), touching.where.end());
      for (std::size_t k = 0; k < touching.mass.size(); ++k) {
        const ContactForce& c = touching.force[k];
        const int i = touching.mass[k];
        if (F) {
          F->template segment<D>(D * i) += c.f.template head<D>();
          element_force_scale_ = std::max(element_force_scale_, c.f.cwiseAbs().maxCoeff());
        }
        if (matrix) matrix->set_node_block(i, (cK * c.A + cV * c.B).template topLeftCorner<D, D>());
      }
    }

  for (int j = 0; j < nc; ++j) {
    const DistanceConstraint& dc = model_.constraints[j];
    const VecD d = kin.pos(dc.c[1]) - kin.pos(dc.c[0]);
    const RodTerms<D> rod = rod_terms<D>(dc.length, d, lam(j), definite_newton_);
    if (g) (*g)(j) = rod.g;
    add_force(dc.c, rod.force.f);  // -G^T lam: pulls a toward b when lam > 0
    if (matrix) {
      matrix->set_pair(pair, node(dc.c[0]), node(dc.c[1]), MatD(cK * rod.force.A));
      matrix->set_rod(j, rod.grad);
    }
    ++pair;
  }
}

// Which stencils' Newton blocks are outer products while Newton's matrix is projected:
// those of laws whose projected matrix is one.
template <int D>
std::vector<char> Simulator<D>::stencil_outer_layout() const {
  std::vector<char> outer;
  for_each_set(model_.stencils, [&](const auto& set) {
    using Law = typename std::decay_t<decltype(set)>::Law;
    outer.insert(outer.end(), set.size(), Law::kProjectInNewton && Law::kOuterProjected);
  });
  return outer;
}

template <int D>
std::vector<int> Simulator<D>::stencil_layout() const {
  std::vector<int> start{0};
  for_each_set(model_.stencils, [&](const auto& set) {
    for (std::size_t e = 0; e < set.size(); ++e) start.push_back(start.back() + set.K);
  });
  return start;
}

template <int D>
template <int K>
void Simulator<D>::element_vertices(const Kinematics& kin, const std::array<Connector, K>& ends, std::array<VecD, K>& x,
                                    std::array<VecD, K>& v, std::array<int, K>& nodes) const {
  for (int j = 0; j < K; ++j) {
    x[j] = kin.pos(ends[j]);
    v[j] = kin.vel(ends[j]);
    nodes[j] = ends[j].type == MASS ? ends[j].nr : -1;
  }
}

// f(law, x, v, nodes) for every stencil at `kin`, in the order of Stencils and then of
// their addition: x and v its vertices' positions and velocities, nodes their masses
// (-1: a fix).
template <int D>
template <class F>
void Simulator<D>::each_stencil(const Kinematics& kin, const F& f) const {
  for_each_set(model_.stencils, [&](const auto& set) {
    constexpr int K = std::decay_t<decltype(set)>::K;
    std::array<VecD, K> x, v;
    std::array<int, K> nodes;
    for (std::size_t e = 0; e < set.size(); ++e) {
      element_vertices<K>(kin, set.ends[e], x, v, nodes);
      f(set.laws[e], x, v, nodes);
    }
  });
}

template <int D>
std::vector<ChunkPlan> Simulator<D>::plan_stencil_chunks() const {
  std::vector<ChunkPlan> plans;
  for_each_set(model_.stencils, [&](const auto& set) {
    const long n = static_cast<long>(set.size());
    const int chunks = num_masses() >= kSplitMinMasses ? chunk_count(n, kStencilGrain) : 1;
    plans.push_back(plan_by_nodes(n, num_masses(), chunks, D, [&](long e, auto&& visit) {
      for (const Connector& end : set.ends[e]) visit(end.type == MASS ? end.nr : -1);
    }));
  });
  return plans;
}

// The generic assembly of one law's elements (`set`: the springs, or one law's stencils),
// in their chunks at once: each element's terms from the law's pure function (law_terms,
// as much as the caller needs), its forces added into F and its blocks written to its slot
// of the matrix (slot(e); -1: none, a spring between two fixes) in the law's form, one
// pair block or a stencil's (kD)^2 (or outer product). Each chunk adds its forces into its
// own sum, added in chunk order, and writes its own elements' blocks: the same bits on any
// number of workers. Returns the largest force.
template <int D>
template <class Set, class Slot>
double Simulator<D>::add_elements(const Set& set, const ChunkPlan& plan, const Slot& slot, const Kinematics& kin,
                                  double cK, double cV, VectorXd* F, ElementMatrix* matrix) const {
  using Law = std::decay_t<decltype(law_at(set, 0))>;
  constexpr int K = Law::K;
  const Need need = !matrix ? Need::kForces
                    : Law::kProjectInNewton && definite_newton_ ? Need::kProjected : Need::kJacobian;
  // as laid out (stencil_outer_layout): such a law gives its projected matrix as u u^T
  const bool outer = need == Need::kProjected && Law::kOuterProjected;
  // The elements order[first ... last - 1], their forces added to `out` (which holds the
  // entries from `offset` on): the largest force.
  auto add = [&](const int* first, const int* last, VectorXd* out, Eigen::Index offset) {
    double most = 0;
    std::array<VecD, K> x, v;
    std::array<int, K> nodes;
    for (const int* e = first; e != last; ++e) {
      const int at = slot(*e);
      if (at < 0) continue;
      element_vertices<K>(kin, ends_at(set, *e), x, v, nodes);
      const auto t = law_terms<D>(law_at(set, *e), x, v, need);
      if constexpr (IsPairForm<Law>::value) {  // the force on the first vertex, -it on the second
        if (out) {
          most = std::max(most, t.force.f.cwiseAbs().maxCoeff());
          if (nodes[0] >= 0) out->template segment<D>(D * nodes[0] - offset) += t.force.f;
          if (nodes[1] >= 0) out->template segment<D>(D * nodes[1] - offset) -= t.force.f;
        }
        if (matrix) matrix->set_pair(at, nodes[0], nodes[1], cK * t.force.A + cV * t.force.B);
      } else {
        if (out)
          for (int j = 0; j < K; ++j) {
            if (nodes[j] < 0) continue;
            const auto fj = t.f.template segment<D>(D * j);
            out->template segment<D>(D * nodes[j] - offset) += fj;
            most = std::max(most, fj.cwiseAbs().maxCoeff());
          }
        if (!matrix) continue;
        if (outer)  // -cK dfdx; such a law has no velocity terms (kOuterProjected)
          matrix->set_stencil_outer(at, nodes.data(), cK * t.outer_scale, t.u);
        else
          matrix->set_stencil(at, nodes.data(), -cK * t.dfdx - cV * t.dfdv);
      }
    }
    return most;
  };
  const int chunks = plan.chunks();
  if (chunks == 1) return add(plan.order.data(), plan.order.data() + set.size(), F, 0);
  ChunkSums sums(plan.spans, F);  // local: const reads (evaluate) may assemble during a step
  std::vector<double> chunk_largest(chunks, 0.0);
  WorkerPool::shared().run(chunks, [&](int c) {
    chunk_largest[c] = add(&plan.order[plan.start[c]], &plan.order[0] + plan.start[c + 1], sums.sum(c), sums.offset(c));
  });
  sums.finish();
  return *std::max_element(chunk_largest.begin(), chunk_largest.end());
}

// Each law's stencils (add_elements), numbered one law after the other in the order of
// Stencils.
template <int D>
double Simulator<D>::add_stencils(const Kinematics& kin, double cK, double cV, VectorXd* F,
                                  ElementMatrix* matrix) const {
  const std::vector<ChunkPlan> planned = pattern_ready_ ? std::vector<ChunkPlan>() : plan_stencil_chunks();
  const std::vector<ChunkPlan>& plans = pattern_ready_ ? stencil_chunks_ : planned;
  double largest = 0;
  int law = 0, first_stencil = 0;
  for_each_set(model_.stencils, [&](const auto& set) {
    auto slot = [first_stencil](long e) { return first_stencil + static_cast<int>(e); };
    largest = std::max(largest, add_elements(set, plans[law++], slot, kin, cK, cV, F, matrix));
    first_stencil += static_cast<int>(set.size());
  });
  return largest;
}

// Self-contact pairs are evaluated in chunks of this many: a smaller loop runs faster
// alone than handed over.
constexpr long kSelfPairGrain = 256;

template <int D>
std::vector<std::pair<int, SelfContactTerms>> Simulator<D>::self_contact_terms(const Kinematics& kin) const {
  std::vector<std::pair<int, SelfContactTerms>> out;
  if constexpr (D == 3) {
    const long n = static_cast<long>(self_pairs_.size());
    if (n == 0) return out;
    // Each vertex's move since the pairs were listed (stays_apart).
    std::vector<Vec3> moved(num_vertices(), Vec3::Constant(std::numeric_limits<double>::quiet_NaN()));
    const bool since = self_listing_positions_.size() == moved.size();
    if (since)
      for (int v : model_.self_contact.points()) moved[v] = kin.pos(vertex(v)) - self_listing_positions_[v];
    const Displacements displaced(std::move(moved), model_.self_contact.points());
    // Each chunk's touching pairs in a list of its own, joined in chunk order: the same
    // on any number of workers.
    const int chunks = chunk_count(n, kSelfPairGrain);
    std::vector<std::vector<std::pair<int, SelfContactTerms>>> found(chunks);
    std::vector<long> evaluated(chunks, 0);
    const bool seen = self_seen_apart_.size() == self_pairs_.size();
    WorkerPool::shared().run(chunks, [&](int c) {
      const long last = chunk_begin(n, chunks, c + 1);
      for (long k = chunk_begin(n, chunks, c); k < last; ++k) {
        const SelfContactPair& pair = self_pairs_[k];
        if (since && displaced.apart(pair)) continue;
        std::array<Vec3, 4> x, v;
        pair_state(pair, kin, x, v);
        // (each pair is in one chunk: its entry is this worker's alone)
        if (seen && self_seen_apart_[k].clearance > 0) {
          const std::array<Vec3, 4>& then = self_seen_apart_[k].at;
          if (stays_apart(pair.kind, self_seen_apart_[k].clearance,
                          {x[0] - then[0], x[1] - then[1], x[2] - then[2], x[3] - then[3]}))
            continue;
        }
        SelfContactTerms t = model_.self_contact.terms(pair, x, v, contact_gravity());
        ++evaluated[c];
        if (t.touching) {
          found[c].emplace_back(static_cast<int>(k), t);
        } else if (seen) {
          self_seen_apart_[k] = {x, t.clearance};
        }
      }
    });
    for (auto& chunk : found) out.insert(out.end(), chunk.begin(), chunk.end());
    for (long e : evaluated) self_contact_evaluations += e;
  }
  return out;
}

template <int D>
SelfContactTerms Simulator<D>::self_contact_terms(const SelfContactPair& pair, const Kinematics& kin) const {
  if constexpr (D != 3) {
    return {};
  } else {
    std::array<Vec3, 4> x, v;
    pair_state(pair, kin, x, v);
    return model_.self_contact.terms(pair, x, v, contact_gravity());
  }
}

template <int D>
void Simulator<D>::pair_state(const SelfContactPair& pair, const Kinematics& kin, std::array<Vec3, 4>& x,
                              std::array<Vec3, 4>& v) const {
  for (int j = 0; j < 4; ++j) {
    const Connector at = vertex(pair.v[j]);
    x[j] = kin.pos(at);
    v[j] = kin.vel(at);
  }
}

// The self-contact pairs listed for the step (list_self_pairs) that touch: a few per
// vertex at most.
template <int D>
double Simulator<D>::add_self_contact(const Kinematics& kin, double cK, double cV, VectorXd* F,
                                   ElementMatrix* matrix) const {
  double largest = 0;
  for (const auto& [k, t] : self_contact_terms(kin)) {
    std::array<int, 4> nodes;
    for (int j = 0; j < 4; ++j) {
      const Connector c = vertex(self_pairs_[k].v[j]);
      nodes[j] = c.type == MASS ? c.nr : -1;
    }
    if (F)
      for (int j = 0; j < 4; ++j) {
        if (nodes[j] < 0) continue;
        F->template segment<D>(D * nodes[j]) += t.f[j].template head<D>();
        largest = std::max(largest, t.f[j].cwiseAbs().maxCoeff());
      }
    if (matrix) matrix->add_coupling(nodes, t.w, Mat3(cK * t.A + cV * t.B));
  }
  return largest;
}

template <int D>
double Simulator<D>::self_contact_energy(const Kinematics& kin) const {
  double energy = 0;
  for (const auto& touching : self_contact_terms(kin)) energy += touching.second.energy;
  return energy;
}

template <int D>
double Simulator<D>::max_spring_stiffness() const {
  double largest = 0.0;
  for (const Spring& s : model_.springs) largest = std::max(largest, s.stiffness);
  return largest;
}

// The largest entry of the stencils' stiffness where the masses are now (WireBending:
// about k / l^2): with the springs' stiffness, the scale of the force round-off a
// position error of one ulp makes, which Newton's tolerance must stay above (a bent wire
// far from the origin: test_bending_far_from_the_origin_converges).
template <int D>
double Simulator<D>::stencils_stiffness() const {
  const FixPath<D> path = resting_path();
  double largest = 0.0;
  each_stencil(kinematics(state_.q, state_.v, path, state_.time),
               [&](const auto& law, const auto& x, const auto& v, const auto&) {
                 largest = std::max(largest, law.template terms<D>(x, v).jacobian().cwiseAbs().maxCoeff());
               });
  return largest;
}

template <int D>
template <class Set>
double Simulator<D>::elements_energy(const Set& set, const Kinematics& kin, long grain) const {
  constexpr int K = std::decay_t<decltype(law_at(set, 0))>::K;
  const long n = static_cast<long>(set.size());
  return sum_over_chunks<double>(n, split_work_ ? chunk_count(n, grain) : 1, [&](long first, long last) {
    double sum = 0;
    std::array<VecD, K> x, v;
    std::array<int, K> nodes;
    for (long e = first; e < last; ++e) {
      element_vertices<K>(kin, ends_at(set, e), x, v, nodes);
      sum += law_terms<D>(law_at(set, e), x, v, Need::kEnergy).energy;
    }
    return sum;
  });
}

// In chunks at once for big systems, as assembly (error control checks it every step).
template <int D>
double Simulator<D>::elements_energy(const Kinematics& kin) const {
  double energy = elements_energy(model_.springs, kin, kSpringGrain);
  for_each_set(model_.stencils, [&](const auto& set) { energy += elements_energy(set, kin, kStencilGrain); });
  return energy;
}

template <int D>
typename Simulator<D>::SpringChunks Simulator<D>::plan_spring_chunks() const {
  SpringChunks plan;
  const long ns = static_cast<long>(model_.springs.size());
  const int chunks = num_masses() >= kSplitMinMasses ? chunk_count(ns, kSpringGrain) : 1;
  plan.by_node = plan_by_nodes(ns, num_masses(), chunks, D, [&](long k, auto&& visit) {
      for (const Connector& end : model_.springs[k].c) visit(end.type == MASS ? end.nr : -1);
    });
  // Pairs numbered in the chunks' order, so that each chunk writes its own run of the
  // matrix's blocks: numbered as the springs, two chunks of a mesh whose vertices come in
  // any order wrote alternate blocks and shared their cache lines.
  plan.pair.assign(ns, -1);
  for (const int k : plan.by_node.order)
    if (model_.springs[k].c[0].type == MASS || model_.springs[k].c[1].type == MASS) plan.pair[k] = plan.all++;
  return plan;
}

template <int D>
const std::vector<typename Simulator<D>::Touches>& Simulator<D>::touches(const Kinematics& kin,
                                                                     bool derivatives) const {
  const int nm = num_masses();
  const bool definite = definite_newton_;
  const int chunks = contact_chunks();
  TouchesFoundAt& at = touches_found_at_;
  const bool found = at.valid && at.chunks == chunks && at.t == kin.t &&
                     at.colliders == model_.colliders.version() && at.q.size() == kin.q->size() &&
                     at.v.size() == kin.v->size() && at.q == *kin.q && at.v == *kin.v;
  touch_chunks_.resize(chunks);
  const Colliders& colliders = model_.colliders;
  if (!found && (near_triangles_.size() != static_cast<std::size_t>(nm) ||
                 near_tree_version_ != colliders.tree_version())) {
    near_triangles_.assign(nm, NearTriangles{});
    for (NearTriangles& near : near_triangles_) near.box.setEmpty();
    near_tree_version_ = colliders.tree_version();
  }
  const double reach = colliders.thickest();
  // Not found at any positions until every chunk has looked (a chunk that throws leaves
  // the others half filled).
  if (!found) at.valid = false;
  in_contact_chunks([&](int c, int first, int last) {
    Touches& mine = touch_chunks_[c];
    if (!found) {
      mine.mass.clear();
      mine.points.clear();
      mine.point_start.assign(1, 0);
      for (int i = first; i < last; ++i) {
        if constexpr (D == 3) {
          const Vec3 p = kin.q->template segment<3>(3 * i);
          NearTriangles& near = near_triangles_[i];
          if (!near.box.contains(p)) {
            near.box.setEmpty();  // until the list is complete
            const Eigen::AlignedBox3d box(p - Vec3::Constant(reach), p + Vec3::Constant(reach));
            colliders.near_triangles(box, near.triangles);
            near.box = box;
          }
          colliders.contacts(near.triangles, p, kin.t, kin.v->template segment<3>(3 * i),
                             [&](const ContactPoint& point) { mine.points.push_back(point); });
        }
        if (static_cast<int>(mine.points.size()) == mine.point_start.back()) continue;
        mine.mass.push_back(i);
        mine.point_start.push_back(static_cast<int>(mine.points.size()));
      }
    }
    mine.force.clear();
    mine.where.clear();
    for (std::size_t k = 0; k < mine.mass.size(); ++k)
      mine.force.push_back(contact_at(kin, mine.mass[k], mine.points.data() + mine.point_start[k],
                                      mine.points.data() + mine.point_start[k + 1], definite, &mine.where,
                                      derivatives));
  });
  if (!found) {
    at.q = *kin.q;
    at.v = *kin.v;
    at.t = kin.t;
    at.colliders = model_.colliders.version();
    at.chunks = chunks;
    at.valid = true;
  }
  return touch_chunks_;
}

template <int D>
void Simulator<D>::forces(const Kinematics& kin, const VectorXd& lam, VectorXd& F,
                       VectorXd& g) const {
  assemble(kin, lam, 0.0, 0.0, 0.0, &F, &g, nullptr);
}

template <int D>
void Simulator<D>::forces_and_matrix(const Kinematics& kin, const VectorXd& lam, double cM,
                                  double cK, double cV, VectorXd& F, VectorXd& g,
                                  NewtonLinearSolver& target) {
  ensure_pattern();
  assemble(kin, lam, cM, cK, cV, &F, &g, &target.elements, &contacts_);
  target.matrix_changed();
}

template <int D>
void Simulator<D>::evaluate(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                         VectorXd& F, VectorXd& g) const {
  const FixPath<D> path = resting_path();
  forces(kinematics(q, v, path, state_.time), lam, F, g);
}

template <int D>
void Simulator<D>::jacobian(const VectorXd& q, const VectorXd& v, const VectorXd& lam,
                         std::vector<Eigen::Triplet<double>>& d_qlam,
                         std::vector<Eigen::Triplet<double>>& d_v) const {
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(q, v, path, state_.time);
  const int row_lam = D * num_masses();
  // cK = -1 yields +dF/dq; the multiplier columns hold G^T = -dF/dlam.
  std::vector<Eigen::Triplet<double>> raw;
  TripletSink sink{&raw};
  ElementMatrix matrix;
  const bool definite = definite_newton_;
  definite_newton_ = false;  // the exact derivatives
  assemble(kin, lam, 0.0, -1.0, 0.0, nullptr, nullptr, &matrix);
  matrix.scatter(sink, true);
  d_qlam.clear();
  for (const auto& t : raw) {
    const bool flip = t.row() < row_lam && t.col() >= row_lam;
    d_qlam.emplace_back(t.row(), t.col(), flip ? -t.value() : t.value());
  }
  raw.clear();
  assemble(kin, lam, 0.0, 0.0, -1.0, nullptr, nullptr, &matrix);
  matrix.scatter(sink, true);
  d_v.clear();
  for (const auto& t : raw)
    if (t.row() < row_lam && t.col() < row_lam) d_v.push_back(t);
  definite_newton_ = definite;
}

template <int D>
double Simulator<D>::length_scale() {
  ensure_pattern();
  return length_scale_;
}

// By matrix pair: springs softer than kSoftSpringShare of the stiffest spring at each of
// their masses, which the multigrid hierarchy leaves out (SmoothedAggregation::leave_out):
// bending springs beside a cloth's own (test_soft_springs_are_left_out_of_the_hierarchy).
template <int D>
std::vector<char> Simulator<D>::soft_springs() const {
  constexpr double kSoftSpringShare = 0.25;
  std::vector<double> stiffest(num_masses(), 0.0);
  for (const Spring& s : model_.springs)
    for (const Connector& c : s.c)
      if (c.type == MASS) stiffest[c.nr] = std::max(stiffest[c.nr], s.stiffness);
  const SpringChunks& pairs = spring_chunks_;
  std::vector<char> soft(pairs.all, 0);
  for (std::size_t k = 0; k < model_.springs.size(); ++k) {
    const Spring& s = model_.springs[k];
    if (pairs.pair[k] < 0) continue;  // between two fixes: not a pair
    bool weak = true;
    for (const Connector& c : s.c)
      if (c.type == MASS) weak = weak && s.stiffness < kSoftSpringShare * stiffest[c.nr];
    soft[pairs.pair[k]] = weak;
  }
  return soft;
}

template <int D>
double Simulator<D>::mean_spring_neighbours() const {
  long ends = 0;  // of springs between two masses
  for (const Spring& s : model_.springs) ends += 2 * (s.c[0].type == MASS && s.c[1].type == MASS);
  return num_masses() > 0 ? static_cast<double>(ends) / num_masses() : 0.0;
}

// A hinge's triangles (x0 x1 x2) and (x0 x1 x3) are braced when their sides x0-x2,
// x1-x2, x0-x3 and x1-x3 are springs or rods: then no triangle can collapse under the
// hinge without stretching one. Quads without shear springs are not: the hinges of their
// two cuts have a side on a diagonal that nothing holds
// (test_core_step_pieces.py, test_braced_hinges_take_the_tighter_first_correction).
template <int D>
bool Simulator<D>::hinges_braced() const {
  const auto& wires = std::get<StencilSet<WireBending>>(model_.stencils);
  const auto& hinges = std::get<StencilSet<HingeBending>>(model_.stencils);
  if (wires.size() > 0) return false;
  if (hinges.size() == 0) return true;
  auto key = [](const Connector& a, const Connector& b) {
    auto id = [](const Connector& c) { return (static_cast<std::uint64_t>(c.type) << 32) | static_cast<std::uint32_t>(c.nr); };
    const std::uint64_t x = id(a), y = id(b);
    return std::make_pair(std::min(x, y), std::max(x, y));
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sides;
  sides.reserve(model_.springs.size() + model_.constraints.size());
  for (const Spring& s : model_.springs) sides.push_back(key(s.c[0], s.c[1]));
  for (const DistanceConstraint& c : model_.constraints) sides.push_back(key(c.c[0], c.c[1]));
  std::sort(sides.begin(), sides.end());
  auto held = [&](const Connector& a, const Connector& b) {
    return (a.type == FIX && b.type == FIX) || std::binary_search(sides.begin(), sides.end(), key(a, b));
  };
  for (const auto& x : hinges.ends)
    if (!held(x[0], x[2]) || !held(x[1], x[2]) || !held(x[0], x[3]) || !held(x[1], x[3])) return false;
  return true;
}

template <int D>
void Simulator<D>::ensure_pattern() {
  if (pattern_ready_) return;
  // Length scale for the Newton tolerance: the mean element length, else the extent.
  double sum = 0;
  int count = 0;
  for (const Spring& s : model_.springs)
    if (s.length > 0) sum += s.length, ++count;
  for (const DistanceConstraint& c : model_.constraints) sum += c.length, ++count;
  if (count > 0) {
    length_scale_ = sum / count;
  } else {
    VecD lo = VecD::Constant(1e300), hi = VecD::Constant(-1e300);
    for (int i = 0; i < num_masses(); ++i) lo = lo.cwiseMin(pos(i)), hi = hi.cwiseMax(pos(i));
    for (const VecD& p : state_.fix_pos) lo = lo.cwiseMin(p), hi = hi.cwiseMax(p);
    length_scale_ = (num_masses() + num_fixes() > 1) ? (hi - lo).norm() : 0.0;
  }
  if (!(length_scale_ > 0)) length_scale_ = 1.0;
  // The length error control's tolerance is a fraction of: the mean element length, but
  // no less than 1/kErrorScaleDivisions of the structure's largest side. A mesh divided
  // more finely than that keeps the error allowance of one so divided, in scene units:
  // how far a finer mesh strays from the converged motion, as a share of the structure's
  // size, stays that of the coarser mesh, and so does its number of steps
  // (test_core_error_control.py, test_a_fine_folding_sheet_follows_a_converged_run_as_a_coarse_one).
  // The side is that of the structure as built, so that a restored state (set_state) in
  // an identical system steps as the original did (test_core_state.py).
  constexpr double kErrorScaleDivisions = 40;
  const double largest_side = num_masses() + num_fixes() > 1 ? (model_.built_hi - model_.built_lo).maxCoeff() : 0.0;
  error_scale_ = std::max(length_scale_, largest_side / kErrorScaleDivisions);
  max_stiffness_ = std::max(max_spring_stiffness(), stencils_stiffness());

  spring_chunks_ = plan_spring_chunks();
  stencil_layout_ = stencil_layout();
  stencil_outer_ = stencil_outer_layout();
  stencil_chunks_ = plan_stencil_chunks();
  ElementMatrix pattern;
  const FixPath<D> path = resting_path();
  const Kinematics kin = kinematics(state_.q, state_.v, path, state_.time);
  VectorXd lam = VectorXd::Zero(static_cast<Eigen::Index>(model_.constraints.size()));
  assemble(kin, lam, 1.0, 1.0, 1.0, nullptr, nullptr, &pattern);
  double max_mass = 0;
  for (double m : model_.mass) max_mass = std::max(max_mass, m);
  // The constraint block of the scaled Newton matrix has the size of 1/mass.
  const double delta = 1e-8 / std::max(max_mass, 1e-300);
  if (!model_.constraints.empty()) consistency_lin_.set_pattern(pattern, delta);
  lin_.set_pattern(pattern, delta);
  lin_.use_multigrid(0);
  if (linear_solver_ == "multigrid" && !model_.constraints.empty())
    throw InputError("linear_solver 'multigrid' cannot handle DistanceConstraints (rigid "
                     "rods); use 'auto' or 'direct'");
  split_work_ = num_masses() >= kSplitMinMasses;
  lin_.split_work(split_work_);
  stencils_braced_ = hinges_braced();
  if (model_.constraints.empty() &&
      (linear_solver_ == "multigrid" ||
       (linear_solver_ == "auto" && num_masses() >= multigrid_min_masses() &&
        mean_spring_neighbours() >= kMultigridMinNeighbours)))
    lin_.use_multigrid(D, soft_springs());
  pattern_ready_ = true;
}


// The members defined in this file; the class is instantiated in time/simulator.cpp.
#define MS_INSTANTIATE(D)                                                                  \
  template void Simulator<D>::assemble(const Kinematics&, const VectorXd&, double, double,    \
                                    double, VectorXd*, VectorXd*, ElementMatrix*,          \
                                    std::vector<ContactState>*) const;                     \
  template void Simulator<D>::forces(const Kinematics&, const VectorXd&, VectorXd&,           \
                                  VectorXd&) const;                                        \
  template void Simulator<D>::forces_and_matrix(const Kinematics&, const VectorXd&, double,   \
                                             double, double, VectorXd&, VectorXd&,         \
                                             NewtonLinearSolver&);                         \
  template void Simulator<D>::evaluate(const VectorXd&, const VectorXd&, const VectorXd&,     \
                                    VectorXd&, VectorXd&) const;                           \
  template void Simulator<D>::jacobian(const VectorXd&, const VectorXd&, const VectorXd&,     \
                                    std::vector<Eigen::Triplet<double>>&,                  \
                                    std::vector<Eigen::Triplet<double>>&) const;           \
  template double Simulator<D>::length_scale();                                              \
  template std::vector<char> Simulator<D>::soft_springs() const;                             \
  template double Simulator<D>::elements_energy(const Kinematics&) const;                    \
  template double Simulator<D>::self_contact_energy(const Kinematics&) const;                \
  template SelfContactTerms Simulator<D>::self_contact_terms(const SelfContactPair&, const Kinematics&) const; \
  template void Simulator<D>::ensure_pattern();
MS_INSTANTIATE(2)
MS_INSTANTIATE(3)
#undef MS_INSTANTIATE

}  // namespace ms
