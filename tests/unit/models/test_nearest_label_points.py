"""NearestLabelAssigner.nearest: each seed's nearest label point of its own frame, sliced by the
host counts ``GraspLabelBatch.frame_points`` (no device read) or, without them, found on the
device; both equal a brute-force search, a frame without label points keeps distance inf."""
import numpy as np
import torch

from mmgrasp.models.assigners import NearestLabelAssigner
from mmgrasp.structures.label_batch import GraspLabelBatch


def _batch(frame_objects, points_per_object, with_counts, seed=0):
    g = torch.Generator().manual_seed(seed)
    object_frame = torch.tensor([b for b, n in enumerate(frame_objects) for _ in range(n)])
    O = len(object_frame)
    counts = torch.tensor(points_per_object[:O])
    point_object = torch.repeat_interleave(torch.arange(O), counts)
    poses = torch.cat([torch.eye(3).expand(O, 3, 3), torch.rand(O, 3, 1, generator=g)], dim=2)
    frame_points = tuple(int(counts[object_frame == b].sum()) for b in range(len(frame_objects)))
    return GraspLabelBatch(
        objects=[None] * O, points=torch.rand(len(point_object), 3, generator=g),
        point_object=point_object, point_row=torch.zeros_like(point_object), poses=poses,
        object_frame=object_frame, object_ids=torch.arange(O), num_frames=len(frame_objects),
        frame_points=frame_points if with_counts else ())


def test_nearest_uses_only_the_seeds_own_frame():
    assigner = NearestLabelAssigner()
    seeds = torch.rand(3, 50, 3, generator=torch.Generator().manual_seed(1))
    results = []
    for with_counts in (True, False):
        labels = _batch([2, 0, 3], [7, 5, 9, 4, 6], with_counts)
        results.append(assigner.nearest(seeds, labels)[:2])
    assert all(torch.equal(a, b) for a, b in zip(*results))
    index, distance = results[0]
    camera = labels.camera_points().numpy()
    frame = labels.object_frame[labels.point_object].numpy()
    for b in (0, 2):
        own = np.flatnonzero(frame == b)
        d = np.linalg.norm(seeds[b].numpy()[:, None] - camera[own][None], axis=-1)
        np.testing.assert_array_equal(index[b].numpy(), own[d.argmin(axis=1)])
        np.testing.assert_allclose(distance[b].numpy(), d.min(axis=1), rtol=1e-6)
    assert torch.isinf(distance[1]).all() and (index[1] == 0).all()
