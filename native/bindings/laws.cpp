// mass_spring._core.laws: the elements' force laws as pure functions, for tests.
#include "bindings/common.hpp"

#include "forces/laws.hpp"
#include "forces/hinge_bending.hpp"
#include "forces/wire_bending.hpp"
#include "contact/self_contact.hpp"

namespace ms::bindings {

namespace {

py::array_t<double> matrix_array(const double* data, int rows, int cols) {
  py::array_t<double> a({rows, cols});
  // Eigen is column-major, numpy row-major.
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) a.mutable_at(r, c) = data[r + rows * c];
  return a;
}

template <int D>
py::tuple element_force_tuple(const ElementForce<D>& e) {
  return py::make_tuple(as_array(e.f, D, 0), matrix_array(e.A.data(), D, D),
                        matrix_array(e.B.data(), D, D));
}

// A stencil law's terms at positions x and velocities v (k rows of D): (energy, f (kD),
// dfdx, dfdv).
template <int D, class Law>
py::tuple stencil_terms(const Law& law, const py::array_t<double>& x, const py::array_t<double>& v,
                        bool definite) {
  constexpr int K = Law::K;
  std::array<Vec<D>, K> xs, vs;
  for (int j = 0; j < K; ++j)
    for (int d = 0; d < D; ++d) xs[j](d) = x.at(j, d), vs[j](d) = v.at(j, d);
  const auto t = law.template terms<D>(xs, vs, definite ? Need::kProjected : Need::kJacobian);
  constexpr int N = K * D;
  const auto dfdx = t.jacobian();
  using Matrix = typename std::decay_t<decltype(t)>::Matrix;
  const Matrix dfdv = t.outer ? Matrix(Matrix::Zero()) : t.dfdv;  // an outer product's law has none
  return py::make_tuple(t.energy, as_array(t.f, N, 0), matrix_array(dfdx.data(), N, N),
                        matrix_array(dfdv.data(), N, N));
}

template <class Law>
py::tuple stencil_terms_any(const Law& law, const py::array_t<double>& x, const py::array_t<double>& v,
                            bool definite) {
  if (x.ndim() != 2 || x.shape(0) != Law::K || (x.shape(1) != 2 && x.shape(1) != 3) ||
      v.ndim() != 2 || v.shape(0) != x.shape(0) || v.shape(1) != x.shape(1))
    throw InputError("x and v must both have shape (" + std::to_string(Law::K) + ", 2 or 3)");
  return x.shape(1) == 2 ? stencil_terms<2>(law, x, v, definite) : stencil_terms<3>(law, x, v, definite);
}

// The four rows of a hinge's positions (shape (4, 3)).
std::array<Vec<3>, 4> hinge_rows(const py::array_t<double>& x) {
  if (x.ndim() != 2 || x.shape(0) != 4 || x.shape(1) != 3) throw InputError("x must have shape (4, 3)");
  const auto r = x.unchecked<2>();
  std::array<Vec<3>, 4> p;
  for (int i = 0; i < 4; ++i) p[i] = Vec<3>(r(i, 0), r(i, 1), r(i, 2));
  return p;
}

template <class F2, class F3>
auto by_dimension(const Arr& d, F2 f2, F3 f3) {
  if (d.size() == 2) return f2(Vec<2>(Eigen::Map<const Vec<2>>(d.data())));
  if (d.size() == 3) return f3(Vec<3>(Eigen::Map<const Vec<3>>(d.data())));
  throw InputError("d must have 2 or 3 coordinates, got " + std::to_string(d.size()));
}

SelfContactPair::Kind self_pair_kind(const std::string& kind) {
  if (kind == "point_triangle") return SelfContactPair::kPointTriangle;
  if (kind == "edge_edge") return SelfContactPair::kEdgeEdge;
  if (kind == "point_edge") return SelfContactPair::kPointEdge;
  throw InputError("kind must be point_triangle, edge_edge or point_edge");
}

}  // namespace

