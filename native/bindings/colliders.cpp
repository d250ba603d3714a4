// Colliders: the triangles masses rest on, their contact forces, and the box tree's
// queries for tests.
#include "bindings/common.hpp"
#include "contact/self_contact.hpp"

#include <limits>
#include <optional>

namespace ms::bindings {

namespace {

// set_colliders(vertices (V, 3), triangles (T, 3), thickness, friction): the last two a
// number or one per triangle.
template <int D>
void set_colliders(System<D>& s, const Arr& vertices, const IdxArr& triangles,
                   const Arr& thickness, const Arr& friction);

// As given from Python: triangles of float values were cast to int (1.7 to vertex 1), where
// from_arrays refuses float indices (found by an adversarial test;
// test_core_contact.py, test_collider_input_is_checked).
template <int D>
void set_colliders_checked(System<D>& s, const Arr& vertices, const py::object& given,
                           const Arr& thickness, const Arr& friction) {
  const py::array triangles = py::array::ensure(given);
  if (!triangles) throw InputError("set_colliders: triangles must be an array of vertex indices");
  if (triangles.size() > 0 && triangles.dtype().kind() != 'i' && triangles.dtype().kind() != 'u')
    throw InputError("set_colliders: triangles must be integer vertex indices, got " +
                     std::string(py::str(triangles.dtype())) + " values");
  set_colliders(s, vertices, IdxArr::ensure(triangles), thickness, friction);
}

template <int D>
void set_colliders(System<D>& s, const Arr& vertices, const IdxArr& triangles,
                   const Arr& thickness, const Arr& friction) {
  if (vertices.size() % 3 != 0 || (vertices.ndim() == 2 && vertices.shape(1) != 3))
    throw InputError("set_colliders: vertices must have shape (V, 3)");
  if (triangles.size() % 3 != 0 || (triangles.ndim() == 2 && triangles.shape(1) != 3))
    throw InputError("set_colliders: triangles must have shape (T, 3)");
  std::vector<Vec3> v(static_cast<std::size_t>(vertices.size() / 3));
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = Vec3(vertices.data()[3 * k], vertices.data()[3 * k + 1], vertices.data()[3 * k + 2]);
  const std::size_t nt = static_cast<std::size_t>(triangles.size() / 3);
  std::vector<std::array<int, 3>> t(nt);
  for (std::size_t k = 0; k < nt; ++k)
    for (int j = 0; j < 3; ++j) {
      const long long x = triangles.data()[3 * k + j];
      if (x < 0 || x > std::numeric_limits<int>::max())
        throw InputError("set_colliders: triangle " + std::to_string(k) + " uses vertex " +
                         std::to_string(x) + ", but there are " + std::to_string(v.size()));
      t[k][j] = static_cast<int>(x);
    }
  auto per_triangle = [&](const Arr& a, const char* what) {
    if (a.size() != 1 && static_cast<std::size_t>(a.size()) != nt)
      throw InputError(std::string("set_colliders: ") + what +
                       " must be a number or one value per triangle (" + std::to_string(nt) +
                       "), got " + std::to_string(a.size()));
    std::vector<double> out(nt);
    for (std::size_t k = 0; k < nt; ++k) out[k] = a.data()[a.size() == 1 ? 0 : k];
    return out;
  };
  s.set_colliders(v, t, per_triangle(thickness, "thickness"), per_triangle(friction, "friction"));
}

// _collider_queries: Colliders::nearest and Colliders::crosses at many points (tests).
py::tuple collider_queries(const Arr& vertices, const IdxArr& triangles, double thickness,
                           const Arr& points, const Arr& ends) {
  System<3> holder;
  set_colliders(holder, vertices, triangles, Arr(py::float_(thickness)), Arr(py::float_(0.0)));
  if (points.ndim() != 2 || points.shape(1) != 3 || ends.ndim() != 2 || ends.shape(0) != points.shape(0) ||
      ends.shape(1) != 3)
    throw InputError("_collider_queries: points and ends must have the same shape (N, 3)");
  const py::ssize_t n = points.shape(0);
  py::array_t<double> distance(n), normal({n, static_cast<py::ssize_t>(3)});
  py::array_t<bool> crosses(n);
  py::array_t<int> contacts(n);
  const Colliders& colliders = holder.colliders();
  for (py::ssize_t k = 0; k < n; ++k) {
    const Vec3 p(points.at(k, 0), points.at(k, 1), points.at(k, 2));
    const Vec3 e(ends.at(k, 0), ends.at(k, 1), ends.at(k, 2));
    const ContactPoint c = colliders.nearest(p, 0.0);
    distance.mutable_at(k) = c.touching ? c.distance : std::numeric_limits<double>::infinity();
    for (int j = 0; j < 3; ++j) normal.mutable_at(k, j) = c.normal(j);
    crosses.mutable_at(k) = colliders.crosses(p, e, 0.0, 0.0);
    int touched = 0;
    colliders.contacts(p, 0.0, Vec3::Zero(), [&](const ContactPoint&) { ++touched; });
    contacts.mutable_at(k) = touched;
  }
  return py::make_tuple(distance, normal, crosses, contacts);
}

}  // namespace

template <int D>
void bind_colliders(SystemClass<D>& cls) {
  using S = System<D>;
  cls
      .def("set_colliders", &set_colliders_checked<D>, py::arg("vertices"), py::arg("triangles"),
           py::arg("thickness") = 0.02, py::arg("friction") = 0.3,
           "Triangles the masses rest on and cannot pass (3-D only): vertices (V, 3), "
           "triangles (T, 3) indices, thickness (m, the distance masses keep from the "
           "surface, on both sides) and Coulomb friction coefficient, each a number or one "
           "per triangle. Set again with the same triangles, the colliders move from where "
           "they are to the new vertices during the next simulate() call. No "
           "self-collision.")
      .def("move_out_of_colliders",
           [](S& s) {
             const std::vector<int> moved = s.move_out_of_colliders();
             return py::array_t<int>(moved.size(), moved.data());
           },
           "Moves a structure modelled within a collider's thickness (masses more than 1 % of "
           "it deep) to just beyond it (1 %), so that it starts there instead of being thrown "
           "out. Pieces (masses joined by springs or rods, with their fixes) near enough to meet "
           "move together by one translation, so that layers, rods and objects keep their "
           "places; only where every such mass leaves within 10 degrees of one direction (a "
           "floor, a table top: not a ball), no fix holds a piece of the group, and the way is "
           "free (no collider in what the group sweeps, crossed or entered); otherwise the group "
           "stays. A mass exactly in a face's plane leaves against gravity. Velocities are kept. "
           "Returns the masses that lay within a thickness and were moved.")
      .def("clear_colliders",
           [](S& s) { s.set_colliders({}, {}, {}, {}); })
      .def_property_readonly("num_collider_triangles",
                             [](const S& s) { return s.colliders().num_triangles(); })
      .def("contact_forces",
           [](const S& s) {
             s.simulator().require_idle("compute its contact forces");  // see "energy"
             const VectorXd f = s.simulator().contact_forces();
             return as_array(f, s.num_masses(), D);
           },
           "Force of the colliders on each mass now, shape (masses, D): penalty, damping "
           "and friction.");
}

void bind_collider_queries(py::module_& m) {
  m.def("_collider_queries", &collider_queries, py::arg("vertices"), py::arg("triangles"),
        py::arg("thickness"), py::arg("points"), py::arg("ends"),
        "For tests of the colliders' box tree against brute force: for each point, the "
        "distance to the nearest collider triangle within the thickness (inf: none) and the "
        "normal there, whether the segment from the point to `ends` crosses a triangle, and "
        "at how many points the point touches the colliders (Colliders::contacts).");
  m.def(
      "closest_parts",
      [](const py::array_t<double>& positions, const IdxArr& triangles, const IdxArr& edges, double within,
         const std::optional<IdxArr>& labels) {
        if (positions.ndim() != 2 || positions.shape(1) != 3) throw InputError("positions must have shape (n, 3)");
        std::vector<Vec3> x(positions.shape(0));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = Vec3(positions.at(i, 0), positions.at(i, 1), positions.at(i, 2));
        std::vector<int> label;
        if (labels) {
          if (labels->ndim() != 1 || labels->shape(0) != positions.shape(0))
            throw InputError("labels must have one value per position");
          label.assign(labels->data(), labels->data() + labels->shape(0));
        }
        SelfContact contact;
        contact.set(x, index_rows<3>(triangles, "triangles"), index_rows<2>(edges, "edges"),
                    within, 0.0);
        std::string where;
        const double d = contact.closest_parts(x, where, nullptr, labels ? &label : nullptr);
        return py::make_tuple(d, where);
      },
      py::arg("positions"), py::arg("triangles"), py::arg("edges"), py::arg("within"),
      py::arg("labels") = py::none(),
      "(distance, description) of the two closest parts of a mesh that share no vertex (vertex "
      "and triangle, two edges, vertex and wire), among those within `within` of each other; "
      "(inf, '') if none is. labels (n,) ints: only parts with different labels count (the "
      "closest approach between objects simulated together).");
}

template void bind_colliders<2>(SystemClass<2>&);
template void bind_colliders<3>(SystemClass<3>&);

}  // namespace ms::bindings
