"""Contact with colliders (set_colliders): against closed forms where there are any.

A mass touches a collider within its thickness of the surface; the penalty stiffness makes
a mass resting under its own weight sink 1/2000 of the thickness (contact.hpp).
"""
import math

import numpy as np
import pytest

import mass_spring as ms

G = 9.81
PLANE_V = np.array([[-10, -10, 0], [10, -10, 0], [10, 10, 0], [-10, 10, 0]], float)
PLANE_T = np.array([[0, 1, 2], [0, 2, 3]])


def one_mass(pos, vel=(0, 0, 0), m=1.0, tolerance=0.01):
    mss = ms.MassSpringSystem3d()
    mss.gravity = (0, 0, -G)
    mss.add(ms.Mass(m, list(pos), list(vel)))
    mss.tolerance = tolerance
    return mss


def sphere(radius, segments=96, rings=48):
    """A UV sphere as Blender makes it: poles and rings of `segments` vertices."""
    verts = [(0, 0, radius), (0, 0, -radius)]
    for j in range(1, rings):
        th = math.pi * j / rings
        for i in range(segments):
            ph = 2 * math.pi * i / segments
            verts.append((radius * math.sin(th) * math.cos(ph),
                          radius * math.sin(th) * math.sin(ph), radius * math.cos(th)))

    def at(j, i):
        return 2 + (j - 1) * segments + i % segments

    tris = []
    for i in range(segments):
        tris += [(0, at(1, i), at(1, i + 1)), (1, at(rings - 1, i + 1), at(rings - 1, i))]
    for j in range(1, rings - 1):
        for i in range(segments):
            a, b, c, d = at(j, i), at(j, i + 1), at(j + 1, i + 1), at(j + 1, i)
            tris += [(a, b, c), (a, c, d)]
    return np.array(verts, float), np.array(tris)


def box(center, half):
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    return np.asarray(center, float) + half * corners, np.array(tris)


@pytest.mark.parametrize("tolerance", [0.01, 0.0])
def test_mass_rests_on_a_plane_at_its_thickness(tolerance):
    thickness, m = 0.02, 2.5
    mss = one_mass((0.3, 0.2, 0.3), m=m, tolerance=tolerance)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    for _ in range(72):  # 3 s: falls, lands, settles
        mss.simulate(1 / 24, 5)
    x, y, z = mss.masses[0].pos
    assert abs(z - thickness) <= 1e-3 * thickness
    # Straight down: a few micrometres sideways at most (the landing step, with friction).
    assert (x, y) == pytest.approx((0.3, 0.2), abs=1e-5)
    force = mss.contact_forces()[0]
    np.testing.assert_allclose(force, [0, 0, m * G], rtol=0, atol=1e-6 * m * G)


def test_energy_follows_colliders_replaced_under_a_resting_mass():
    # The contacts found at one set of positions are reused while the positions, the
    # instant and the colliders stay (Simulator::touches): replacing the colliders must
    # still change what the energy counts. Resting on the plane the penalty holds about
    # 1e-4 J, against 0.49 J of gravity's.
    thickness, m = 0.02, 2.5
    mss = one_mass((0.3, 0.2, 0.3), m=m)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    for _ in range(48):
        mss.simulate(1 / 24, 5)
    resting = mss.energy()
    free = one_mass(mss.masses[0].pos, mss.masses[0].vel, m=m)
    without = free.energy()
    assert resting - without > 1e-5
    far = PLANE_V + [0, 0, -1]
    mss.set_colliders(far, PLANE_T[:, ::-1], thickness, 0.3)  # new triangles: placed at once
    assert mss.energy() == pytest.approx(without, rel=1e-12)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    assert mss.energy() == pytest.approx(resting, rel=1e-12)


@pytest.mark.parametrize("mu", [0.3, 0.7])
def test_sliding_down_a_30_degree_plane(mu):
    # From rest on the plane: s = g (sin θ - μ cos θ) t² / 2, or no motion when μ > tan θ.
    theta = math.radians(30)
    rot = np.array([[1, 0, 0], [0, math.cos(theta), -math.sin(theta)],
                    [0, math.sin(theta), math.cos(theta)]])
    thickness = 0.02
    sink = 5e-4 * thickness  # where the mass rests: no fall at the start
    mss = one_mass(rot @ [0, 0, thickness - sink])
    mss.set_colliders(PLANE_V @ rot.T, PLANE_T, thickness, mu)
    start = np.array(mss.masses[0].pos)
    for _ in range(24):
        mss.simulate(1 / 24, 5)
    distance = np.linalg.norm(np.array(mss.masses[0].pos) - start)
    expected = 0.5 * G * (math.sin(theta) - mu * math.cos(theta))
    if expected > 0:
        assert distance == pytest.approx(expected, rel=0.02)
    else:
        assert distance < 1e-3


def chain(n_links=20, length=1.0, height=1.0, tolerance=0.01):
    n = n_links + 1
    pos = np.zeros((n, 3))
    pos[:, 0] = np.linspace(0, length, n)
    pos[:, 2] = height
    links = np.array([[i, i + 1] for i in range(n_links)])
    mss = ms.from_arrays(pos, 0.05, springs=links, stiffness=2000.0, damping=0.5,
                         gravity=(0, 0, -G))
    mss.tolerance = tolerance
    return mss


