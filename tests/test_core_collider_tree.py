"""The colliders' box tree (native/contact/contact.cpp, BoxTree) finds what brute force finds.

Every contact test goes through the tree; this one checks the tree alone, against a search
over all triangles, on triangle soups where many boxes overlap and most points are near
several triangles."""
import numpy as np
import pytest

import mass_spring as ms


def closest_distances(points, a, b, c):
    """Distance from each point to each triangle (points x triangles), by Ericson's
    closest-point regions, vectorized."""
    p = points[:, None, :]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        # face interior by default, then the edges and corners override it
        denom = va + vb + vc
        v, w = vb / denom, vc / denom
        q = a + v[..., None] * ab + w[..., None] * ac
        regions = [
            (d1 <= 0) & (d2 <= 0), (d3 >= 0) & (d4 <= d3), (d6 >= 0) & (d5 <= d6),
        ]
        corners = [a + 0 * p, b + 0 * p, c + 0 * p]
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        edges = [
            ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + t_ab[..., None] * ab),
            ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + t_ac[..., None] * ac),
            ((va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), b + t_bc[..., None] * (c - b)),
        ]
    for mask, point in reversed(edges):
        q = np.where(mask[..., None], point, q)
    for mask, point in reversed(list(zip(regions, corners))):
        q = np.where(mask[..., None], point, q)
    return np.linalg.norm(p - q, axis=-1)


