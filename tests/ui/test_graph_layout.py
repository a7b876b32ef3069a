"""ui/models/graph_layout.py (pure numpy, no Qt): deterministic, finite, structure-revealing, incremental and cancellable."""

from __future__ import annotations

import numpy as np
import pytest

import ui.models.graph_layout as gl
from ui.models.graph_layout import bounds, components, force_layout, pack_components


def tree(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([(i, int(rng.integers(0, i))) for i in range(1, n)], dtype=np.int64)


def mean_edge(pos, edges) -> float:
    return float(np.linalg.norm(pos[edges[:, 0]] - pos[edges[:, 1]], axis=1).mean())


def mean_random_pair(pos, seed=1) -> float:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(pos), size=(2, 2000))
    keep = a != b
    return float(np.linalg.norm(pos[a[keep]] - pos[b[keep]], axis=1).mean())


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_graphs(n):
    r = force_layout(n, [(0, 1)] if n == 2 else [])
    assert r.pos.shape == (n, 2)
    assert np.isfinite(r.pos).all()
    if n == 2:
        assert np.linalg.norm(r.pos[0] - r.pos[1]) > 0


def test_same_inputs_same_layout():
    e = tree(150)
    a = force_layout(150, e, seed=5).pos
    b = force_layout(150, e, seed=5).pos
    c = force_layout(150, e, seed=6).pos
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("n", [120, 900])  # all-pairs repulsion, then the grid
def test_connected_nodes_end_up_closer_than_random_pairs(n):
    e = tree(n)
    r = force_layout(n, e)
    assert np.isfinite(r.pos).all()
    assert mean_edge(r.pos, e) < 0.35 * mean_random_pair(r.pos)
    # no collapse: nodes keep a minimum spread
    lo_x, lo_y, hi_x, hi_y = bounds(r.pos)
    assert hi_x - lo_x > 3 and hi_y - lo_y > 3


def test_grid_repulsion_approximates_all_pairs(monkeypatch):
    n = 700
    pos = np.random.default_rng(2).normal(scale=8.0, size=(n, 2))
    exact = np.zeros((n, 2))
    gl._repulsion_exact(pos, 1.0, exact)
    grid = np.zeros((n, 2))
    gl._repulsion_grid(pos, 1.0, grid, gl._grid_side(pos, n))
    cos = np.einsum("ij,ij->i", exact, grid) / (np.linalg.norm(exact, axis=1) * np.linalg.norm(grid, axis=1) + 1e-12)
    rel = np.linalg.norm(exact - grid, axis=1) / (np.linalg.norm(exact, axis=1) + 1e-12)
    assert np.median(cos) > 0.98
    assert np.median(rel) < 0.2


def test_incremental_layout_keeps_old_nodes_near_their_places():
    e = tree(300)
    first = force_layout(300, e).pos
    # grow the graph by 20 nodes hanging off existing ones
    extra = np.array([(300 + i, int(i * 7 % 300)) for i in range(20)])
    e2 = np.vstack([e, extra])
    initial = np.full((320, 2), np.nan)
    initial[:300] = first
    second = force_layout(320, e2, initial=initial).pos
    extent = float(np.ptp(first, axis=0).max())
    moved = np.linalg.norm(second[:300] - first, axis=1)
    assert np.median(moved) < 0.1 * extent
    # new nodes start next to their anchors and stay near them
    d_new = np.linalg.norm(second[300:] - second[extra[:, 1]], axis=1)
    assert np.median(d_new) < 0.25 * extent


def test_pinned_nodes_do_not_move():
    e = tree(80)
    start = np.random.default_rng(0).normal(size=(80, 2)) * 5
    pinned = np.zeros(80, dtype=bool)
    pinned[:10] = True
    r = force_layout(80, e, initial=start, pinned=pinned)
    assert np.array_equal(r.pos[:10], start[:10])
    assert not np.allclose(r.pos[10:], start[10:])


def test_should_stop_ends_the_run_early_and_progress_is_reported():
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    seen: list[float] = []
    r = force_layout(200, tree(200), iterations=100, should_stop=stop, progress=lambda f, m: seen.append(f))
    assert r.stopped and r.iterations == 5
    assert np.isfinite(r.pos).all()
    full = force_layout(200, tree(200), iterations=40, progress=lambda f, m: seen.append(f))
    assert not full.stopped and full.iterations == 40
    assert seen and all(0.0 <= f <= 1.0 for f in seen) and seen[-1] == 1.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        force_layout(3, [(0, 5)])
    with pytest.raises(ValueError):
        force_layout(3, [(0, 1), (1, 2)], weights=[1.0])


def test_self_loops_and_duplicate_edges_are_harmless():
    r = force_layout(4, [(0, 0), (0, 1), (0, 1), (2, 3)])
    assert np.isfinite(r.pos).all()


def test_components_are_labelled_by_their_smallest_node():
    labels = components(7, [(1, 2), (2, 3), (5, 6), (6, 5)])
    assert labels.tolist() == [0, 1, 1, 1, 4, 5, 5]
    long_chain = [(i + 1, i) for i in range(500)]  # labels must travel the whole diameter
    assert set(components(501, long_chain).tolist()) == {0}


def test_disconnected_components_are_packed_side_by_side_keeping_their_shape():
    # three stars of different sizes and two isolated nodes
    edges, start = [], 0
    for size in (12, 7, 4):
        edges += [(start, start + j) for j in range(1, size)]
        start += size
    n = start + 2
    free = force_layout(n, edges, pack=False).pos
    packed = force_layout(n, edges, aspect=1.6).pos
    labels = components(n, edges)
    boxes = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        d_free = np.linalg.norm(free[idx, None] - free[None, idx], axis=-1)
        d_packed = np.linalg.norm(packed[idx, None] - packed[None, idx], axis=-1)
        np.testing.assert_allclose(d_free, d_packed, atol=1e-9)  # moved rigidly
        boxes.append((packed[idx].min(axis=0), packed[idx].max(axis=0)))
    for i, (lo_a, hi_a) in enumerate(boxes):
        for lo_b, hi_b in boxes[i + 1:]:
            overlap = np.all(lo_a <= hi_b) and np.all(lo_b <= hi_a)
            assert not overlap
    # packing makes the picture compact: far smaller than the free layout's spread
    assert np.ptp(packed, axis=0).prod() < np.ptp(free, axis=0).prod()
    # and an incremental run never repacks (positions the operator knows stay put)
    again = force_layout(n, edges, initial=packed, iterations=1)
    assert np.linalg.norm(again.pos - packed, axis=1).max() < 1.0


def test_pack_is_a_no_op_for_one_component():
    pos = np.random.default_rng(1).normal(size=(5, 2))
    assert np.array_equal(pack_components(pos, np.zeros(5, dtype=int)), pos)