def test_chain_dropped_on_a_plane_comes_to_rest():
    thickness = 0.02
    mss = chain()
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    kinetic, lowest = [], []
    for _ in range(24 * 4):
        mss.simulate(1 / 24, 5)
        kinetic.append(mss.kinetic_energy())
        lowest.append(mss.vertex_positions()[:, 2].min())
    assert min(lowest) >= thickness - 0.01 * thickness
    assert max(kinetic) > 5.0  # it fell
    assert max(kinetic[72:]) < 1e-3 * max(kinetic)


def grid_springs(n):
    """The vertex pairs of an n x n grid's structural and shear springs (row-major vertices)."""
    idx = np.arange(n * n).reshape(n, n)
    return np.concatenate([
        np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),
        np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], 1),
        np.stack([idx[:-1, 1:].ravel(), idx[1:, :-1].ravel()], 1)])


def sheet(n, height, size=2.0):
    """An n x n sheet of 1 kg lying flat at `height`, with shear springs."""
    xs = np.linspace(-size / 2, size / 2, n)
    X, Y = np.meshgrid(xs, xs)
    pos = np.stack([X.ravel(), Y.ravel(), np.full(n * n, height)], 1)
    edges = grid_springs(n)
    mss = ms.from_arrays(pos, 1.0 / (n * n), springs=edges, stiffness=200.0 * n, damping=0.01,
                         gravity=(0, 0, -G))
    mss.tolerance = 0.01
    return mss


@pytest.mark.parametrize("rho_inf, tolerance", [(0.5, 0.01), (0.8, 0.01), (0.5, 0.0)])
def test_sheet_settles_on_a_plane(rho_inf, tolerance):
    # Generalized-alpha alone bounces a sheet off a floor and gains energy; with contact
    # steps taken by implicit Euler it lands and lies still (System::step_kind).
    thickness = 0.02
    mss = sheet(17, 0.3)
    mss.set_integrator("generalized_alpha", rho_inf=rho_inf)
    mss.tolerance = tolerance
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    energy = [mss.energy()]
    for _ in range(48):
        mss.simulate(1 / 24, 5)
        energy.append(mss.energy())
    assert max(np.diff(energy)) <= 1e-9 * energy[0]  # it never gains energy
    z = mss.vertex_positions()[:, 2]
    np.testing.assert_allclose(z, thickness, atol=1e-3 * thickness)
    assert mss.kinetic_energy() < 1e-9
    assert mss.stats["steps"] <= 48 * 5 * 1.2  # about the fewest steps per frame


def test_a_sheet_at_rest_assembles_no_matrix_where_newton_stops():
    # Lying on the floor, every step stops after its first correction; its residual there
    # is computed before the matrix, which is then not needed (newton_correct's
    # check_residual_first assumes a rate of 1/2 before it knows one). Before: two
    # matrices per step.
    mss = sheet(17, 0.3)
    mss.set_colliders(PLANE_V, PLANE_T, 0.02, 0.3)
    mss.simulate(1.5, 36 * 5)
    before = mss.stats
    mss.simulate(0.5, 12 * 5)
    after = mss.stats
    done = {k: after[k] - before[k] for k in ("steps", "rejected_steps", "newton_iterations", "matrix_assemblies")}
    assert done["rejected_steps"] == 0
    assert done["newton_iterations"] == done["steps"]  # one correction each
    assert done["matrix_assemblies"] == done["newton_iterations"]


def test_masses_landing_start_newton_at_the_ramp():
    # A 13 x 13 sheet tilted 30 degrees lands edge first on a floor with friction (as the
    # bench's drop33). Newton's guess moves each arriving mass it predicts deep into the
    # floor back out to the penalty's ramp (Simulator::guess_arrivals): 225 Newton
    # iterations and 4 rejected steps over the landing, where the plain guess took 298 and
    # 7. The sheet still lies at the floor's thickness.
    n, thickness, tilt = 13, 0.02, math.radians(30)
    xs = np.linspace(0, 1, n)
    X, Y = np.meshgrid(xs, xs)
    pos = np.stack([X.ravel(), Y.ravel() * math.cos(tilt), 0.1 + Y.ravel() * math.sin(tilt)], 1)
    edges = grid_springs(n)
    mss = ms.from_arrays(pos, 1.0 / (n * n), springs=edges, stiffness=1000.0, damping=0.01, gravity=(0, 0, -G))
    mss.set_integrator("generalized_alpha", rho_inf=0.5)  # the add-on's
    mss.tolerance = 0.01
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.5)
    for _ in range(12):
        mss.simulate(1 / 24, 5)
    assert mss.stats["newton_iterations"] <= 260
    np.testing.assert_allclose(mss.vertex_positions()[:, 2], thickness, atol=1e-3 * thickness)


