"""tools/model_converters/reference_to_mmgrasp.py ``hggd``: a checkpoint in the layout
THU-VCLab/HGGD's train_utils.py saves ({anchor, local, gamma, beta, optimizer}; the key table
tests/data/reference_state_dicts/hggd.json listed from the instantiated reference models),
written here with random values, converts strictly and predicts as the weights it came from;
anything else is refused, naming what is wrong, without unpickling."""
import json
import os
import sys

import pytest
import torch

from mmgrasp.apis import register_all_modules
from mmgrasp.registry import MODELS
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'hggd.json')
converter = script_module('tools/model_converters/reference_to_mmgrasp.py')
register_all_modules(False)
sys.path.insert(0, os.path.join(REPO, 'tests', 'unit', 'models'))
from _hggd_inputs import make_batch, small_hggd  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def config(tmp_path):
    """The model base config; until the image path's preprocessor is registered, with the
    plain one (neither has state)."""
    text = "_base_ = ['{}']\n".format(os.path.join(REPO, 'configs', '_base_', 'models', 'hggd.py'))
    if 'HGGDDataPreprocessor' not in MODELS.module_dict:
        text += ("model = dict(data_preprocessor=dict(_delete_=True, "
                 "type='GraspDataPreprocessor'))\n")
    path = tmp_path / 'hggd.py'
    path.write_text(text)
    return str(path)


def reference_checkpoint(seed=0) -> dict:
    """Random tensors with the table's names, shapes and dtypes, in HGGD's checkpoint dict."""
    with open(TABLE) as f:
        table = json.load(f)
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for entry in ('anchor', 'local'):
        layout = table[entry]
        out[entry] = {k: (torch.randint(0, 1000, shape, generator=gen)
                          if layout['dtypes'][k] == 'int64' else torch.randn(shape, generator=gen))
                      for k, shape in layout['state_dict'].items()}
    out['gamma'] = torch.linspace(-0.8, 0.8, 7, dtype=torch.float64)
    out['beta'] = torch.linspace(-0.7, 0.9, 7)  # float32, as before any shift
    out['optimizer'] = {'state': {0: {'step': torch.tensor(3.0)}},
                        'param_groups': [{'lr': 0.01, 'betas': (0.9, 0.999), 'params': [0]}]}
    return out


def test_reference_checkpoint_converts_strictly(tmp_path, config, capsys):
    src, dst = tmp_path / 'epoch_14_iou_0.9_cover_0.5', tmp_path / 'hggd.pth'
    reference = reference_checkpoint()
    torch.save(reference, src)
    assert converter.main(['hggd', str(src), str(dst), '--config', config]) == 0
    assert 'wrote 375 tensors' in capsys.readouterr().out  # 297 + 76 + 2 anchors
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint

    from mmgrasp.registry import build_in_scope
    model = build_in_scope(MODELS, Config.fromfile(config).model)
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    state = model.state_dict()
    assert torch.equal(state['anchor_net.trconv.0.deconv.0.weight'],
                       reference['anchor']['trconv.0.deconv.0.weight'])
    assert torch.equal(state['local_net.pointnet.stn.fc3.bias'],
                       reference['local']['pointnet.stn.fc3.bias'])
    assert state['anchors.beta'].dtype == torch.float64
    assert torch.equal(state['anchors.beta'], reference['beta'].double())
    meta = torch.load(dst, weights_only=True)['meta']
    assert meta['method'] == 'hggd' and meta['optimizer'] == 'not converted'


def to_reference(state: dict) -> dict:
    """An mmgrasp HGGD state dict in HGGD's checkpoint layout, written here from
    train_utils.py's save (the networks' own names, anchors as tensors)."""
    out = {'anchor': {}, 'local': {}, 'optimizer': {}}
    for key, value in state.items():
        net, _, rest = key.partition('.')
        if net in ('anchor_net', 'local_net'):
            out[net[:-4] if net == 'anchor_net' else 'local'][rest] = value.clone()
        else:
            out[rest] = value.clone()
    return out


def test_round_trip_predicts_the_same(tmp_path):
    torch.manual_seed(0)
    native = small_hggd(test_cfg=dict(collision=False)).eval()
    native.anchors.gamma.add_(0.03)  # shifted anchors travel too
    src = tmp_path / 'checkpoint'
    torch.save(to_reference(native.state_dict()), src)
    torch.manual_seed(1)
    converted = small_hggd(test_cfg=dict(collision=False)).eval()
    target = {k: v.shape for k, v in converted.state_dict().items()}
    reference, _ = converter.load_hggd(str(src))
    converted.load_state_dict(converter.convert_state_dict('hggd', reference, target),
                              strict=True)
    inputs, samples = make_batch(seed=5)
    with torch.no_grad():
        ours = [r.pred_grasps for r in converted.predict(inputs, samples)]
        expected = [r.pred_grasps for r in native.predict(inputs, samples)]
    assert sum(len(e) for e in expected) > 0
    assert all(torch.equal(a, b) for a, b in zip(ours, expected))
    converted.anchors.gamma.sub_(0.03)  # the anchors are used by the decode
    with torch.no_grad():
        moved = [r.pred_grasps for r in converted.predict(inputs, samples)]
    assert not all(torch.equal(a, b) for a, b in zip(moved, expected))


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, 'w')


def test_other_files_are_refused_naming_the_problem(tmp_path, config):
    target = {k: v.shape for k, v in small_hggd().state_dict().items()}
    good = reference_checkpoint()
    cases = {
        'missing': ({k: v for k, v in good.items() if k != 'beta'}, r"missing \['beta'\]"),
        'unknown': ({**good, 'epoch': 3}, r"unknown \['epoch'\]"),
        'list': ([good['anchor']], 'holds a list'),
        'model_state_dict': ({'model_state_dict': good['anchor']}, 'not an HGGD checkpoint'),
    }
    for name, (payload, message) in cases.items():
        path = tmp_path / name
        torch.save(payload, path)
        with pytest.raises(converter.ConversionError, match=message):
            converter.load_hggd(str(path))
    shapes = reference_checkpoint()
    shapes['local']['info_layer.weight'] = torch.zeros(32, 4)
    del shapes['anchor']['hmap.1.bias']
    torch.save(shapes, tmp_path / 'shapes')
    reference, _ = converter.load_hggd(str(tmp_path / 'shapes'))
    with pytest.raises(converter.ConversionError,
                       match=r'(?s)local\.info_layer\.weight \(32, 4\).*missing keys.*'
                             r'anchor_net\.hmap\.1\.bias'):
        converter.convert_state_dict('hggd', reference, target)
    marker = tmp_path / 'unpickled'
    torch.save({'anchor': _Payload(str(marker))}, tmp_path / 'evil')
    with pytest.raises(converter.ConversionError, match='not a torch checkpoint of tensors'):
        converter.load_hggd(str(tmp_path / 'evil'))
    assert not marker.exists()
    assert converter.main(['hggd', str(tmp_path / 'evil'), str(tmp_path / 'out.pth'),
                           '--config', config]) == 1
    assert not (tmp_path / 'out.pth').exists()
