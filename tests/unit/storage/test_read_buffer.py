"""The pooled read buffer is reused by the next read; what a gather returned on the CPU must
not be a view of it (a caller may keep a batch's tensors across gathers: prefetching, a hook)."""
import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.labels.store import build_label_store
from mmgrasp.storage.readers import StoreGrids, common
from mmgrasp.structures import gather_grids
from mmgrasp.structures.grasp_labels import ObjectGraspLabels


def test_what_to_device_returns_survives_the_next_read():
    buffer = common.ReadBuffer()
    host, raw = buffer.acquire(64)
    raw[:] = 7
    kept = buffer.to_device(host, torch.device('cpu'))
    host2, raw2 = buffer.acquire(64)
    raw2[:] = 9
    assert torch.equal(kept, torch.full((64,), 7, dtype=torch.uint8))
    assert torch.equal(buffer.to_device(host2, torch.device('cpu')),
                       torch.full((64,), 9, dtype=torch.uint8))


@pytest.fixture
def labels(synthetic_root, tmp_path):
    store = build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))
    out = []
    for scene, entry in sorted(store.scenes.items()):
        for instance, obj in enumerate(entry.object_ids):
            rows = np.arange(store.objects[obj].num_points, dtype=np.int32)
            record = StoreGrids(store=store.path, object_id=obj, rows=rows, grid=store.grid,
                                collision_mode='zero_scores', has_tolerance=True, scene=scene,
                                collision_offset=entry.row_offsets[instance])
            out.append(ObjectGraspLabels(points=torch.from_numpy(store.points(obj)),
                                         pose=torch.eye(4)[:3], object_id=obj,
                                         collision_mode='zero_scores', deferred=record))
    return out


@pytest.mark.parametrize('name', ['scores', 'widths', 'tolerance'])
@pytest.mark.parametrize('with_views', [False, True])
def test_a_kept_batch_is_not_overwritten_by_the_next_gather(labels, name, with_views):
    counts = torch.tensor([len(label.points) for label in labels])
    batches = []
    for seed in (0, 1):
        g = torch.Generator().manual_seed(seed)
        owner = torch.randint(len(labels), (200,), generator=g)
        rows = (torch.rand(200, generator=g) * counts[owner]).long()
        views = torch.randint(labels[0].deferred.grid[0], (200,), generator=g)
        batches.append((owner, rows, views if with_views else None))
    first = gather_grids(labels, name, *batches[0])
    snapshot = first.clone()
    second = gather_grids(labels, name, *batches[1])
    assert not torch.equal(second, snapshot)  # the second read wrote other values
    assert torch.equal(first, snapshot)