def drape(n, steps_per_frame=5, frames=48):
    mss = sheet(n, 0.6)
    radius, thickness = 0.5, 0.02
    mss.set_colliders(*sphere(radius), thickness, 0.3)
    closest = []
    for _ in range(frames):
        mss.simulate(1 / 24, steps_per_frame)
        closest.append(np.linalg.norm(mss.vertex_positions(), axis=1).min())
    return np.array(closest), radius + thickness, mss


def test_small_sheet_drapes_over_a_sphere():
    closest, outside, mss = drape(17)
    assert closest.min() >= 0.99 * outside
    assert (np.linalg.norm(mss.contact_forces(), axis=1) > 0).sum() >= 4  # it lies on it


def test_candidate_triangles_kept_from_earlier_positions_find_the_same_contacts():
    """Each mass keeps the triangles near where it was and looks among them while it
    stays near there (Simulator::touches): a system that has draped a sheet over a
    sphere with lists from earlier positions counts the same contacts, bit for bit, as a
    new one that lists them where the masses are now. (That the lists give the box
    tree's own points in its order was checked by baking with and without them:
    identical shape keys, docs/performance.md.)"""
    closest, outside, mss = drape(17, frames=24)
    new = sheet(17, 0.6)
    new.set_colliders(*sphere(0.5), 0.02, 0.3)
    new.set_state(mss.get_state())
    assert (np.linalg.norm(mss.contact_forces(), axis=1) > 0).sum() >= 4
    assert new.energy() == mss.energy()


def test_split_contact_search_gives_the_same_numbers():
    """Big systems look for their masses' contacts in chunks at once (Simulator::touches);
    the chunks and their order are fixed, so the numbers are bit for bit those of one
    worker."""
    def run(allow):
        workers = ms.get_num_threads()
        ms.set_num_threads(2 if allow else 1)
        try:
            mss = sheet(33, 0.55)
            assert len(mss.masses) >= ms._core.SPLIT_MIN_MASSES
            mss.set_colliders(*sphere(0.5), 0.02, 0.3)
            for _ in range(3):
                mss.simulate(1 / 24, 5)
            return mss.positions.copy(), mss.contact_forces()
        finally:
            ms.set_num_threads(workers)

    alone, alone_forces = run(False)
    helped, helped_forces = run(True)
    assert (np.linalg.norm(alone_forces, axis=1) > 0).sum() >= 4  # it touched
    assert np.array_equal(alone, helped) and np.array_equal(alone_forces, helped_forces)


@pytest.mark.slow
def test_sheet_33_drapes_over_a_sphere():
    closest, outside, _ = drape(33)
    assert closest.min() >= 0.99 * outside


@pytest.mark.parametrize("tolerance, steps", [(0.01, 5), (0.0, 1), (0.0, 5)])
def test_fast_mass_does_not_pass_a_thin_plane(tolerance, steps):
    # 10 m/s onto a plane of thickness 1 cm: one frame at 24 fps moves it 42 cm.
    thickness = 0.01
    mss = one_mass((0, 0, 0.5), (0, 0, -10), tolerance=tolerance)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    heights = []
    for _ in range(24):
        mss.simulate(1 / 24, steps)
        heights.append(mss.masses[0].pos[2])
    assert min(heights) > 0.5 * thickness  # never through, barely into the shell
    assert heights[-1] == pytest.approx(thickness, rel=2e-3)


def test_moving_box_pushes_a_pendulum_bob_aside():
    # A bob hangs on a rod from a fix; a box slides along x through where it hangs.
    mss = ms.MassSpringSystem3d()
    mss.gravity = (0, 0, -G)
    top = mss.add(ms.Fix([0, 0, 1]))
    bob = mss.add(ms.Mass(0.5, [0, 0, 0]))
    mss.add(ms.DistanceConstraint(1.0, (top, bob)))
    mss.tolerance = 0.01
    half, thickness = 0.1, 0.02
    start = np.array([-0.5, 0, 0])
    verts, tris = box(start, half)
    mss.set_colliders(verts, tris, thickness, 0.0)
    speed = 0.5  # m/s
    for frame in range(1, 25):
        face = start[0] + half + speed * frame / 24  # the box's leading face
        mss.set_colliders(verts + [speed * frame / 24, 0, 0], tris, thickness, 0.0)
        mss.simulate(1 / 24, 5)
        x = mss.masses[0].pos[0]
        assert x >= face + thickness * 0.99 or x <= face - 2 * half  # ahead of it, never in
    assert mss.masses[0].pos[0] > 0.05  # pushed
    assert mss.max_constraint_violation() < 1e-8


@pytest.mark.parametrize("velocity, side", [((0, 0, 0), 1), ((0, 0, -0.01), -1)])
def test_mass_in_the_plane_of_a_collider_goes_to_one_side(velocity, side):
    # A sheet modelled in the plane of the floor: exactly there, p - q is round-off and
    # would push sideways; the face's own normal decides: its front, or its back for a
    # mass moving that way.
    mss = one_mass((0.3, 0.2, 0.0), velocity)
    mss.gravity = (0, 0, 0)
    mss.set_colliders(PLANE_V, PLANE_T, 0.02, 0.3)
    force = mss.contact_forces()[0]
    assert force[:2] == pytest.approx((0, 0), abs=1e-9 * abs(force[2]))
    assert np.sign(force[2]) == side
    for _ in range(24):
        mss.simulate(1 / 24, 5)
    x, y, z = mss.masses[0].pos
    assert side * z >= 0.99 * 0.02
    assert (x, y) == pytest.approx((0.3, 0.2), abs=1e-9)