def segment_crosses(p0, p1, a, b, c):
    """Whether each segment crosses each triangle's interior (points x triangles)."""
    n = np.cross(b - a, c - a)
    s0 = (n * (p0[:, None] - a)).sum(-1)
    s1 = (n * (p1[:, None] - a)).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = p0[:, None] + (s0 / (s0 - s1))[..., None] * (p1 - p0)[:, None]
    inside = np.ones(s0.shape, bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= (n * np.cross(v - u, x - u)).sum(-1) >= 0
    return (s0 * s1 < 0) & inside


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_box_tree_finds_what_brute_force_finds(seed):
    rng = np.random.default_rng(seed)
    # a soup of 300 triangles of mixed sizes in the unit cube
    centres = rng.random((300, 1, 3))
    sizes = rng.choice([0.02, 0.1, 0.4], size=(300, 1, 1))
    corners = centres + sizes * rng.standard_normal((300, 3, 3))
    vertices = corners.reshape(-1, 3)
    triangles = np.arange(len(vertices)).reshape(-1, 3)
    thickness = 0.05
    points = rng.random((2000, 3)) * 1.2 - 0.1
    ends = points + 0.15 * rng.standard_normal((2000, 3))
    distance, normal, crosses, _ = ms._core._collider_queries(vertices, triangles, thickness,
                                                              points, ends)
    a, b, c = corners[:, 0], corners[:, 1], corners[:, 2]
    exact = closest_distances(points, a, b, c).min(axis=1)
    near = exact < thickness
    assert 200 < near.sum() < 1900  # both kinds, plenty of each
    # every point within the thickness is found, at the nearest triangle's distance
    np.testing.assert_array_equal(np.isfinite(distance), near)
    np.testing.assert_allclose(distance[near], exact[near], rtol=0, atol=1e-12)
    # the normal leads from a point of the soup to the point
    foot = points[near] - distance[near, None] * normal[near]
    np.testing.assert_allclose(np.linalg.norm(normal[near], axis=1), 1.0, atol=1e-12)
    assert closest_distances(foot, a, b, c).min(axis=1).max() < 1e-9
    # crossings: the tree misses none and invents none (segments grazing an edge aside)
    brute = segment_crosses(points, ends, a, b, c).any(axis=1)
    assert brute.sum() > 100
    np.testing.assert_array_equal(crosses, brute)


def test_collider_queries_check_their_input():
    with pytest.raises(ValueError, match="shape"):
        ms._core._collider_queries(np.zeros((3, 3)), [[0, 1, 2]], 0.1, np.zeros((2, 3)),
                                   np.zeros((3, 3)))


def _contacts(vertices, triangles, points, thickness=0.1):
    points = np.asarray(points, float)
    return ms._core._collider_queries(np.asarray(vertices, float), triangles, thickness, points, points)[3]


SQUARE_V = [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]]
SQUARE_T = [[0, 1, 2], [0, 2, 3]]
# The same square with each triangle's own vertices: a mesh split along its diagonal.
SPLIT_V = [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, -1, 0], [1, 1, 0], [-1, 1, 0]]
SPLIT_T = [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("vertices, triangles", [(SQUARE_V, SQUARE_T), (SPLIT_V, SPLIT_T)])
def test_a_plane_is_touched_once_even_over_its_diagonal(vertices, triangles):
    # Over the diagonal each triangle's nearest point is on it: one contact, not two; beside
    # it one triangle's nearest point is inside it, the other's on the diagonal: one.
    points = [[0.2, 0.3, 0.05], [0.0, 0.0, 0.05], [0.01, 0.0, 0.05], [1.0, 1.0, 0.05], [1.05, 0.0, 0.05],
              [0.3, 0.3, -0.05]]
    np.testing.assert_array_equal(_contacts(vertices, triangles, points), [1] * len(points))
    assert _contacts(vertices, triangles, [[0.2, 0.3, 0.2]])[0] == 0  # beyond the thickness


def test_a_concave_crease_is_touched_on_both_faces_and_a_convex_edge_once():
    # A V trough: two planes through the x axis rising at 30 degrees.
    c, s = np.cos(np.radians(30)), np.sin(np.radians(30))
    v = [[-1, 0, 0], [1, 0, 0], [1, c, s], [-1, c, s], [1, -c, s], [-1, -c, s]]
    t = [[0, 1, 2], [0, 2, 3], [1, 0, 5], [1, 5, 4]]
    inside, outside = [0.1, 0.0, 0.08], [0.1, 0.0, -0.08]
    np.testing.assert_array_equal(_contacts(v, t, [inside, outside]), [2, 1])


def test_inside_a_box_its_corner_is_three_faces_and_outside_one_point():
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    np.testing.assert_array_equal(_contacts(corners, tris, [[0.05, 0.05, 0.05], [-0.05, -0.05, -0.05],
                                                            [0.5, -0.05, -0.05], [0.5, 0.5, -0.05]]),
                                  [3, 1, 1, 1])


def test_a_segment_along_a_seam_crosses_the_surface():
    # A segment through the edge two triangles share meets each only up to round-off; it
    # must still cross (a mass falling along a sphere's seam passed through it).
    v = np.array([[0, 0, 0], [1, 0, 0.3], [0, 1, 0.1], [1, 1, 0.2]], float) * 0.7 + 0.1
    t = [[0, 1, 3], [0, 3, 2]]
    for s in np.linspace(0.05, 0.95, 40):  # points on the shared edge 0-3
        on_edge = v[0] + s * (v[3] - v[0])
        start, end = on_edge + [0, 0, 0.3], on_edge - [0, 0, 0.3]
        assert ms._core._collider_queries(v, t, 0.01, start[None], end[None])[2][0]


def test_a_duplicated_collider_is_touched_once_up_to_and_across_its_edges():
    # The same square given twice (a duplicated collider object): each face once, so that
    # the force does not halve as a mass crosses an edge.
    square = np.array(SQUARE_V, float)
    twice_v, twice_t = np.vstack([square, square]), np.vstack([SQUARE_T, np.array(SQUARE_T) + 4])
    points = [[x, 0.0, 0.05] for x in (0.999, 1.0, 1.001)] + [[0.3, 0.2, 0.05], [0.0, 0.0, 0.05]]
    np.testing.assert_array_equal(_contacts(twice_v, twice_t, points), [1] * len(points))


def test_round_off_does_not_touch_a_plane_twice_over_any_diagonal():
    # Convex quads split along a diagonal at any angle, tilted anyhow: a point over the
    # diagonal (where both triangles' feet may come out inside by round-off) touches once.
    rng = np.random.default_rng(0)
    for _ in range(100):
        q = np.c_[rng.random((4, 2)) * 2 - 1, np.zeros(4)]
        centre = q.mean(0)
        q = q[np.argsort(np.arctan2(q[:, 1] - centre[1], q[:, 0] - centre[0]))]
        turn = np.linalg.qr(rng.standard_normal((3, 3)))[0]
        corners = q @ turn.T
        s = rng.random(50)
        points = corners[0] + s[:, None] * (corners[2] - corners[0]) + 0.05 * turn[:, 2]
        np.testing.assert_array_equal(_contacts(corners, [[0, 1, 2], [0, 2, 3]], points), 1)
