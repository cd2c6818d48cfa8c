"""HGGD's two networks against the instantiated reference (THU-VCLab/HGGD@69580ff): the state
dicts key for key, shape for shape and dtype for dtype (tests/data/reference_state_dicts/
hggd.json), the init rules value for value (a seeded construction gives the reference's initial
tensors: per-tensor sums), and the forward passes on the reference's outputs
(tests/data/hggd_golden/networks.npz; both made by tools/analysis/golden/make_hggd_golden.py)."""
import json
import os

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from mmgrasp.models.backbones import AnchorGraspNet
from mmgrasp.models.backbones.hggd_anchor_net import check_image_size
from mmgrasp.models.heads import PointMultiGraspNet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'hggd.json')
GOLDEN = os.path.join(REPO, 'tests', 'data', 'hggd_golden', 'networks.npz')


def table() -> dict:
    with open(TABLE) as f:
        return json.load(f)


def seeded_networks():
    torch.manual_seed(0)
    anchor = AnchorGraspNet()
    torch.manual_seed(1)
    local = PointMultiGraspNet()
    return anchor, local


@pytest.mark.parametrize('name', ['anchor', 'local'])
def test_state_dict_equals_the_reference_key_for_key(name):
    reference = table()[name]
    net = seeded_networks()[name == 'local']
    state = net.state_dict()
    assert list(state) == list(reference['state_dict'])  # the same order too
    assert {k: list(v.shape) for k, v in state.items()} == reference['state_dict']
    assert {k: str(v.dtype)[6:] for k, v in state.items()} == reference['dtypes']
    assert sum(p.numel() for p in net.parameters()) == reference['parameters']
    assert reference['parameters'] == (1618921 if name == 'anchor' else 1806669)
    buffers = sum(v.numel() for k, v in state.items()
                  if k.endswith(('running_mean', 'running_var', 'num_batches_tracked')))
    assert buffers == reference['buffers'] == (4895 if name == 'anchor' else buffers)


@pytest.mark.parametrize('name', ['anchor', 'local'])
def test_seeded_init_draws_the_reference_values(name):
    """Conv2d N(0, sqrt(2 / (k² C_out))), ConvTranspose default, BN / LN 1 and 0, Linear
    kaiming-normal with zero bias (the T-net's fc3 included), in the reference's order."""
    state = seeded_networks()[name == 'local'].state_dict()
    init = table()[name]['init']
    for key, (total, squares) in init.items():
        value = state[key].double()
        assert float(value.sum()) == pytest.approx(total, rel=1e-9, abs=1e-9), key
        assert float(value.square().sum()) == pytest.approx(squares, rel=1e-9, abs=1e-9), key


def assert_close_to_golden(actual: torch.Tensor, golden: np.ndarray, name: str) -> None:
    """Equal up to float32 summation order: the CPU's convolution kernels (AVX2 or AVX-512,
    chosen at run time) sum in their own order, which moves outputs by about 1e-6 of the
    tensor's largest value (seen: up to 1.3e-6); a wrong layer moves them by its own size."""
    np.testing.assert_allclose(actual.numpy(), golden, rtol=1e-4,
                               atol=1e-5 * float(np.abs(golden).max()), err_msg=name)


def test_forward_passes_equal_the_reference():
    golden = np.load(GOLDEN)
    anchor, local = seeded_networks()
    gen = torch.Generator().manual_seed(2)
    image = torch.randn(1, 4, 640, 40, generator=gen)
    regions = torch.randn(5, 512, 35, generator=gen) * 0.05
    info = torch.randn(5, 3, generator=gen)
    sums = [float(t.double().sum()) for t in (image, regions, info)]
    np.testing.assert_allclose(sums, golden['input_sums'], rtol=1e-12)
    with torch.no_grad():
        out = anchor.eval()(image)
        pred, offset = local.eval()(regions, info)
    for key in ('loc_map', 'cls_mask', 'theta_offset', 'depth_offset', 'width_offset',
                'features'):
        assert_close_to_golden(out[key], golden[key], key)
    assert_close_to_golden(pred, golden['pred'], 'pred')
    assert_close_to_golden(offset, golden['offset'], 'offset')


def test_the_tolerance_catches_a_batchnorm_epsilon_of_1e_4():
    """The golden's tolerance is tight enough for a small formula change: every BatchNorm's
    epsilon at 1e-4 instead of the reference's 1e-5 moves the outputs by ~7e-4 of their size."""
    golden = np.load(GOLDEN)
    anchor, _ = seeded_networks()
    for module in anchor.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.eps = 1e-4
    image = torch.randn(1, 4, 640, 40, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = anchor.eval()(image)
    for key in ('loc_map', 'cls_mask', 'features'):
        with pytest.raises(AssertionError):
            assert_close_to_golden(out[key], golden[key], key)


def test_tnet_pools_before_its_last_relu_with_the_reference_values_and_gradients():
    """The T-net's last ReLU runs after its max pool (no (R, 1024, N) ReLU output kept): its
    output and every gradient equal the reference's order (ReLU, then max) bit for bit,
    regions whose maximum is negative included."""
    torch.manual_seed(0)
    net = PointMultiGraspNet().pointnet.stn.train()
    x = torch.randn(16, 3, 8)  # 8 points a region: some channels are negative at all of them

    def reference(x):
        y = F.relu(net.bn2(net.conv2(F.relu(net.bn1(net.conv1(x))))))
        y = F.relu(net.bn3(net.conv3(y))).max(dim=2).values
        y = F.relu(net.bn5(net.fc2(F.relu(net.bn4(net.fc1(y))))))
        return (net.fc3(y) + torch.eye(3).flatten()).view(-1, 3, 3)

    results = []
    for forward in (net, reference):
        net.zero_grad()
        inputs = x.clone().requires_grad_(True)
        out = forward(inputs)
        out.square().sum().backward()
        results.append([out.detach(), inputs.grad] + [p.grad for p in net.parameters()])
    for got, expected in zip(*results):
        assert torch.equal(got, expected)
    with torch.no_grad():
        pooled = net.bn3(net.conv3(F.relu(net.bn2(net.conv2(F.relu(net.bn1(net.conv1(x))))))))
    assert (pooled.max(dim=2).values < 0).any()


def test_features_are_detached_and_the_heads_get_gradients():
    net = AnchorGraspNet()
    out = net(torch.randn(2, 4, 64, 40))
    assert not out['features'].requires_grad
    sum(v.sum() for k, v in out.items() if k != 'features').backward()
    assert all(p.grad is not None for p in net.parameters())


def test_options_change_the_shapes():
    net = AnchorGraspNet(in_channels=1, num_theta_anchors=4, mid_channels=16)
    out = net(torch.randn(1, 1, 64, 40))
    assert out['cls_mask'].shape == (1, 4, 8, 5) and out['loc_map'].shape == (1, 1, 64, 40)
    assert net.hmap[0].conv[0].out_channels == 16
    local = PointMultiGraspNet(info_channels=2, num_anchors=9, feature_channels=8).eval()
    pred, offset = local(torch.randn(3, 512, 11), torch.randn(3, 2))
    assert pred.shape == (3, 9) and offset.shape == (3, 9, 3)


def test_image_sizes_the_decoder_cannot_give_back_are_refused():
    check_image_size(640, 360)
    check_image_size(64, 40)
    for size in ((630, 360), (640, 352), (640, 368)):
        with pytest.raises(ValueError, match='640 x 360 is the reference size'):
            check_image_size(*size)
