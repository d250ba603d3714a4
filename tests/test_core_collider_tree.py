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
    distance, normal, crosses = ms._core._collider_queries(vertices, triangles, thickness,
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
