"""HGGD's 3-D inputs: kNN feature fusion and the local regions (ball of the predicted width,
FPS to the region size from a random start, resampling of small regions, dropping of tiny
ones, jitter) against numpy written from the rules; draws per frame."""
import numpy as np
import torch

from mmgrasp.models.utils.hggd_regions import crop_regions, fuse_features


def np_fps(points, num, start):
    picks, dist = [start], np.full(len(points), np.inf)
    for _ in range(num - 1):
        dist = np.minimum(dist, ((points - points[picks[-1]]) ** 2).sum(1))
        picks.append(int(np.argmax(dist)))
    return picks


def test_fusion_is_the_max_over_the_k_nearest_map_points():
    rng = np.random.default_rng(0)
    xyz_map = rng.normal(0, 1, (2, 3, 6, 4))
    xyz_map[0, :, 0, 0] = 0  # a zero-depth cell, at the origin, is a neighbour like any
    features = rng.normal(0, 1, (2, 5, 6, 4))
    points = rng.normal(0, 1, (2, 40, 3))
    fused = fuse_features(*(torch.from_numpy(a).float() for a in (points, features, xyz_map)),
                          k=3).numpy()
    for b in range(2):
        ref = xyz_map[b].reshape(3, -1).T
        feats = features[b].reshape(5, -1).T
        for i, p in enumerate(points[b]):
            near = np.argsort(((ref - p) ** 2).sum(1))[:3]
            np.testing.assert_allclose(fused[b, i], feats[near].max(0), rtol=1e-6)


def cluster_scene():
    """Frame 0: 100 points within 2 cm of centre 0, 10 near centre 1, 3 near centre 2; a
    frame 1 with 60 points near centre 3. Features: the point's index."""
    rng = np.random.default_rng(1)
    centres = np.array([[0, 0, 0.5], [0.2, 0, 0.5], [0, 0.2, 0.5], [0, 0, 0.6]])
    cloud = np.full((2, 200, 3), 5.0)
    sizes = [(0, 0, 100), (0, 1, 10), (0, 2, 3), (1, 3, 60)]
    used = [0, 0]
    for frame, c, n in sizes:
        offsets = rng.normal(0, 1, (n, 3))
        offsets *= (rng.uniform(0, 0.019, n) / np.linalg.norm(offsets, axis=1))[:, None]
        cloud[frame, used[frame]:used[frame] + n] = centres[c] + offsets
        used[frame] += n
    cloud[:, -20:] = rng.uniform(-1, 1, (2, 20, 3)) + 3  # far away
    features = np.broadcast_to(np.arange(200, dtype=np.float32)[None, :, None], (2, 200, 2))
    return (torch.from_numpy(cloud).float(), torch.from_numpy(features.copy()),
            torch.from_numpy(centres), torch.tensor([0, 0, 0, 1]), np.array([0, 0, 0, 1]),
            torch.full((4,), 0.02))


def generators(*seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def test_regions_follow_the_rules():
    cloud, feats, centres, frame, host, radius = cluster_scene()
    regions, keep = crop_regions(cloud, feats, centres, frame, host, radius, generators(0, 1),
                                 num_points=32, min_points=4, jitter=0.0)
    assert keep.tolist() == [0, 1, 3] and regions.shape == (3, 32, 5)
    for r, c in enumerate(keep):
        b = int(frame[c])
        index = regions[r, :, 3].long().numpy()
        points = cloud[b, index].double().numpy()
        assert (np.linalg.norm(points - centres[c].numpy(), axis=1) < 0.02).all()
        np.testing.assert_allclose(regions[r, :, :3].numpy(), points - centres[c].numpy(),
                                   atol=1e-7)
    big = regions[0, :, 3].long().numpy()
    assert len(set(big.tolist())) == 32  # FPS: distinct points
    inside = np.flatnonzero(np.linalg.norm(cloud[0].double().numpy() - centres[0].numpy(),
                                           axis=1) < 0.02)
    region = cloud[0, inside].numpy()
    start = int(np.flatnonzero(inside == big[0])[0])
    assert inside[np_fps(region, 32, start)].tolist() == big.tolist()
    small = regions[1, :, 3].long().numpy()
    assert len(set(small.tolist())) <= 10  # resampled with replacement from its 10 points


def test_draws_random_start_jitter_and_frame_independence():
    cloud, feats, centres, frame, host, radius = cluster_scene()
    run = lambda gens, jitter=5e-4, c=cloud: crop_regions(  # noqa: E731
        c, feats, centres, frame, host, radius, gens, 32, 4, jitter)[0]
    first = run(generators(0, 1))
    assert torch.equal(first, run(generators(0, 1)))
    starts = {int(run(generators(s, 1), 0.0)[0, 0, 3]) for s in range(12)}
    assert len(starts) > 6  # the FPS start is drawn, not the first point
    index = first[..., 3].long()
    original = torch.stack([cloud[b, index[r]] - centres[c].float() for r, (b, c) in
                            enumerate([(0, 0), (0, 1), (1, 3)])])
    noise = first[..., :3] - original  # each point's own N(0, 5e-4)
    assert 3e-4 < float(noise.std()) < 7e-4 and float(noise.abs().max()) < 4e-3
    other = cloud.clone()
    other[1, :100] += 0.001  # frame 1 changes: frame 0's regions do not
    changed = run(generators(0, 1), c=other)
    assert torch.equal(changed[:2], first[:2]) and not torch.equal(changed[2], first[2])
    assert not torch.equal(run(generators(0, 2))[2], first[2])


def test_no_region_left():
    cloud, feats, centres, frame, host, radius = cluster_scene()
    regions, keep = crop_regions(cloud, feats, centres, frame, host, radius * 0.01,
                                 generators(0, 1), 32, 4)
    assert regions.shape == (0, 32, 5) and len(keep) == 0
