"""HGGDDataPreprocessor on batches of the session's synthetic frames (320 x 180, input 160 x 90):
every input against the reference's operations redone in numpy/PIL, the targets against the
rules (_hggd_rules.py), the draws, degenerate frames, the options, the host syncs; and the same
batch and training step from the PNG files and from the frame store."""
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.dataset import pseudo_collate
from PIL import Image
from torch.profiler import ProfilerActivity, profile

from _hggd_data_inputs import RecordStore
from _hggd_rules import rules_rectangles, rules_targets
from mmgrasp.analysis import dispatch_count
from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.transforms import hggd
from mmgrasp.models.data_preprocessors import HGGDDataPreprocessor

SIZE = (160, 90)
NUM_POINTS = 3000
TARGETS = ('loc_map', 'cls_mask', 'theta_offset', 'depth_offset', 'width_offset')


pytestmark = pytest.mark.usefixtures('torch_one_thread')


@pytest.fixture(scope='module')
def store():
    """Records for the session frames: 400 rows a frame, none in scene 1 frame 2."""
    stores = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hggd, 'open_grasp_store', lambda reader, *options: stores.setdefault(
            reader.root, RecordStore(reader, 400, counts={(1, 2): 0})))
        patch.setattr(hggd, '_stores', {})
        yield stores


def pipeline(source=None, **grid):
    load = dict(type='LoadRGBDImage', source=source or 'files')
    return [load, dict(type='LoadHGGDGrasps', input_size=SIZE, **grid),
            dict(type='SampleDepthPixels', num_points=NUM_POINTS), dict(type='PackHGGDInputs')]


def make_batch(root, indices=(0, 1, 4, 5), seed=5, epoch=0, test_mode=False, source=None,
               **grid):
    dataset = GraspNetDataset(root, pipeline=pipeline(source, **grid), seed=seed,
                              test_mode=test_mode)
    return pseudo_collate([dataset[(epoch, i)] for i in indices])


@pytest.fixture(scope='module')
def batch(synthetic_root, store):
    return make_batch(synthetic_root)


@pytest.fixture(scope='module')
def trained(batch):
    """The batch through the preprocessor in training mode (read-only)."""
    return HGGDDataPreprocessor(input_size=SIZE)(batch, training=True)['inputs']


def reference_images(rgb, depth):
    """HGGD's get_depth / get_rgb: PIL bicubic, metres, clip(d - mean), / 255, x-major (the
    mean in float64 here, as the preprocessor takes it; see test_depth_mean)."""
    metres = np.array(Image.fromarray(depth.astype(np.float32)).resize(SIZE), np.float32) / 1000.
    normal = np.clip(metres - np.float32(metres.astype(np.float64).mean()), -1, 1)
    colour = np.array(Image.fromarray(rgb).resize(SIZE), np.float32) / 255.
    return np.concatenate([normal.T[None], colour.transpose(2, 1, 0)])


def test_inputs_equal_the_reference_operations(batch, trained):
    inputs = trained
    for b, sample in enumerate(batch['data_samples']):
        rgb = batch['inputs']['rgb'][b].numpy()
        raw = batch['inputs']['depth'][b].numpy()
        np.testing.assert_array_equal(inputs['images'][b].numpy(), reference_images(rgb, raw))
        np.testing.assert_array_equal(inputs['depths'][b].numpy(), raw.T.astype(np.float32))
        k = hggd.REFERENCE_INTRINSICS['realsense']
        np.testing.assert_array_equal(inputs['intrinsics'][b].numpy(), k)
        # PointCloudHelper: float32 rays from float64 (u - cx) / fx, times float32 d / 1000
        pixels = batch['inputs']['point_pixels'][b].numpy()
        u, v = pixels % raw.shape[1], pixels // raw.shape[1]
        z = raw.reshape(-1)[pixels].astype(np.float32) / np.float32(1000.)
        rays = np.stack([((u - k[0, 2]) / k[0, 0]).astype(np.float32),
                         ((v - k[1, 2]) / k[1, 1]).astype(np.float32)], -1)
        np.testing.assert_array_equal(inputs['points'][b].numpy(),
                                      np.concatenate([rays * z[:, None], z[:, None]], -1))
        assert (z > 0).all()
        # to_xyz_maps: nearest depth (F.interpolate), rays of the intrinsics / 16
        nearest = F.interpolate(torch.from_numpy(raw.T.astype(np.float32))[None, None],
                                size=(20, 11), mode='nearest')[0, 0].numpy() / np.float32(1000.)
        factor = 320 / 20
        rx = ((np.arange(20) - k[0, 2] / factor) / (k[0, 0] / factor)).astype(np.float32)
        ry = ((np.arange(11) - k[1, 2] / factor) / (k[1, 1] / factor)).astype(np.float32)
        np.testing.assert_array_equal(inputs['xyz_maps'][b].numpy(), np.stack(
            [rx[:, None] * nearest, ry[None, :] * nearest, nearest]))
        assert inputs['images'][b].shape == (4, 160, 90)