def test_fast_collider_does_not_pass_a_resting_mass():
    # A plane rising 0.5 m per frame (12 m/s) into a mass at rest: it carries the mass.
    thickness = 0.02
    mss = one_mass((0, 0, 0.3))
    mss.gravity = (0, 0, 0)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.0)
    for frame in range(1, 7):
        plane_z = 0.5 * frame
        mss.set_colliders(PLANE_V + [0, 0, plane_z], PLANE_T, thickness, 0.0)
        mss.simulate(1 / 24, 1)
        assert mss.masses[0].pos[2] >= plane_z + 0.5 * thickness


def test_contact_jacobian_matches_finite_differences():
    rng = np.random.default_rng(3)
    mss = ms.MassSpringSystem3d()
    mss.gravity = (0, 0, -G)
    n = 8
    for _ in range(n):
        mss.add(ms.Mass(rng.uniform(0.5, 2), [0, 0, 0]))
    verts, tris = sphere(1.0, 12, 6)  # coarse: faces, edges and corners
    mss.set_colliders(verts, tris, 0.05, 0.4)
    # Masses inside the shell: near a random point of a random triangle.
    weights = rng.dirichlet([1, 1, 1], size=n)
    weights[:2] = [1, 0, 0]  # near corners and edges too: the normal turns with p there
    weights[2:4] = [0.5, 0.5, 0]
    on_surface = np.einsum("nk,nkd->nd", weights, verts[tris[rng.integers(len(tris), size=n)]])
    offsets = rng.normal(size=(n, 3))
    offsets *= rng.uniform(0.005, 0.04, size=(n, 1)) / np.linalg.norm(offsets, axis=1)[:, None]
    q = (on_surface + offsets).ravel()
    v = rng.normal(size=3 * n)
    lam = np.zeros(0)
    mss.positions = q.reshape(n, 3)
    assert (np.linalg.norm(mss.contact_forces(), axis=1) > 0).all()

    def F(q, v):
        return mss.evaluate(q, v, lam)[0]

    d_q, d_v = mss.jacobian(q, v, lam)

    def dense(t):
        out = np.zeros((3 * n, 3 * n))
        np.add.at(out, (t[0], t[1]), t[2])
        return out

    eps = 1e-7
    fd_q = np.stack([(F(q + eps * e, v) - F(q - eps * e, v)) / (2 * eps) for e in np.eye(3 * n)], 1)
    fd_v = np.stack([(F(q, v + eps * e) - F(q, v - eps * e)) / (2 * eps) for e in np.eye(3 * n)], 1)
    np.testing.assert_allclose(dense(d_q), fd_q, atol=1e-5 * np.abs(fd_q).max())
    np.testing.assert_allclose(dense(d_v), fd_v, atol=1e-5 * np.abs(fd_v).max())


def test_collider_input_is_checked():
    mss = one_mass((0, 0, 1))
    with pytest.raises(ValueError, match="triangle 1 uses vertex 7"):
        mss.set_colliders(PLANE_V, [[0, 1, 2], [0, 2, 7]])
    with pytest.raises(ValueError, match="thickness must be positive"):
        mss.set_colliders(PLANE_V, PLANE_T, thickness=0.0)
    with pytest.raises(ValueError, match="friction"):
        mss.set_colliders(PLANE_V, PLANE_T, friction=[0.3, -1])
    with pytest.raises(ValueError, match="NaN|not finite"):
        mss.set_colliders(PLANE_V * np.nan, PLANE_T)
    with pytest.raises(ValueError, match=r"shape \(V, 3\)"):
        mss.set_colliders(PLANE_V[:, :2], PLANE_T)
    with pytest.raises(ValueError, match="triangles must be integer vertex indices, got float64"):
        mss.set_colliders(PLANE_V, np.asarray(PLANE_T, dtype=float) + 0.7)  # was cast to int
    flat = ms.MassSpringSystem2d()
    with pytest.raises(ValueError, match="2-D"):
        flat.set_colliders(PLANE_V, PLANE_T)
    mss.set_colliders(PLANE_V, PLANE_T)
    assert mss.num_collider_triangles == 2
    mss.clear_colliders()
    assert mss.num_collider_triangles == 0


def test_degenerate_triangles_are_skipped():
    mss = one_mass((0, 0, 0.5))
    verts = np.vstack([PLANE_V, [[0, 0, 0], [1, 1, 0]]])
    mss.set_colliders(verts, [[0, 1, 2], [0, 2, 3], [4, 4, 5]], 0.02)
    assert mss.num_collider_triangles == 2


