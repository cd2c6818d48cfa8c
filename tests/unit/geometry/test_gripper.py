"""The gripper description: GraspNet's by default (the constants it replaces), validated, and
read by the collision tests, the evaluator's frame protocol and the models."""
import numpy as np
import pytest
import torch

from mmgrasp.geometry import (GRASP_HEIGHT, GRASP_MAX_WIDTH, GRASPNET_GRIPPER, Gripper,
                              GripperMismatchError, ModelFreeCollisionDetector, build_gripper,
                              check_same_gripper, parse_gripper_options, read_gripper_file)
from mmgrasp.evaluation.functional import evaluate_frame

NARROW = dict(max_width=0.08, finger_width=0.015)


def grasp_row(width=0.04, depth=0.02):
    row = np.zeros(17)
    row[1], row[2], row[3] = width, 0.02, depth
    row[4:13] = np.eye(3).reshape(-1)
    return row


def test_default_is_graspnets_gripper_and_grid():
    g = build_gripper(None)
    assert g is GRASPNET_GRIPPER and g.name == 'graspnet'
    assert (g.max_width, g.height, g.finger_width, g.base_depth, g.finger_length) == \
        (0.1, 0.02, 0.01, 0.02, 0.06)
    assert (GRASP_MAX_WIDTH, GRASP_HEIGHT) == (g.max_width, g.height)
    assert g.grid == (300, 12, 4)
    np.testing.assert_array_equal(g.depths(), [0.01, 0.02, 0.03, 0.04])
    np.testing.assert_array_equal(g.angles(), np.arange(12) * np.pi / 12)
    assert build_gripper(dict(max_width=0.1)).name == 'graspnet'


def test_fields_are_validated_and_unknown_keys_named():
    with pytest.raises(ValueError, match="unknown keys \\['finger'\\]"):
        build_gripper(dict(finger=0.01))
    with pytest.raises(ValueError, match='max_width=-0.1 must be a positive'):
        build_gripper(dict(max_width=-0.1))
    with pytest.raises(ValueError, match='num_views=0'):
        build_gripper(dict(num_views=0))
    with pytest.raises(TypeError):
        build_gripper(0.08)


def test_same_gripper_ignores_the_name_and_mismatch_names_both(tmp_path):
    narrow = build_gripper(NARROW)
    assert narrow.same_as(Gripper(name='other', **NARROW))
    check_same_gripper(narrow, 'a', Gripper(name='x', **NARROW), 'b')
    with pytest.raises(GripperMismatchError) as err:
        check_same_gripper(narrow, 'model.gripper', GRASPNET_GRIPPER, 'the labels')
    assert 'model.gripper' in str(err.value) and 'the labels' in str(err.value)
    assert 'max_width=0.08' in str(err.value) and 'max_width=0.1' in str(err.value)
    path = tmp_path / 'gripper.json'
    path.write_text(narrow.to_json())
    assert read_gripper_file(str(path)) == narrow
    path.write_text('{"max_width": "wide"}')
    with pytest.raises(ValueError, match='not a gripper description'):
        read_gripper_file(str(path))


def test_collision_filter_fingers_follow_the_gripper():
    g = grasp_row(width=0.04)[None]
    # beside the right jaw (half width 2 cm): 1 cm fingers span 2-3 cm, 1.5 cm ones 2-3.5 cm
    points = np.array([[x, 0.032, 0.0] for x in np.linspace(-0.035, 0.015, 6)])
    thin = ModelFreeCollisionDetector(points, 0.01)
    wide = ModelFreeCollisionDetector(points, 0.01, dict(finger_width=0.015))
    assert wide.finger_width == 0.015 and thin.finger_width == 0.01
    assert not thin.detect(g, 0.05, 0.01)[0] and wide.detect(g, 0.05, 0.01)[0]


def test_evaluator_protocol_uses_the_grippers_fingers_and_width():
    """evaluate_frame places the gripper's fingers: a point 3.2 cm beside the grasp centre
    collides with 1.5 cm fingers only."""
    from mmgrasp.geometry.sdf import SignedDistanceField
    grid = np.ones((5, 5, 5))
    grid[2, 2, 2] = 0.0
    sdf = SignedDistanceField(grid, np.full(3, -0.004), 0.002)
    model = np.array([[0.0, 0.032, 0.0]] + [[0.01, 0.0, z] for z in np.linspace(-5e-3, 5e-3,
                                                                                  12)])
    rows = grasp_row(width=0.04)[None].astype(np.float32)
    rows[0, 0] = 1.0
    thin = evaluate_frame(rows, [model], [sdf], [np.eye(4, dtype=np.float32)], None)
    wide = evaluate_frame(rows, [model], [sdf], [np.eye(4, dtype=np.float32)], None,
                          gripper=build_gripper(NARROW))
    assert not thin['hit'][0] and wide['hit'][0]