def test_depth_mean(batch):
    """The depth mean is taken in float64 (numpy's float32 pairwise sum differs by an ulp or
    two between versions): the normalised depth stays within 2.4e-7 of numpy's."""
    images = HGGDDataPreprocessor(input_size=SIZE).images(
        torch.stack(batch['inputs']['rgb']), torch.stack(batch['inputs']['depth']).float())
    for b in range(len(images)):
        metres = np.array(Image.fromarray(batch['inputs']['depth'][b].numpy().astype(
            np.float32)).resize(SIZE), np.float32) / 1000.
        numpy_way = np.clip(metres - metres.mean(), -1, 1).T
        assert np.abs(images[b, 0].numpy() - numpy_way).max() <= 2.4e-7


def test_targets_equal_the_rules(synthetic_root, batch, store, trained):
    out = trained
    records = store[synthetic_root]
    for b, sample in enumerate(batch['data_samples']):
        rows = records.frame(sample.scene, sample.frame)
        raw = batch['inputs']['depth'][b].numpy().T.astype(np.float32)
        want = rules_targets(rules_rectangles(rows, 320, 160), raw, SIZE)
        for name in TARGETS:
            np.testing.assert_array_equal(out['targets'][name][b].numpy(), want[name])
        assert out['targets']['cls_mask'][b].any() == (len(rows['thetas_rad']) > 0)
        got = out['grasps'][b]
        assert set(got) == set(hggd.GRASP_FIELDS)
        for key, value in rows.items():
            np.testing.assert_array_equal(got[key].numpy(), value)


def test_no_targets_at_test_time(batch):
    inputs = HGGDDataPreprocessor(input_size=SIZE)(batch, training=False)['inputs']
    assert 'targets' not in inputs and len(inputs['grasps']) == 4


def test_draws_follow_seed_epoch_index(synthetic_root, store, batch):
    """Training: from (seed, epoch, index). Test time: from (seed, scene, camera, frame), so a
    frame draws the same wherever it sits in the run (a stride, a shard)."""
    datasets = {}

    def pixels(seed=5, epoch=0, index=0, test_mode=False, frames=None):
        key = (seed, test_mode, frames)
        if key not in datasets:
            datasets[key] = GraspNetDataset(synthetic_root, pipeline=pipeline(), seed=seed,
                                            test_mode=test_mode, frames=frames)
        return datasets[key][(epoch, index)]['inputs']['point_pixels']
    first = batch['inputs']['point_pixels'][0]
    assert torch.equal(first, pixels())
    assert not torch.equal(first, pixels(epoch=1))
    assert not torch.equal(first, pixels(seed=6))
    # frame 2 of scene 0: sample 2 of the full run, sample 0 of a run of frames [2]
    assert torch.equal(pixels(test_mode=True, index=2), pixels(test_mode=True, frames=(2,)))
    assert not torch.equal(pixels(test_mode=True, index=2), pixels(index=2))


def _degenerate_batch(batch):
    """The batch with frame 0 emptied: no depth reading, no grasp row."""
    data = dict(inputs={k: list(v) for k, v in batch['inputs'].items()},
                data_samples=list(batch['data_samples']))
    data['inputs']['depth'][0] = torch.zeros_like(data['inputs']['depth'][0])
    data['inputs']['point_pixels'][0] = torch.zeros_like(data['inputs']['point_pixels'][0])
    sample = data['data_samples'][0].clone()
    sample.hggd_grasps = {k: v[:0] for k, v in sample.hggd_grasps.items()}
    sample.hggd_rects = {k: v[:0] for k, v in sample.hggd_rects.items()}
    data['data_samples'][0] = sample
    return data