# Concave colliders: a mass touches every face it is within the thickness of
# (Colliders::contacts). With only the nearest face, the force flipped between two faces'
# normals in a crease: a mass in a sphere took 1.6 million steps for one frame, or failed
# at the smallest step size, and one falling along the sphere's seam passed through it.
def _settles_at_rest(mss, seconds=2.0):
    for _ in range(round(24 * seconds)):
        mss.simulate(1 / 24, 1)
    assert mss.stats["steps"] < 100 * seconds  # about two steps a frame, not millions
    speeds = np.linalg.norm(mss.velocities, axis=1)
    assert speeds.max() < 1e-3
    # At rest, the colliders carry the weight.
    weight = sum(m.mass for m in mss.masses) * np.asarray(mss.gravity)
    np.testing.assert_allclose(mss.contact_forces().sum(axis=0), -weight, rtol=0, atol=1e-3 * np.linalg.norm(weight))


@pytest.mark.parametrize("mu", [0.05, 0.5])
@pytest.mark.parametrize("start", [(0, 0, 0), (0.3, 0.2, 0), (0.5, 0, 0.3), (0, 0, 0.9), (-0.2, 0.6, -0.5)])
def test_mass_inside_a_sphere_stays_inside_and_comes_to_rest(start, mu):
    thickness = 0.02
    vertices, triangles = sphere(1.0, 32, 16)
    mss = one_mass(start, m=0.04)
    mss.set_colliders(vertices, triangles, thickness, mu)
    _settles_at_rest(mss, seconds=6.0)
    p = np.asarray(mss.masses[0].pos)
    assert np.linalg.norm(p) < 1 - 0.5 * thickness  # inside, at its thickness from the wall
    # Friction holds it where the wall is no steeper than atan(mu), give or take the tilt of
    # the sphere's faces (half a ring, 5.6 degrees): mu = 0.05 slides into the pole, where
    # 32 faces meet. (Not mu = 0.1 or 0.3: faces slope at 5.6 and 16.9 degrees, where the
    # smoothed friction lets a mass creep.)
    assert math.degrees(math.acos(-p[2] / np.linalg.norm(p))) < math.degrees(math.atan(mu)) + 5.7


@pytest.mark.parametrize("start", [(0, 0.3, 0.5), (0.2, -0.5, 0.6), (0, 0, 0.3), (0.1, 1e-3, 0.5)])
def test_mass_onto_a_v_crease_slides_to_its_bottom(start):
    # Two planes rising at 30 degrees from the x axis, without friction: the mass ends on
    # the crease, at its thickness from both faces.
    thickness, angle = 0.02, math.radians(30)
    y, z = 2 * math.cos(angle), 2 * math.sin(angle)
    vertices = np.array([[-2, 0, 0], [2, 0, 0], [2, y, z], [-2, y, z], [2, -y, z], [-2, -y, z]], float)
    triangles = np.array([[0, 1, 2], [0, 2, 3], [1, 0, 5], [1, 5, 4]])
    mss = one_mass(start, m=0.04)
    mss.set_colliders(vertices, triangles, thickness, 0.0)
    for _ in range(72):
        mss.simulate(1 / 24, 1)
    assert mss.stats["steps"] < 400
    x, y_end, z_end = mss.masses[0].pos
    assert x == pytest.approx(start[0], abs=1e-9)  # nothing pushes along the crease
    assert abs(y_end) < 1e-3 * thickness
    assert z_end == pytest.approx(thickness / math.cos(angle), abs=1e-3 * thickness)


@pytest.mark.parametrize("n", [5, 9])
def test_small_cloth_inside_a_sphere_comes_to_rest_inside(n):
    thickness = 0.02
    vertices, triangles = sphere(1.0, 32, 16)
    xs = np.linspace(-0.3, 0.3, n)
    positions = np.array([[x, y, 0.0] for y in xs for x in xs])
    edges = [(j * n + i, j * n + i + 1) for j in range(n) for i in range(n - 1)]
    edges += [(j * n + i, (j + 1) * n + i) for j in range(n - 1) for i in range(n)]
    mss = ms.MassSpringSystem3d.from_arrays(positions, 0.04, springs=np.array(edges), stiffness=200.0,
                                            damping=0.1, gravity=(0, 0, -G))
    mss.tolerance = 0.01
    mss.set_colliders(vertices, triangles, thickness, 0.3)
    _settles_at_rest(mss, seconds=3.0)
    assert np.linalg.norm(mss.positions, axis=1).max() < 1 - 0.5 * thickness


# Fast motion against thin colliders: the penalty is at least m (v / thickness)^2 for a
# mass meeting a collider at relative speed v (contact_stiffness), and a collider that
# moves past a mass counts as a crossing (Colliders::crosses). Before, a floor rising at
# 24 m/s through a resting mass (1 mm thick) passed it silently, and a mass at 25 m/s onto
# it failed at the smallest step size.
def _moving_floor(speed, thickness, frames=12):
    mss = one_mass((0.3, 0.2, 0.5), m=0.04)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    z = 0.0
    for _ in range(frames):
        z += speed / 24
        mss.set_colliders(PLANE_V + [0, 0, z], PLANE_T, thickness, 0.3)
        mss.simulate(1 / 24, 1)
    return mss, z


