"""The launch counter (mmgrasp/analysis/dispatch_count.py): a known number of ops added to a
part changes that part's counts by exactly that number, kernel scopes charge what they say,
and the sparse U-Net's counts are those of its design (two host syncs, launches independent of
the kernel volume)."""
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from mmgrasp.analysis import dispatch_count as dispatch
from mmgrasp.models.backbones.sparse_unet import SparseUNet14
from mmgrasp.ops import SparseConv3d, voxelize
from mmgrasp.models.utils import PartTimer
from mmgrasp.ops.kernel_scope import kernel_scope

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _cloud(batch: int = 2, n: int = 1500) -> torch.Tensor:
    """A tilted plane patch, 0.3 m wide, with noise: a surface, as a camera sees it."""
    gen = torch.Generator().manual_seed(0)
    uv = torch.rand(batch, n, 2, generator=gen) * 0.3
    return torch.cat([uv, 0.3 * uv[..., :1] + 0.01 * torch.rand(batch, n, 1, generator=gen)], -1)


def _count(fn):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    return dispatch.count_events(prof.events())


def _head(extra_adds: int = 0, extra_syncs: int = 0):
    timer, x = PartTimer(), torch.arange(12.0)

    def run():
        with timer('head'):
            y = x.view(3, 4).t().contiguous()  # one copy; the views launch nothing
            for _ in range(extra_adds):
                y = y + 1
            if extra_syncs:
                (y > 3).nonzero()
                y.sum().item()
                y.tolist()
        with timer('losses'):
            y.mul_(2)
    return run


def test_ops_added_to_a_part_change_its_counts_by_that_many():
    base = _count(_head())
    assert base['head'] == dict(launches=1, syncs=0) and base['losses'] == dict(launches=1,
                                                                                syncs=0)
    more = _count(_head(extra_adds=5))
    assert more['head']['launches'] == base['head']['launches'] + 5
    assert more['losses'] == base['losses']
    synced = _count(_head(extra_syncs=1))
    # nonzero, item and tolist: three syncs; nonzero, (y > 3) and sum: three launches
    assert synced['head'] == dict(launches=base['head']['launches'] + 3, syncs=3)


def test_repeat_interleave_is_a_sync_only_without_output_size():
    repeats = torch.tensor([1, 2, 3])
    values = torch.arange(3.0)
    assert _count(lambda: values.repeat_interleave(repeats))['other']['syncs'] == 1
    assert _count(lambda: values.repeat_interleave(repeats, output_size=6))['other'][
        'syncs'] == 0


def test_kernel_scope_charges_its_launches_and_keeps_its_syncs():
    def run():
        with PartTimer()('seed_selection'):
            with kernel_scope('fps', 2):
                x = torch.zeros(8)
                for _ in range(10):
                    x = x + 1
                x.sum().item()

    # the scope's 2, and the memset of zeros (a copy or fill inside a scope is charged)
    assert _count(run)['seed_selection'] == dict(launches=3, syncs=1)


def test_sparse_convolution_launches_do_not_grow_with_the_kernel():
    x, _ = voxelize(_cloud(), 0.01, levels=0)
    x = x.replace(torch.randn(len(x.coords), 4))
    launches = {}
    for k in (3, 5):
        conv = SparseConv3d(4, 4, k, algorithm='chunked_im2col')  # what CUDA runs
        conv(x)  # the kernel map is built once, outside the count
        launches[k] = _count(lambda: conv(x).feats.sum().backward())['other']
    assert launches[3] == launches[5] and launches[3]['syncs'] == 0
    assert launches[3]['launches'] < 20


def test_sparse_unet_forward_has_two_host_syncs():
    torch.manual_seed(0)
    net = SparseUNet14(channels=(8, 16, 32, 32, 32, 16, 16, 16), out_channels=24,
                       conv_algorithm='chunked_im2col')  # what CUDA runs
    points = _cloud()
    counts = _count(lambda: net(points))['other']
    assert counts['syncs'] == 2


def test_summary_adds_the_parts():
    parts = _count(_head(extra_adds=2, extra_syncs=1))
    summary = dispatch.summarise(parts)
    assert summary['launches'] == sum(p['launches'] for p in parts.values())
    assert summary['syncs'] == 3 and set(summary['parts']) == {'head', 'losses'}


def test_fused_adam_is_charged_its_multi_tensor_launches():
    params = [torch.nn.Parameter(torch.randn(3)) for _ in range(40)]
    for p in params:
        p.grad = torch.ones(3)
    fused = torch.optim.Adam(params, fused=True)
    fused.step()
    counts = _count(fused.step)['other']
    # _foreach_add_ of the steps and _fused_adam_: one launch each (40 tensors of one chunk),
    # no sync
    assert counts == dict(launches=2, syncs=0)
    plain = torch.optim.Adam(params, foreach=False)
    plain.step()
    assert _count(plain.step)['other']['launches'] > 40 * 4