def test_degenerate_frames_are_finite(batch, trained):
    """No depth and no grasp: finite inputs, a zero cloud, all-zero targets; the other frames
    unchanged."""
    full = trained
    out = HGGDDataPreprocessor(input_size=SIZE)(_degenerate_batch(batch), training=True)['inputs']
    for key in ('images', 'depths', 'points', 'xyz_maps'):
        assert torch.isfinite(out[key]).all()
        assert torch.equal(out[key][1:], full[key][1:])
    assert not out['points'][0].any() and not out['xyz_maps'][0].any()
    assert not out['images'][0, 0].any()  # no depth: d - mean(d) = 0
    for name in TARGETS:
        assert torch.isfinite(out['targets'][name]).all()
        assert not out['targets'][name][0].any()
        assert torch.equal(out['targets'][name][1:], full['targets'][name][1:])


def test_empty_record_from_the_store(synthetic_root, store):
    data = make_batch(synthetic_root, indices=(5,))
    assert (data['data_samples'][0].scene, data['data_samples'][0].frame) == (1, 2)
    out = HGGDDataPreprocessor(input_size=SIZE)(data, training=True)['inputs']
    assert all(not out['targets'][n].any() for n in TARGETS)
    assert out['grasps'][0]['thetas_rad'].shape == (0,)


@pytest.mark.parametrize('option, value, changed', [
    ('anchor_w', 30., {'width_offset'}), ('anchor_z', 10., {'depth_offset'}),
    ('heatmap_radius', 6, {'loc_map'})])
def test_options_change_what_they_should(batch, trained, option, value, changed):
    base = trained['targets']
    other = HGGDDataPreprocessor(input_size=SIZE, **{option: value})(
        batch, training=True)['inputs']['targets']
    assert {n for n in TARGETS if not torch.equal(base[n], other[n])} == changed


def test_grid_options_change_the_shapes(synthetic_root, store, batch):
    with pytest.raises(ValueError, match='same input_size, ratio and anchor_k'):
        HGGDDataPreprocessor(input_size=SIZE, ratio=10, anchor_k=4)(batch, training=True)
    other = make_batch(synthetic_root, indices=(0, 1), ratio=10, anchor_k=4)
    inputs = HGGDDataPreprocessor(input_size=SIZE, ratio=10, anchor_k=4)(
        other, training=True)['inputs']
    assert inputs['targets']['cls_mask'].shape == (2, 4, 16, 9)
    assert inputs['xyz_maps'].shape == (2, 3, 16, 9)
    smaller = HGGDDataPreprocessor(input_size=(80, 45))(batch, training=False)['inputs']
    assert smaller['images'].shape == (4, 4, 80, 45)


def test_factor_depth(batch):
    """Depth is brought to millimetres with the frames' factor_depth; one factor a batch."""
    pre = HGGDDataPreprocessor(input_size=SIZE)
    base = pre(batch, training=False)['inputs']
    data = dict(inputs=batch['inputs'], data_samples=[s.clone() for s in batch['data_samples']])
    for s in data['data_samples']:
        s.set_metainfo(dict(factor_depth=10000.))
    tenth = pre(data, training=False)['inputs']
    torch.testing.assert_close(tenth['depths'], base['depths'] * 0.1, rtol=0, atol=0)
    data['data_samples'][0].set_metainfo(dict(factor_depth=1000.))
    with pytest.raises(ValueError, match='one positive factor_depth'):
        pre(data, training=False)


def test_no_host_sync(batch):
    """The whole forward, targets included, makes no host sync as the launch counter counts
    them (the "maintain" loop's length comes from the worker, not from the device)."""
    pre = HGGDDataPreprocessor(input_size=SIZE)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        pre(batch, training=True)
    parts = dispatch_count.count_events(prof.events())
    assert sum(p['syncs'] for p in parts.values()) == 0


def test_frame_store_equals_png_files(synthetic_root, store):
    """The same batch, bit for bit, whether the images come from the PNG files or from the
    frame store."""
    pre = HGGDDataPreprocessor(input_size=SIZE)
    files = pre(make_batch(synthetic_root, source='files'), training=True)['inputs']
    frames = pre(make_batch(synthetic_root, source='frames'), training=True)['inputs']
    ours = pre(make_batch(synthetic_root), training=True)['inputs']
    for key in ('images', 'depths', 'points', 'xyz_maps', 'intrinsics'):
        assert torch.equal(files[key], frames[key]) and torch.equal(files[key], ours[key])
    for name in TARGETS:
        assert torch.equal(files['targets'][name], frames['targets'][name])


