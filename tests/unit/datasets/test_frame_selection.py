"""GraspNetDataset's frame selection for sampled test runs (tools/test.py --frames /
--frame-stride): a list of frame ids, every k-th frame, clear errors."""
import pytest

from mmgrasp.datasets import GraspNetDataset


def frames_of(dataset):
    return [(d['scene'], d['frame']) for d in map(dataset.get_data_info, range(len(dataset)))]


def test_frame_list_and_stride(synthetic_root):
    every = GraspNetDataset(synthetic_root)
    assert frames_of(every) == [(s, f) for s in (0, 1) for f in range(3)]
    assert frames_of(GraspNetDataset(synthetic_root, frames=[2, 0])) == \
        [(s, f) for s in (0, 1) for f in (0, 2)]
    assert frames_of(GraspNetDataset(synthetic_root, frame_stride=2)) == \
        [(s, f) for s in (0, 1) for f in (0, 2)]
    assert frames_of(GraspNetDataset(synthetic_root, frames=2, frame_stride=2)) == \
        [(0, 0), (1, 0)]
    samples = GraspNetDataset(synthetic_root, frames=[1])
    assert [samples.get_data_info(i)['sample_idx'] for i in range(len(samples))] == [0, 1]
    with pytest.raises(ValueError, match=r'frames \[3\]: scene 0 has 3 frames'):
        GraspNetDataset(synthetic_root, frames=[3])
    with pytest.raises(ValueError, match='frame_stride'):
        GraspNetDataset(synthetic_root, frame_stride=0)