def _point_ops_run(xyz, rot, feats):
    from mmgrasp.ops import point_ops
    return dict(
        fps=point_ops.furthest_point_sample(xyz, 8),
        ball=point_ops.ball_query(0.2, 4, xyz, xyz[:, :8]),
        cylinder=point_ops.cylinder_queries(xyz, xyz[:, :8], rot, (0.1, 0.2), -0.02,
                                            (0.02, 0.04), 4),
        interpolated=point_ops.three_nn_interpolate(xyz, xyz[:, :2], feats),
        **dict(zip(('knn_dist', 'knn_idx'), point_ops.knn(xyz[:, :30], xyz, 8))))


@pytest.fixture
def install_scoped_references(monkeypatch):
    """Installs the stand-ins the way a counting child does, and undoes it after: they replace
    the dispatch of every point op of the process, which later tests in it must not inherit."""
    from mmgrasp.ops import point_normals, point_ops
    monkeypatch.setattr(point_ops, '_kernels_for', point_ops._kernels_for)
    monkeypatch.setattr(point_normals, 'kernels_for', point_normals.kernels_for)
    return lambda: dispatch.ScopedReferences().install()


def test_scoped_references_charge_each_point_op_one_launch_and_return_the_references(
        install_scoped_references):
    from mmgrasp.ops import point_ops
    xyz, feats = _cloud(n=64), torch.ones(2, 5, 2)
    rot = torch.eye(3).expand(2, 8, 3, 3)
    expected = _point_ops_run(xyz, rot, feats)
    reference_counts = _count(lambda: _point_ops_run(xyz, rot, feats))['other']
    install_scoped_references()
    got = _point_ops_run(xyz, rot, feats)
    for name, value in expected.items():
        assert torch.equal(got[name], value), name
    scoped = _count(lambda: _point_ops_run(xyz, rot, feats))['other']
    # fps, ball and cylinder queries: one launch each; the interpolation: its three_nn scope
    # (one launch) and its own weight and gather ops
    assert scoped['launches'] < reference_counts['launches']
    interpolation = _count(lambda: point_ops.three_nn_interpolate(xyz, xyz[:, :2], feats))
    # kNN of k = 8: one launch and the square root of its squared distances; and the copies
    # the kernels' wrappers make of strided inputs: the centres xyz[:, :8] of both queries,
    # the expanded frames rot and kNN's reference points xyz[:, :30]
    assert scoped['launches'] == 3 + 2 + 4 + interpolation['other']['launches']
    assert scoped['syncs'] == 0


def test_scoped_references_charge_the_normals_one_launch_without_a_host_read(
        install_scoped_references):
    """batch_normals' kernel branch on the CPU: the torch reference in the kernel's scope
    (one launch, no sync: the CPU path's per-frame numpy reads would be syncs), the same
    normals as the CPU path."""
    from mmgrasp.ops import point_normals
    cloud = _cloud(n=200)
    expected = point_normals.batch_normals(cloud, orientation='solver')
    assert _count(lambda: point_normals.batch_normals(cloud))['other']['syncs'] > 0
    install_scoped_references()
    got = point_normals.batch_normals(cloud, orientation='solver')
    assert torch.equal(got, expected)
    assert _count(lambda: point_normals.batch_normals(cloud)) == {
        'other': dict(launches=1, syncs=0)}


def test_cuda_path_on_the_cpu_runs_references_in_scopes_unless_interpreted():
    if torch.cuda.is_available():
        return  # on CUDA the kernels run for real either way
    from mmengine.config import Config
    assert dispatch.child_flags('cuda_path', False) == ['--scoped-references']
    assert 'TRITON_INTERPRET' not in dispatch.child_env('cuda_path', False)
    assert dispatch.child_flags('cuda_path', True) == []
    assert dispatch.child_env('cuda_path', True)['TRITON_INTERPRET'] == '1'
    assert dispatch.child_flags('torch_reference', False) == []
    assert 'TRITON_INTERPRET' not in dispatch.child_env('torch_reference', True)
    # the numerics are the model config's keys
    for path, scoped, point_ops, algorithm in (('cuda_path', True, 'torch', 'chunked_im2col'),
                                               ('cuda_path', False, 'triton', 'chunked_im2col'),
                                               ('torch_reference', False, 'torch', 'auto')):
        cfg = Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_demo.py'))
        model = dispatch.path_config(cfg, {}, path, scoped).model
        assert (model.point_ops, model.backbone.conv_algorithm) == (point_ops, algorithm)
        # the visible-label test: its CUDA pass on cuda_path, the CPU's choice otherwise
        assert model.data_preprocessor.visible_kd_tree == (False if path == 'cuda_path' else None)