void bind_laws(py::module_& m) {
  m.doc() = "The elements' force laws as pure functions (see native/forces/laws.hpp).";
  m.def(
      "spring_force",
      [](double length, double stiffness, double damping, bool rope, const Arr& d,
         const Arr& dv, bool definite) {
        const Spring s{length, stiffness, damping, rope, {}};
        if (dv.size() != d.size()) throw InputError("d and dv must have the same size");
        return by_dimension(
            d,
            [&](const Vec<2>& x) {
              return element_force_tuple<2>(
                  spring_force<2>(s, x, Eigen::Map<const Vec<2>>(dv.data()), definite));
            },
            [&](const Vec<3>& x) {
              return element_force_tuple<3>(
                  spring_force<3>(s, x, Eigen::Map<const Vec<3>>(dv.data()), definite));
            });
      },
      py::arg("length"), py::arg("stiffness"), py::arg("damping"), py::arg("rope"), py::arg("d"),
      py::arg("dv"), py::arg("definite") = false,
      "Force f on end a of a spring (rope: tension only) with d = p_b - p_a, dv = v_b - v_a, "
      "and A = df/dd, B = df/ddv: (f, A, B).");
  m.def(
      "spring_energy",
      [](double length, double stiffness, bool rope, double stretch) {
        return spring_energy(Spring{length, stiffness, 0.0, rope, {}}, stretch);
      },
      py::arg("length"), py::arg("stiffness"), py::arg("rope"), py::arg("stretch"));
  m.def("rope_band", &rope_band, py::arg("length"));
  m.def(
      "rod_terms",
      [](double length, const Arr& d, double lam, bool definite) {
        return by_dimension(
            d,
            [&](const Vec<2>& x) {
              const RodTerms<2> r = rod_terms<2>(length, x, lam, definite);
              return py::make_tuple(r.g, as_array(r.grad, 2, 0), element_force_tuple<2>(r.force));
            },
            [&](const Vec<3>& x) {
              const RodTerms<3> r = rod_terms<3>(length, x, lam, definite);
              return py::make_tuple(r.g, as_array(r.grad, 3, 0), element_force_tuple<3>(r.force));
            });
      },
      py::arg("length"), py::arg("d"), py::arg("lam"), py::arg("definite") = false,
      "Rod in squared form: (g, dg/dp_b, (f, A, B)) with f = lam dg/dp_b on end a.");
  m.def(
      "wire_bending_terms",
      [](double stiffness, const py::array_t<double>& x, const py::array_t<double>& v, bool definite,
         double rest_angle) {
        const WireBending law{stiffness, rest_angle};
        law.validate([] { return std::string("wire_bending_terms"); });
        return stencil_terms_any(law, x, v, definite);
      },
      py::arg("stiffness"), py::arg("x"), py::arg("v"), py::arg("definite") = false, py::arg("rest_angle") = 0.0,
      "WireBending at positions x and velocities v (3 rows): (energy, f, df/dx, df/dv).");
  m.def(
      "hinge_bending_terms",
      [](double stiffness, double rest_angle, const py::array_t<double>& x, const py::array_t<double>& v,
         bool definite) { return stencil_terms_any(HingeBending{stiffness, rest_angle}, x, v, definite); },
      py::arg("stiffness"), py::arg("rest_angle"), py::arg("x"), py::arg("v"), py::arg("definite") = false,
      "HingeBending at positions x and velocities v (4 rows, 3 columns): (energy, f, df/dx, df/dv).");
  m.def(
      "self_contact_terms",
      [](const std::string& kind, const py::array_t<double>& x, const py::array_t<double>& v, double distance,
         double friction, double stiffness, double mass, double side) {
        const std::array<Vec<3>, 4> xs = hinge_rows(x), vs = hinge_rows(v);
        SelfContactPair pair;
        pair.kind = self_pair_kind(kind);
        pair.v = {0, 1, 2, 3};
        pair.side = side;
        pair.stiffness = stiffness;
        pair.mass = mass;
        pair.distance = distance;
        pair.friction = friction;
        SelfContact contact;
        contact.set({xs.begin(), xs.end()}, {}, {}, distance, friction);
        const SelfContactTerms t = contact.terms(pair, xs, vs, 9.81);
        Eigen::Matrix<double, 12, 1> f;
        Eigen::Matrix<double, 12, 12> dfdx, dfdv;
        for (int i = 0; i < 4; ++i) {
          f.segment<3>(3 * i) = t.f[i];
          for (int j = 0; j < 4; ++j) {
            dfdx.block<3, 3>(3 * i, 3 * j) = -t.w[i] * t.w[j] * t.A;
            dfdv.block<3, 3>(3 * i, 3 * j) = -t.w[i] * t.w[j] * t.B;
          }
        }
        return py::make_tuple(t.energy, as_array(f, 12, 0), matrix_array(dfdx.data(), 12, 12),
                              matrix_array(dfdv.data(), 12, 12));
      },
      py::arg("kind"), py::arg("x"), py::arg("v"), py::arg("distance"), py::arg("friction"), py::arg("stiffness"),
      py::arg("mass"), py::arg("side") = 1.0,
      "A self-contact pair (contact/self_contact.hpp) at positions x and velocities v (4 rows, 3 "
      "columns: point and triangle, two edges, or point and edge with its last vertex repeated): "
      "(energy, f, df/dx, df/dv), the derivatives as Newton's matrix takes them.");
  m.def(
      "_self_pair_stays_apart",
      [](const std::string& kind, const py::array_t<double>& listed, const py::array_t<double>& x, double distance) {
        const std::array<Vec<3>, 4> x0 = hinge_rows(listed), x1 = hinge_rows(x);
        SelfContactPair pair;
        pair.kind = self_pair_kind(kind);
        pair.v = {0, 1, 2, 3};
        pair.distance = distance;
        // The side of the triangle's plane the point is on where listed (SelfContact::pairs).
        if (pair.kind == SelfContactPair::kPointTriangle)
          pair.side = (x0[0] - x0[1]).dot((x0[2] - x0[1]).cross(x0[3] - x0[1])) < 0 ? -1.0 : 1.0;
        SelfContact contact;
        contact.set({x0.begin(), x0.end()}, {}, {}, distance, 0.0);
        pair.clearance = contact.clearance(pair, x0);
        pair.stiffness = pair.mass = 1.0;
        std::vector<Vec3> moved(4);
        for (int j = 0; j < 4; ++j) moved[j] = x1[j] - x0[j];
        const std::array<Vec<3>, 4> still{Vec<3>::Zero(), Vec<3>::Zero(), Vec<3>::Zero(), Vec<3>::Zero()};
        return py::make_tuple(stays_apart(pair, moved), contact.clearance(pair, x1),
                              contact.terms(pair, x1, still, 9.81).touching);
      },
      py::arg("kind"), py::arg("listed"), py::arg("x"), py::arg("distance"),
      "For tests: (whether the pair listed at `listed` (4 rows, 3 columns) is skipped at x as "
      "unable to touch, how far beyond its distance it is at x, whether its law finds it "
      "touching at x).");
  m.def(
      "dihedral_angle",
      [](const py::array_t<double>& x, int derivatives) {
        if (derivatives < 0 || derivatives > 2) throw InputError("derivatives must be 0, 1 or 2");
        const std::array<Vec<3>, 4> p = hinge_rows(x);
        DihedralAngle a = dihedral_angle(p[0], p[1], p[2], p[3], derivatives);
        if (derivatives < 2) a.hess.setZero();
        const VectorXd hess = Eigen::Map<const VectorXd>(a.hess.data(), 144);  // symmetric: any order
        return py::make_tuple(a.ok, a.theta(), as_array(a.grad, 12, 0), as_array(hess, 12, 12));
      },
      py::arg("x"), py::arg("derivatives") = 2,
      "(ok, theta, d theta / dx, its Hessian) of the hinge x (4 rows, 3 columns); derivatives "
      "beyond `derivatives` (0, 1 or 2) are zero.");
}

}  // namespace ms::bindings
