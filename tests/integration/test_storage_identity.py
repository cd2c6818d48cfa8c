"""The synthetic dataset read once per storage: identical samples, and dense() of deferred
labels equals the dense labels bit for bit (deferred labels of the visible-label recipe after
the test the data preprocessor runs, on the CPU here)."""
import pytest
import torch

from mmgrasp.structures.label_visibility import resolved_grasp_labels


def _bytes(t):
    return None if t is None else t.numpy().tobytes()


@pytest.mark.parametrize('options', [dict(), dict(collision='mask', tolerance=True),
                                     dict(collision='none', visible_only=True)])
def test_both_storages_give_identical_samples(make_dataset, options):
    dense, deferred = make_dataset('dense', **options), make_dataset('deferred', **options)
    for epoch in (0, 1):
        for index in range(len(dense)):
            a, b = dense[(epoch, index)], deferred[(epoch, index)]
            for key in a['inputs']:
                assert torch.equal(a['inputs'][key], b['inputs'][key]), key
            assert a['data_samples'].metainfo == b['data_samples'].metainfo
            labels_a = a['data_samples'].grasp_labels
            labels_b = resolved_grasp_labels(b['data_samples'])
            assert len(labels_a) == len(labels_b) > 0
            for la, lb in zip(labels_a, labels_b):
                assert not la.is_deferred and lb.is_deferred and lb.scores is None
                assert la.object_id == lb.object_id
                assert torch.equal(la.points, lb.points) and torch.equal(la.pose, lb.pose)
                expanded = lb.dense()
                for name in ('scores', 'widths', 'collision', 'tolerance'):
                    assert _bytes(getattr(la, name)) == _bytes(getattr(expanded, name)), name


def test_epochs_draw_different_samples(make_dataset):
    dataset = make_dataset('deferred')
    a, b = dataset[(0, 1)], dataset[(1, 1)]
    assert not torch.equal(a['inputs']['points'], b['inputs']['points'])