@pytest.mark.parametrize("speed", [24, 50])
def test_fast_collider_carries_a_resting_mass(speed):
    thickness = 1e-3
    mss, floor = _moving_floor(speed, thickness)
    above = mss.masses[0].pos[2] - floor
    assert 0.5 * thickness < above <= thickness * (1 + 1e-3)
    assert mss.masses[0].vel[2] == pytest.approx(speed, rel=1e-3)  # it moves with the floor


def test_a_collider_too_fast_for_its_thickness_is_refused_with_its_speed_and_thickness():
    with pytest.raises(ms.SimulationError, match=r"would pass through a collider .*200 m/s; the thinnest is "
                                                 r"0\.001 m thick\)\. Likely cures: a thicker collider"):
        _moving_floor(200, 1e-3)


@pytest.mark.parametrize("thickness", [1e-3, 1e-2])
@pytest.mark.parametrize("speed", [25, 50, 200])
def test_fast_mass_stops_on_a_thin_floor(speed, thickness):
    mss = one_mass((0.3, 0.2, 0.5), vel=(0, 0, -speed), m=0.04)
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    for _ in range(24):  # lands, may bounce once (at 1 % of its speed), lands again
        mss.simulate(1 / 24, 1)
    assert mss.masses[0].pos[2] == pytest.approx(thickness, rel=1e-3)
    assert abs(mss.masses[0].vel[2]) < 1e-3


def _contact_force(pos, vertices, triangles, thickness, m=1.0):
    mss = one_mass(pos, m=m)
    mss.set_colliders(np.asarray(vertices, float), np.asarray(triangles), thickness, 0.0)
    return mss.contact_forces()[0]


def test_an_edge_between_a_thick_and_a_thin_face_pushes_the_same_in_any_order():
    # A roof ridge whose faces have different thicknesses: the deepest contact acts,
    # whichever triangle comes first.
    c, s = math.cos(math.radians(30)), math.sin(math.radians(30))
    vertices = [[-1, 0, 0], [1, 0, 0], [0, c, -s], [0, -c, -s]]
    above = (0, 0, 0.005)
    one = _contact_force(above, vertices, [[0, 1, 2], [1, 0, 3]], np.array([0.1, 0.01]))
    other = _contact_force(above, vertices, [[1, 0, 3], [0, 1, 2]], np.array([0.01, 0.1]))
    alone = _contact_force(above, vertices, [[0, 1, 2]], np.array([0.1]))
    np.testing.assert_allclose(one, other, rtol=1e-12)
    np.testing.assert_allclose(one, alone, rtol=1e-12)


@pytest.mark.parametrize("half_angle", [30.0, 11.25 / 2])
def test_the_force_in_a_concave_crease_does_not_jump_with_depth(half_angle):
    # Deep in a crease, p's nearest point on the far face moves from the crease's edge onto
    # that face as p crosses the plane through the edge square to the face: the force must
    # not jump there (it did by 9x the weight in a 11.25-degree crease).
    thickness, angle = 0.02, math.radians(half_angle)
    y, z = 2 * math.cos(angle), 2 * math.sin(angle)
    vertices = [[-2, 0, 0], [2, 0, 0], [2, y, z], [-2, y, z], [2, -y, z], [-2, -y, z]]
    triangles = [[0, 1, 2], [0, 2, 3], [1, 0, 5], [1, 5, 4]]
    square = math.pi / 2 - angle  # p's direction from the edge where the far face's foot jumps
    for r in (0.0199, 0.019, 0.015):
        before, after = (_contact_force((0.1, r * math.cos(square + d), r * math.sin(square + d)), vertices,
                                        triangles, thickness, m=0.04) for d in (-1e-4, 1e-4))
        assert np.linalg.norm(after - before) < 0.01 * np.linalg.norm(before)


# A structure modelled within a collider's thickness (move_out_of_colliders): the penalty
# would throw it out (a mass 5 mm over a floor 2 cm thick flies ~1 m up); moved out to just
# beyond the thickness (1 % more: Colliders::kWayOutMargin) first, it lies there. Without
# the move each of these structures jumps.
OUT = 1.01  # of the thickness: where a mass moved out starts


def _highest_after(mss, seconds=1.0):
    highest = -np.inf
    for _ in range(int(round(seconds * 24))):
        mss.simulate(1 / 24, 5)
        highest = max(highest, float(np.asarray(mss.positions)[:, 2].max()))
    return highest


@pytest.mark.parametrize("height", [0.0, 0.001, 0.005, 0.012])
@pytest.mark.parametrize("normals", ["up", "down"])
def test_a_mass_modelled_within_the_thickness_starts_on_it(height, normals):
    thickness = 0.02
    triangles = PLANE_T if normals == "up" else PLANE_T[:, ::-1]
    thrown = one_mass((0.3, 0.2, height))
    thrown.set_colliders(PLANE_V, triangles, thickness, 0.3)
    if height > 0:  # the jump (a mass in the plane with normals down falls through instead)
        assert _highest_after(thrown) > 0.1
    mss = one_mass((0.3, 0.2, height))
    mss.set_colliders(PLANE_V, triangles, thickness, 0.3)
    assert list(mss.move_out_of_colliders()) == [0]
    assert mss.masses[0].pos == pytest.approx((0.3, 0.2, OUT * thickness), abs=1e-12)
    assert _highest_after(mss) <= OUT * thickness * (1 + 1e-9)
    assert mss.masses[0].pos[2] == pytest.approx(thickness, abs=1e-3 * thickness)  # resting
    assert len(mss.move_out_of_colliders()) == 0  # lying on it: nothing to move