def test_frame_store_and_png_files_give_the_same_training_step(synthetic_root, store):
    """Preprocessor, both networks, every loss and every gradient: equal, bit for bit, and
    finite, whether the images come from the PNG files or from the frame store."""
    from _hggd_inputs import small_hggd
    size = (128, 72)  # an AnchorGraspNet size (the preprocessor tests' 160 x 90 is not)

    def step(source):
        dataset = GraspNetDataset(synthetic_root, seed=5, pipeline=[
            dict(type='LoadRGBDImage', source=source),
            dict(type='LoadHGGDGrasps', input_size=size),
            dict(type='SampleDepthPixels', num_points=NUM_POINTS), dict(type='PackHGGDInputs')])
        torch.manual_seed(0)
        model = small_hggd(data_preprocessor=dict(type='HGGDDataPreprocessor', input_size=size))
        data = model.data_preprocessor(pseudo_collate([dataset[(0, i)] for i in (0, 1)]), True)
        losses = model.loss(data['inputs'], data['data_samples'])
        sum(losses.values()).backward()
        return losses, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

    (files, files_grads), (frames, frames_grads) = step('files'), step('frames')
    assert all(torch.isfinite(v) for v in files.values()) and files['loss_loc'] > 0
    assert all(torch.equal(files[k], frames[k]) for k in files), (files, frames)
    assert files_grads.keys() == frames_grads.keys() and len(files_grads) > 10
    assert all(torch.equal(files_grads[n], frames_grads[n]) for n in files_grads)




def test_one_object(synthetic_root):
    """A frame whose record holds one object's rows: finite targets, positive cells only where
    that object's centres fall."""
    def first_object(rows):
        return {k: v[rows['object_ids'] == rows['object_ids'][0]] for k, v in rows.items()}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hggd, 'open_grasp_store', lambda reader, *options: types.SimpleNamespace(
            frame=lambda s, f: first_object(RecordStore(reader, 400).frame(s, f))))
        patch.setattr(hggd, '_stores', {})
        data = make_batch(synthetic_root, indices=(0,))
    rects = data['data_samples'][0].hggd_rects
    assert len(set(data['data_samples'][0].hggd_grasps['object_ids'].tolist())) == 1
    out = HGGDDataPreprocessor(input_size=SIZE)(data, training=True)['inputs']['targets']
    assert all(torch.isfinite(out[n]).all() for n in TARGETS)
    cells = (rects['centers'] // 8).long()
    occupied = torch.zeros(20, 11, dtype=torch.bool)
    occupied[cells[:, 0], cells[:, 1]] = True
    assert out['cls_mask'][0].any() and not out['cls_mask'][0][:, ~occupied].any()


def test_graspclutter6d_frames(gc6d_root):
    """Another dataset's camera: its own intrinsics (no hard-coded ones) and its depth factor
    (Azure Kinect: 10 000 a metre)."""
    with pytest.MonkeyPatch.context() as patch:
        stores = {}
        patch.setattr(hggd, 'open_grasp_store', lambda reader, *options: stores.setdefault(
            reader.root, RecordStore(reader, 200)))
        patch.setattr(hggd, '_stores', {})
        dataset = GraspNetDataset(gc6d_root, camera='azure-kinect', pipeline=pipeline(), seed=1)
        data = pseudo_collate([dataset[0], dataset[1]])
    reader = dataset.reader
    out = HGGDDataPreprocessor(input_size=SIZE)(data, training=True)['inputs']
    for b, sample in enumerate(data['data_samples']):
        meta = reader.load_meta(sample.scene, sample.frame)
        assert meta.factor_depth == 10000.
        np.testing.assert_array_equal(out['intrinsics'][b].numpy(), meta.intrinsics)
        raw = data['inputs']['depth'][b].numpy().T.astype(np.float32)
        np.testing.assert_array_equal(out['depths'][b].numpy(), raw * np.float32(0.1))
    assert all(torch.isfinite(v).all() for v in out['targets'].values())
    assert out['targets']['cls_mask'].any()
