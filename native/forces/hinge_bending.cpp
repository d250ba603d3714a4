// The dihedral angle's Hessian for HingeBending (forces/hinge_bending.hpp).
#include "forces/hinge_bending.hpp"

namespace ms {

namespace {

using Vec9 = Eigen::Matrix<double, 9, 1>;
using Mat9 = Eigen::Matrix<double, 9, 9>;

// [u]x: the matrix of u x (.)
Mat<3> cross_matrix(const Vec<3>& u) {
  Mat<3> m;
  m << 0, -u.z(), u.y(), u.z(), 0, -u.x(), -u.y(), u.x(), 0;
  return m;
}

// A symmetric 9x9 matrix from its upper blocks in (a, e, b) order.
Mat9 symmetric_blocks(const Mat<3>& aa, const Mat<3>& ae, const Mat<3>& ab, const Mat<3>& ee,
                      const Mat<3>& eb, const Mat<3>& bb) {
  Mat9 h;
  h << aa, ae, ab, ae.transpose(), ee, eb, ab.transpose(), eb.transpose(), bb;
  return h;
}

}  // namespace

void set_dihedral_hessian(const Vec<3>& a, const Vec<3>& e, const Vec<3>& b, DihedralAngle& out) {
  const double ee = e.squaredNorm(), le = std::sqrt(ee);
  const double ae = a.dot(e), eb = e.dot(b), ab = a.dot(b);
  const double X = out.X, Y = out.Y, T = -a.cross(e).dot(b), R = X * X + Y * Y;

  const Mat<3> I = Mat<3>::Identity(), Z = Mat<3>::Zero();

  Vec9 gT, gX, gL = Vec9::Zero();
  gT << b.cross(e), a.cross(b), e.cross(a);
  gX << e * eb - b * ee, a * eb + b * ae - 2.0 * e * ab, e * ae - a * ee;
  gL.segment<3>(3) = e / le;
  const Vec9 gY = T * gL + le * gT;

  // theta = atan2(Y, X): its gradient in (a, e, b), (X gY - Y gX) / R, and that
  // gradient's derivative. (a, e, b) = S (x0, x1, x2, x3): a = x2 - x0, e = x1 - x0,
  // b = x3 - x0. S is made of identity blocks, so S^T H S is a sum of 3x3 blocks (as a
  // product of dense matrices it costs more than everything above).
  constexpr int at[4] = {-1, 3, 0, 6};  // where x1 (e), x2 (a), x3 (b) are among (a, e, b)
  const Vec9 g = (X * gY - Y * gX) / R;

  const Mat9 HT = symmetric_blocks(Z, cross_matrix(b), -cross_matrix(e), Z, cross_matrix(a), Z);
  const Mat9 HX = symmetric_blocks(Z, eb * I + e * b.transpose() - 2.0 * b * e.transpose(),
                                   e * e.transpose() - ee * I,
                                   a * b.transpose() + b * a.transpose() - 2.0 * ab * I,
                                   a * e.transpose() + ae * I - 2.0 * e * a.transpose(), Z);
  Mat9 HL = Mat9::Zero();
  HL.block<3, 3>(3, 3) = (I - e * e.transpose() / ee) / le;
  const Mat9 HY = T * HL + gL * gT.transpose() + gT * gL.transpose() + le * HT;
  Mat9 H = (X * HY - Y * HX + gY * gX.transpose() - gX * gY.transpose()) / R -
           g * (2.0 * (X * gX + Y * gY)).transpose() / R;
  H = 0.5 * (H + H.transpose());  // symmetric in exact arithmetic
  Mat<3> h00 = Mat<3>::Zero();
  for (int j = 1; j < 4; ++j) {
    Mat<3> column = Mat<3>::Zero();  // the sum of block column j of H over a, e, b
    for (int i = 1; i < 4; ++i) {
      out.hess.block<3, 3>(3 * i, 3 * j) = H.block<3, 3>(at[i], at[j]);
      column += H.block<3, 3>(at[i], at[j]);
    }
    out.hess.block<3, 3>(0, 3 * j) = -column;
    out.hess.block<3, 3>(3 * j, 0) = -column.transpose();
    h00 += column;
  }
  out.hess.block<3, 3>(0, 0) = h00;
}

}  // namespace ms