def _sheet_in_plane(n, rotation):
    """An n x n sheet of 2 m in the plane of PLANE turned by `rotation` (3 x 3), and that
    plane's vertices."""
    xs = np.linspace(-1, 1, n)
    flat = np.array([[x, y, 0.0] for y in xs for x in xs])
    return flat @ rotation.T, PLANE_V @ rotation.T


@pytest.mark.parametrize("degrees", [0, 10, 30, 45])
@pytest.mark.parametrize("normals", ["up", "down"])
def test_a_sheet_in_a_floors_plane_starts_on_it(degrees, normals):
    # An 11 x 11 sheet in the plane of a floor, flat or sloping about x: over the floor's
    # diagonal its vertices lie on an edge (no direction from the nearest point), elsewhere
    # its side of a face is the sign of round-off. All go to the side against gravity.
    thickness, a = 0.02, math.radians(degrees)
    rotation = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    positions, floor = _sheet_in_plane(11, rotation)
    up = rotation @ [0, 0, 1]
    mss = sheet(11, 0.0)
    mss.positions = positions
    mss.set_colliders(floor, PLANE_T if normals == "up" else PLANE_T[:, ::-1], thickness, 0.3)
    assert len(mss.move_out_of_colliders()) == 121
    np.testing.assert_allclose(np.asarray(mss.positions) @ up, OUT * thickness, rtol=0, atol=1e-12)
    if degrees == 0:
        lowest = np.inf
        for _ in range(24):
            mss.simulate(1 / 24, 5)
            lowest = min(lowest, float(np.asarray(mss.positions)[:, 2].min()))
        assert lowest >= 0.99 * thickness
        assert float(np.asarray(mss.positions)[:, 2].max()) <= OUT * thickness * (1 + 1e-9)


def _layers(n=6, gaps=(0.002, 0.006), fold=True):
    """Sheets of n x n masses 0.1 m apart at the heights `gaps`, joined along one side if
    `fold` (a folded towel), else loose (layers of their own)."""
    xs = np.linspace(0, 0.5, n)
    layer = np.array([[x, y, 0.0] for y in xs for x in xs])
    positions = np.concatenate([layer + [0, 0, z] for z in gaps])
    edges = [(j * n + i, j * n + i + 1) for j in range(n) for i in range(n - 1)]
    edges += [(j * n + i, (j + 1) * n + i) for j in range(n - 1) for i in range(n)]
    edges = [(a + k * n * n, b + k * n * n) for k in range(len(gaps)) for a, b in edges]
    if fold:
        edges += [(j * n + n - 1, n * n + j * n + n - 1) for j in range(n)]
    return ms.MassSpringSystem3d.from_arrays(positions, 0.01, springs=np.array(edges), stiffness=100.0,
                                             gravity=(0, 0, -G)), positions


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("floor", ["flat", "uneven"])
def test_layers_on_a_floor_move_as_one(fold, floor):
    # Two layers, 2 and 6 mm over a floor 2 cm thick, folded or loose, the floor flat or
    # with a corner lowered 2 cm (its two triangles then slope half a degree, each its own
    # way): lifted as one, they keep their 4 mm apart (each moved out on its own, they
    # would meet).
    thickness = 0.02
    mss, positions = _layers(fold=fold)
    vertices = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float)
    if floor == "uneven":
        vertices[0, 2] -= 0.02
    mss.set_colliders(vertices, PLANE_T, thickness, 0.3)
    assert len(mss.move_out_of_colliders()) == len(positions)
    moved = np.asarray(mss.positions) - positions
    np.testing.assert_allclose(moved, np.broadcast_to(moved[0], moved.shape), rtol=0, atol=1e-12)  # one move
    _stays(mss)  # all out


def test_a_chain_of_rods_on_a_floor_keeps_its_rods():
    thickness, n = 0.02, 30
    positions = np.column_stack([np.linspace(0, 1.5, n), np.zeros(n), np.full(n, 0.004)])
    mss = ms.from_arrays(positions, 0.01, constraints=np.array([[i, i + 1] for i in range(n - 1)]),
                         gravity=(0, 0, -G))
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    assert len(mss.move_out_of_colliders()) == n
    assert mss.max_constraint_violation() < 1e-15
    assert _highest_after(mss, 0.5) <= OUT * thickness * (1 + 1e-9)


def _stays(mss):
    before = np.asarray(mss.positions).copy()
    assert len(mss.move_out_of_colliders()) == 0
    np.testing.assert_array_equal(mss.positions, before)