def test_models_decode_with_the_grippers_width_depth_and_height():
    from mmgrasp.models.detectors.base import GraspDetector
    det = GraspDetector(gripper=dict(max_width=0.08, height=0.03, depth_step=0.015))
    rows = det.grasp_rows(torch.ones(1, 2), torch.tensor([[0.05, 0.07]]),
                          torch.tensor([[0.015, 0.03]]), torch.eye(3).expand(1, 2, 3, 3),
                          torch.zeros(1, 2, 3))
    assert (rows[..., 2] == 0.03).all()
    assert det.gripper.depths().tolist() == [0.015, 0.03, 0.045, 0.06]


def _gsnet(gripper=None, assigner=None):
    from mmgrasp.registry import MODELS, build_in_scope
    import mmgrasp.models  # noqa: F401 - registers GSNet
    torch.manual_seed(0)
    return build_in_scope(MODELS, dict(
        type='GSNet', num_seeds=16, num_views=5, num_angles=3, num_depths=3, gripper=gripper,
        backbone=dict(type='SparseUNet14', channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
        crop=dict(channels=(16, )),
        assigner=assigner or dict(type='NearestLabelAssigner', num_views=5)))


def test_gsnet_decodes_and_assigns_with_its_gripper():
    narrow = dict(max_width=0.03, depth_step=0.02, height=0.025)
    default, model = _gsnet(), _gsnet(narrow)
    assert default.assigner.max_width == 0.1 and model.assigner.max_width == 0.03
    points = torch.rand(1, 600, 3) * 0.1
    with torch.no_grad():
        a = default.predict(dict(points=points), None)[0].pred_grasps
        b = model.predict(dict(points=points), None)[0].pred_grasps
    assert (b[:, 1] <= 0.03).all() and (b[:, 2] == 0.025).all()
    assert np.isin(np.round(b[:, 3].double().numpy(), 6), [0.02, 0.04, 0.06]).all()
    assert (a[:, 1] > 0.03).any()
    assert np.isin(np.round(a[:, 3].double().numpy(), 6), [0.01, 0.02, 0.03]).all()
    with pytest.raises(ValueError, match='its assigner NearestLabelAssigner'):
        _gsnet(narrow, dict(type='NearestLabelAssigner', num_views=5, gripper=NARROW))


def test_detectors_collision_filter_places_the_grippers_fingers():
    """The detector's test-time filter builds its collision test with the detector's gripper: a
    wall 3.2 cm beside a 4 cm grasp's centre misses 1 cm fingers and cuts 1.5 cm ones."""
    from mmgrasp.models.detectors.base import GraspDetector
    from mmgrasp.structures.data_sample import GraspDataSample
    wall = np.array([[x, 0.032, z] for x in np.arange(-0.04, 0.02, 0.005)
                     for z in np.arange(-0.008, 0.009, 0.004)], np.float32)
    kept = []
    for gripper in (None, NARROW):
        sample = GraspDataSample(metainfo=dict(masked_cloud=wall))
        sample.pred_grasps = torch.from_numpy(grasp_row(width=0.04)[None].astype(np.float32))
        det = GraspDetector(gripper=gripper, test_cfg=dict(collision_thresh=0.01))
        kept.append(len(det.filter_collisions({}, [sample])[0].pred_grasps))
    assert kept == [1, 0]



def _predict(model):
    """pred_grasps of ``model`` on one fixed cloud."""
    from mmgrasp.structures.data_sample import GraspDataSample
    points = torch.rand(1, 400, 3, generator=torch.Generator().manual_seed(1)) * 0.1
    with torch.no_grad():
        return model.predict(dict(points=points), [GraspDataSample()])[0].pred_grasps


def _build(cfg, gripper=None):
    """``cfg``'s detector from seed 0, its width output set to a constant 4.8 cm (untrained,
    it predicts widths below 0, all clamped to 0)."""
    from mmgrasp.registry import MODELS, build_in_scope
    import mmgrasp.models  # noqa: F401 - registers the detectors
    torch.manual_seed(0)
    model = build_in_scope(MODELS, dict(cfg, gripper=gripper)).eval()
    if cfg['type'] == 'GraspNetBaseline':  # width = 1.2 * output
        conv, rows, value = model.operation.layers[-1], slice(2 * model.num_angles, None), 0.04
    else:  # width = 1.2 * output / 10
        conv, rows, value = model.grasp_head.outputs['width'], slice(None), 0.4
    conv.weight.data[rows] = 0
    conv.bias.data[rows] = value
    return model


NARROW_DECODE = dict(max_width=0.03, height=0.025, depth_step=0.02)


def test_economicgrasp_decodes_with_its_gripper():
    """4.8 cm widths clamped at the gripper's 3 cm, its height, depths that step by its depth
    step; a gripper wider than the economic labels' 0.1 m is refused."""
    model = _build(dict(
        type='EconomicGrasp', num_seeds=32, num_views=5, num_angles=3, num_depths=3,
        test_cfg=dict(collision_thresh=0.0), assigner=dict(type='EconomicAssigner', num_views=5),
        backbone=dict(type='SparseUNet14', channels=(8, ) * 8, out_channels=32),
        crop=dict(channels=(16, 16), channels2=(16, 16)), head=dict(embed_channels=8)),
        NARROW_DECODE)
    rows = _predict(model)
    assert (rows[:, 1] == 0.03).all() and (rows[:, 2] == 0.025).all()
    assert np.isin(np.round(rows[:, 3].double().numpy(), 6), [0.02, 0.04, 0.06]).all()
    with pytest.raises(ValueError, match='opens wider than 0.1 m'):
        _build(dict(type='EconomicGrasp', backbone=dict(type='SparseUNet14')),
               dict(max_width=0.12))


def test_graspnet_baseline_crops_and_decodes_with_its_gripper():
    """Each depth class crops up to its depth, (d + 1) * the gripper's depth step; widths are
    clamped at its maximum (4.8 cm predicted, 3 cm decoded), heights and depths are its own."""
    model = _build(dict(
        type='GraspNetBaseline', num_views=5, num_angles=3, num_depths=3,
        backbone=dict(type='PointNet2Backbone', npoints=(256, 128, 64, 32), scale=0.25),
        crop=dict(type='DepthCloudCrop', nsample=16, channels=(16, 32, 64)),
        operation=dict(type='OperationNet', hidden=32),
        tolerance=dict(type='ToleranceNet', hidden=32)), NARROW_DECODE)
    assert model.crop.hmax == (0.02, 0.04, 0.06)
    rows = _predict(model)
    assert (rows[:, 1] == 0.03).all()
    assert (rows[:, 2] == 0.025).all()
    assert np.isin(np.round(rows[:, 3].double().numpy(), 6), [0.02, 0.04, 0.06]).all()


@pytest.mark.parametrize('words, names', [
    (['max_width=abc'], ("'max_width=abc'", 'max_width must be a positive number', "'abc'")),
    (['num_views=2.5'], ('num_views must be a positive integer', "'2.5'")),
    (['num_angles='], ('num_angles must be a positive integer', "''")),
    (['max_width=-0.08'], ('--gripper', 'max_width=-0.08 must be a positive')),
    (['max_width=nan'], ('--gripper', 'max_width=nan')),
    (['num_depths=0'], ('--gripper', 'num_depths=0')),
    (['finger=0.01'], ("unknown key 'finger'", 'accepted', 'finger_width')),
    (['max_width'], ("'max_width'", 'expected KEY=VALUE')),
    (['max_width=0.08', 'max_width=0.09'], ('max_width is given twice', )),
])
def test_command_line_gripper_refusals_name_the_key(words, names):
    with pytest.raises(ValueError) as err:
        parse_gripper_options(words)
    message = str(err.value)
    assert '\n' not in message
    for name in names:
        assert name in message, (name, message)


def test_command_line_gripper_reads_fields_and_files(tmp_path):
    g = parse_gripper_options(['max_width=0.08', 'num_views=6', 'name=narrow'])
    assert (g.max_width, g.num_views, g.name, g.finger_width) == (0.08, 6, 'narrow', 0.01)
    assert isinstance(g.num_views, int)
    assert parse_gripper_options([]) == GRASPNET_GRIPPER
    path = tmp_path / 'gripper.json'
    path.write_text(g.to_json())
    assert parse_gripper_options([str(path)]) == g