def test_torch_reference_runs_the_torch_backend():
    from mmengine.config import Config
    options = {'model.backbone.backend': 'spconv'}
    for path, backend in (('cuda_path', 'spconv'), ('torch_reference', 'torch')):
        cfg = Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_demo.py'))
        assert dispatch.path_config(cfg, options, path).model.backbone.backend == backend
    cfg = Config.fromfile(os.path.join(REPO, 'configs', 'graspnet_baseline_demo.py'))
    assert 'backend' not in dispatch.path_config(cfg, {}, 'torch_reference').model.backbone


def test_a_foreach_clip_by_value_is_charged_over_the_gradients_sizes(monkeypatch):
    """clip_grad_value_(foreach=True): a _foreach_clamp_min_ and a _foreach_clamp_max_ over
    the gradients, each charged by the gradients' chunks (here two launches once a launch
    holds four blocks, as their three-chunk gradients need six); no sync."""
    chunk = dispatch.MULTI_TENSOR_CHUNK
    params = [torch.nn.Parameter(torch.zeros(3 * chunk)) for _ in range(2)]
    for p in params:
        p.grad = torch.linspace(-2, 2, 3 * chunk)
    clip = lambda: torch.nn.utils.clip_grad_value_(params, 0.5, foreach=True)  # noqa: E731
    assert _count(clip)['other'] == dict(launches=2, syncs=0)
    monkeypatch.setattr(dispatch, 'MULTI_TENSOR_MAX_BLOCKS', 4)
    assert _count(clip)['other'] == dict(launches=4, syncs=0)
    assert float(params[0].grad.abs().max()) == 0.5


def test_multi_tensor_launches_follow_torchs_chunking():
    """torch's multi_tensor_apply: a launch when the tensors or the blocks (65 536-element
    chunks) of one launch fill up, and one for what is left; empty tensors are skipped."""
    chunk, blocks = dispatch.MULTI_TENSOR_CHUNK, dispatch.MULTI_TENSOR_MAX_BLOCKS
    launches = dispatch.multi_tensor_launches
    assert launches([], 4) == 0 and launches([0, 0], 4) == 0
    assert launches([3] * 252, 4) == 1 and launches([3] * 253, 4) == 2  # depth 4: 252 tensors
    assert launches([1] * 770, 1) == 1 and launches([1] * 771, 1) == 2  # depth 1: 770
    assert launches([chunk * blocks], 4) == 1  # exactly the blocks of one launch
    assert launches([chunk * blocks + 1], 4) == 2  # one chunk more: it continues
    assert launches([chunk * (blocks - 1), 2 * chunk], 4) == 2  # the second tensor is cut
    # the tensor cut by a full launch counts again in the next one
    assert launches([chunk * blocks + 1] + [1] * 251, 4) == 2
    assert launches([chunk * blocks + 1] + [1] * 252, 4) == 3


def test_fused_adam_is_charged_by_its_parameter_sizes():
    params = [torch.nn.Parameter(torch.randn(3)) for _ in range(40)]
    for p in params:
        p.grad = torch.ones(3)
    fused = torch.optim.Adam(params, fused=True)
    fused.step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fused.step()
    big = {40: [dispatch.MULTI_TENSOR_CHUNK * dispatch.MULTI_TENSOR_MAX_BLOCKS * 3] * 40}
    # the steps' _foreach_add_ (1) and _fused_adam_: 3 launches per parameter of 3 x the blocks
    assert dispatch.count_events(prof.events(), param_numels=big)['other']['launches'] == \
        1 + 3 * 40


def test_copies_inside_a_kernel_scope_are_charged_but_not_a_stand_ins_ops():
    from torch.profiler import record_function
    strided = torch.randn(4, 6).T

    def run():
        with PartTimer()('grouper'):
            with kernel_scope('ball_query', 1):
                strided.contiguous()  # the wrapper's copy: charged
                torch.zeros(3)  # a memset: charged
                torch.empty(3)  # an allocation: free
                with record_function(dispatch.STANDIN_PREFIX + 'ball_query'):
                    strided.contiguous() + 1  # the reference standing in: the kernel's

    assert _count(run)['grouper'] == dict(launches=3, syncs=0)


def test_device_check_fails_on_more_kernels_than_predicted():
    run = {'device': 'cuda:0', 'train': dict(launches=1000, syncs=4, kernels=1200),
           'inference': dict(launches=100, syncs=1, kernels=80)}
    assert dispatch.kernel_excess({'cuda_path': run}) == []
    run['train']['kernels'] = 1201
    [line] = dispatch.kernel_excess({'cuda_path': run})
    assert line.startswith('cuda_path train: 1201 device kernels on cuda:0 against 1000')
    cpu = {'device': 'cpu', 'train': dict(launches=5, syncs=0), 'inference': dict(launches=1,
                                                                                 syncs=0)}
    assert dispatch.kernel_excess({'cuda_path': cpu}) == []  # no profiler count on the CPU