def test_what_cannot_leave_as_one_is_not_moved():
    # Left as modelled (the bake then warns): a chain over a ball (its masses leave every
    # which way), a pinned chain on a floor (its pin stays), a sheet under a thin lid (it
    # would pass through it), and a mass between plates closer than two thicknesses.
    thickness, n = 0.02, 15
    angles = np.linspace(-0.5, 0.5, n)
    over_ball = np.stack([1.005 * np.sin(angles), np.zeros(n), 1.005 * np.cos(angles)], 1)
    links = np.array([[i, i + 1] for i in range(n - 1)])
    mss = ms.from_arrays(over_ball, 0.01, constraints=links, gravity=(0, 0, -G))
    mss.set_colliders(*sphere(1.0), thickness, 0.5)
    _stays(mss)

    on_floor = np.column_stack([np.linspace(0, 1, n), np.zeros(n), np.full(n, 0.005)])
    fixed = np.zeros(n, bool)
    fixed[0] = True
    mss = ms.from_arrays(on_floor, 0.01, fixed=fixed, constraints=links, gravity=(0, 0, -G))
    mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
    _stays(mss)

    mss = sheet(11, 0.005)
    lid = np.array([[-0.5, -2, 0.015], [2, -2, 0.015], [2, 2, 0.015], [-0.5, 2, 0.015]])
    mss.set_colliders(np.concatenate([PLANE_V, lid]), np.concatenate([PLANE_T, PLANE_T + 4]),
                      np.r_[thickness, thickness, 0.001, 0.001], 0.3)
    _stays(mss)

    mss = one_mass((0.3, 0.2, 0.012))
    mss.set_colliders(np.concatenate([PLANE_V, PLANE_V + [0, 0, 0.03]]), np.concatenate([PLANE_T, PLANE_T + 4]),
                      thickness, 0.3)
    _stays(mss)

    # A blade 1 mm thick whose edge hangs 12 mm over the floor, between rows of the sheet's
    # masses: no mass meets it on its way, but the sheet would rise around it.
    mss = sheet(11, 0.005)
    blade = np.array([[0.1, -2, 0.012], [0.1, 2, 0.012], [0.1, 2, 1.0], [0.1, -2, 1.0]])
    mss.set_colliders(np.concatenate([PLANE_V, blade]), np.concatenate([PLANE_T, PLANE_T + 4]),
                      np.r_[thickness, thickness, 0.001, 0.001], 0.3)
    _stays(mss)


def test_groups_far_apart_move_out_on_their_own():
    # One system: a sheet 5 mm over the floor (moved), a rope pinned 1 m up hanging to 5 mm
    # over the floor 3 m away (a pin holds it: not moved), and a sheet 0.5 m up 3 m the
    # other way (nothing near it lies within a thickness: not moved). A canopy over the
    # first sheet, pinned at two corners, its masses at the others far beyond the sheet,
    # holds it where it is (moved, it would rise through the canopy's face).
    thickness, n = 0.02, 6
    xs = np.linspace(0, 0.5, n)
    low = np.array([[x, y, 0.005] for y in xs for x in xs])
    high = low + [-3.5, 0, 0.495]
    rope = np.column_stack([np.full(11, 3.0), np.zeros(11), np.linspace(1.0, 0.005, 11)])
    grid = [(j * n + i, j * n + i + 1) for j in range(n) for i in range(n - 1)]
    grid += [(j * n + i, (j + 1) * n + i) for j in range(n - 1) for i in range(n)]

    def build(canopy=False):
        positions = np.concatenate([low, high, rope])
        edges = grid + [(a + n * n, b + n * n) for a, b in grid] + [(2 * n * n + k, 2 * n * n + k + 1)
                                                                     for k in range(10)]
        fixed = np.zeros(len(positions), bool)
        fixed[2 * n * n] = True
        if canopy:  # a quad 1.5 m wide, pinned at two corners
            corners = np.array([[-0.5, -0.5, 0.02], [1, -0.5, 0.02], [1, 1, 0.02], [-0.5, 1, 0.02]])
            start = len(positions)
            positions = np.concatenate([positions, corners])
            fixed = np.r_[fixed, True, True, False, False]
            edges += [(start + k, start + (k + 1) % 4) for k in range(4)] + [(start, start + 2)]
        mss = ms.MassSpringSystem3d.from_arrays(positions, 0.01, fixed=fixed, springs=np.array(edges),
                                                stiffness=100.0, gravity=(0, 0, -G))
        mss.set_colliders(PLANE_V, PLANE_T, thickness, 0.3)
        return mss, positions

    mss, positions = build()
    moved = mss.move_out_of_colliders()
    assert len(moved) == n * n  # the low sheet's masses, and only those
    after = mss.vertex_positions()
    np.testing.assert_allclose(after[:n * n, 2], OUT * thickness, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(after[n * n:], positions[n * n:])
    mss, positions = build(canopy=True)
    _stays(mss)


def test_moving_out_keeps_velocities_and_needs_colliders():
    mss = one_mass((0.3, 0.2, 0.005), vel=(1.0, 0, 0))
    assert len(mss.move_out_of_colliders()) == 0  # no colliders
    mss.set_colliders(PLANE_V, PLANE_T, 0.02, 0.3)
    mss.move_out_of_colliders()
    assert mss.masses[0].vel == pytest.approx((1.0, 0, 0), abs=0)
    assert len(ms.MassSpringSystem2d().move_out_of_colliders()) == 0
