"""The dump evaluator end to end on a tiny sphere scene: figures, resume, failures named."""
import json
import os

import numpy as np
import pytest
import torch

from mmgrasp.evaluation import graspnet_dump_eval, scene_models
from mmgrasp.evaluation.functional import evaluate_frame, evaluate_frames
from mmgrasp.evaluation.graspnet_dump_eval import (FRAME_BATCH, EvaluationError, auto_nproc,
                                                   evaluate_dump, read_annotation, summarize,
                                                   work_units)
from mmgrasp.geometry import write_dexnet_sdf
from mmgrasp.evaluation.metrics import GraspNetMetric
from eval_data import top_down_grasp, write_dump, write_eval_dataset


@pytest.fixture
def scene(tmp_path):
    root = str(tmp_path / 'data')
    centres = write_eval_dataset(root, scene=100, frames=2)
    return root, str(tmp_path / 'dump'), centres


def rows_for(centres):
    return [top_down_grasp(0.9, centres[0]), top_down_grasp(0.8, centres[1]),
            top_down_grasp(0.6, centres[0] + np.array([0, 0, -0.2]))]  # in the air: empty


def test_annotation_pose(scene):
    root, _, centres = scene
    ann = read_annotation(os.path.join(root, 'scenes/scene_0100/realsense/annotations/0000.xml'))
    assert [i for i, _ in ann] == [0, 1]
    assert ann[1][1].dtype == np.float32
    np.testing.assert_allclose(ann[1][1][:3, 3], centres[1], atol=1e-7)
    bad = os.path.join(root, 'bad.xml')
    with open(bad, 'w') as f:
        f.write('<scene><obj><obj_id>0</obj_id></obj></scene>')
    with pytest.raises(ValueError, match='bad.xml'):
        read_annotation(bad)


def test_figures_empty_frame_and_resume(scene, monkeypatch):
    root, dump, centres = scene
    write_dump(dump, 100, 0, rows_for(centres))
    write_dump(dump, 100, 1, [])  # an empty frame scores zeros (graspnetAPI crashes here)
    res = os.path.join(dump, 'res')
    acc = evaluate_dump(root, dump, 'realsense', [100], results_dir=res, progress=False)[100]
    assert acc.shape == (2, 50, 6)
    # two force-closure grasps at mu 0.2, then the empty one
    np.testing.assert_allclose(acc[0, :3, 0], [1, 1, 2 / 3])
    np.testing.assert_allclose(acc[0, 49], 2 / 50)
    assert not acc[1].any()
    figures = summarize({100: acc})
    assert figures['seen/AP'] == pytest.approx(100 * acc.mean())
    assert figures['AP0.4'] == pytest.approx(100 * acc[:, :, 1].mean())
    assert 'novel/AP' not in figures and figures['frames'] == 2

    def boom(*a, **k):
        raise AssertionError('evaluated again')
    monkeypatch.setattr(graspnet_dump_eval, 'evaluate_scene', boom)
    again = evaluate_dump(root, dump, 'realsense', [100], results_dir=res, progress=False)[100]
    np.testing.assert_array_equal(again, acc)
    # a changed dump is evaluated again
    write_dump(dump, 100, 1, rows_for(centres)[:1])
    os.utime(os.path.join(dump, 'scene_0100/realsense/0001.npy'), ns=(1, 1))
    with pytest.raises(AssertionError, match='evaluated again'):
        evaluate_dump(root, dump, 'realsense', [100], results_dir=res, progress=False)


def test_failures_name_scene_and_frame(scene, tmp_path):
    root, dump, centres = scene
    write_eval_dataset(root, scene=101, frames=2)
    for s in (100, 101):
        write_dump(dump, s, 0, rows_for(centres))
    # frame 1 of scene 101: a rotation that is not orthonormal
    bad = np.array(rows_for(centres), np.float32)
    bad[0, 4:13] *= 1.01
    write_dump(dump, 100, 1, rows_for(centres))
    write_dump(dump, 101, 1, bad)
    for nproc in (1, 2):
        with pytest.raises(EvaluationError, match=r'scene 101 frame 1: .*not orthonormal'):
            evaluate_dump(root, dump, 'realsense', [100, 101], nproc=nproc, progress=False)
    os.remove(os.path.join(dump, 'scene_0101/realsense/0001.npy'))
    with pytest.raises(EvaluationError, match=r'scene 101 frame 1: .*no dump'):
        evaluate_dump(root, dump, 'realsense', [101], progress=False)


@pytest.mark.slow
def test_worker_time_limit(scene, monkeypatch):
    root, dump, centres = scene
    write_eval_dataset(root, scene=101, frames=2)
    for s in (100, 101):
        for f in (0, 1):
            write_dump(dump, s, f, rows_for(centres))
    real = graspnet_dump_eval.evaluate_frames

    def slow(frames, on_frame=None, **kwargs):
        import time
        on_frame(0)
        time.sleep(30)
        return real(frames, on_frame=on_frame, **kwargs)
    monkeypatch.setattr(graspnet_dump_eval, 'evaluate_frames', slow)  # forked workers inherit it
    with pytest.raises(EvaluationError, match=r'scene 10[01] frame [01]: no result after 1 s'):
        evaluate_dump(root, dump, 'realsense', [100, 101], nproc=2, frame_timeout=1.0,
                      progress=False)


def test_parallel_equals_serial(scene):
    root, dump, centres = scene
    write_eval_dataset(root, scene=130, frames=2)
    for s in (100, 130):
        write_dump(dump, s, 0, rows_for(centres))
        write_dump(dump, s, 1, rows_for(centres)[1:])
    serial = evaluate_dump(root, dump, 'realsense', [100, 130], progress=False)
    parallel = evaluate_dump(root, dump, 'realsense', [100, 130], nproc=2, progress=True)
    for s in (100, 130):
        np.testing.assert_array_equal(serial[s], parallel[s])
    figures = summarize(serial)
    assert {'seen/AP', 'similar/AP'} <= set(figures)


def test_default_nproc_splits_the_work_and_keeps_the_results(tmp_path, monkeypatch):
    """GraspNetMetric's default (nproc=None, :func:`auto_nproc`): a process per core, at most
    one per FRAME_BATCH frames (2 here, to keep the test small) - 2 * FRAME_BATCH frames on 2
    cores go to 2 worker processes, with the accuracy of one process; fewer frames stay in
    the calling process."""
    assert FRAME_BATCH >= 8  # the batches that take numpy's per-call cost off small objects
    monkeypatch.setattr(graspnet_dump_eval, 'FRAME_BATCH', 2)
    monkeypatch.setattr(graspnet_dump_eval, '_available_cores', lambda: 2)
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    frames = 4
    centres = write_eval_dataset(root, scene=100, frames=frames)
    for f in range(frames):
        write_dump(dump, 100, f, rows_for(centres)[f % 3:])
    assert [auto_nproc(n) for n in (1, frames - 1, frames, 100 * frames)] == [1, 1, 2, 2]
    log = tmp_path / 'pids.log'
    real = graspnet_dump_eval.evaluate_frames

    def logged(batch, **kwargs):
        with open(log, 'a') as f:  # forked workers inherit this and append to one file
            f.write(f'{os.getpid()} {len(batch)}\n')
        return real(batch, **kwargs)
    monkeypatch.setattr(graspnet_dump_eval, 'evaluate_frames', logged)

    def runs():
        lines = [line.split() for line in log.read_text().splitlines()]
        log.unlink()
        return {int(p) for p, _ in lines}, sum(int(n) for _, n in lines)
    serial = evaluate_dump(root, dump, 'realsense', [100], nproc=1, progress=False)[100]
    assert runs() == ({os.getpid()}, frames)
    metric = GraspNetMetric(data_root=root, camera='realsense', dump_dir=dump, progress=False)
    metric.compute_metrics([(100, f) for f in range(frames)])
    pids, evaluated = runs()
    assert len(pids) == 2 and os.getpid() not in pids and evaluated == frames
    with np.load(os.path.join(dump, 'eval_realsense', 'scene_0100.npz')) as z:
        np.testing.assert_array_equal(z['accuracy'], serial)
    assert serial.any()
    few = GraspNetMetric(data_root=root, camera='realsense', dump_dir=str(tmp_path / 'few'),
                         progress=False)
    for f in range(3):
        write_dump(few.dump_dir, 100, f, rows_for(centres))
    few.compute_metrics([(100, 0), (100, 1), (100, 2)])
    assert runs() == ({os.getpid()}, 3)


def test_work_units_split_few_scenes_into_pieces():
    few = work_units({100: [0, 1], 130: [0, 1], 160: [0, 1]}, 2)
    assert few == [(s, [f]) for s in (100, 130, 160) for f in (0, 1)]
    assert work_units({100: [0, 1, 2]}, 4) == [(100, [0]), (100, [1]), (100, [2])]
    # 96 frames on 2 processes: a quarter of what is left a piece, cut at scene ends
    frames = {s: list(range(32)) for s in (100, 130, 160)}
    pieces = work_units(frames, 2)
    assert [len(p[1]) for p in pieces] == [24, 8, 16, 12, 4, 8, 6, 4, 3, 2, 2, 1, 1, 1, 1,
                                              1, 1, 1]
    for s in frames:
        assert [f for p in pieces if p[0] == s for f in p[1]] == frames[s]
    many = work_units({s: [0, 1] for s in range(8)}, 2)  # 4 scenes a process: scene units
    assert many == [(s, [0, 1]) for s in range(8)]


def test_parallel_run_parses_each_model_once(scene, tmp_path, monkeypatch):
    root, dump, centres = scene
    write_eval_dataset(root, scene=130, frames=2)  # the same two objects as scene 100
    for s in (100, 130):
        for f in (0, 1):
            write_dump(dump, s, f, rows_for(centres))
    serial = evaluate_dump(root, dump, 'realsense', [100, 130], progress=False)
    log = tmp_path / 'parsed.log'
    real = scene_models.parse_dexnet_sdf

    def logged(path, *args, **kwargs):
        with open(log, 'a') as f:  # forked workers inherit this and append to one file
            f.write(f'{os.getpid()} {path}\n')
        return real(path, *args, **kwargs)
    monkeypatch.setattr(scene_models, 'parse_dexnet_sdf', logged)
    scene_models.clear_asset_caches()
    parallel = evaluate_dump(root, dump, 'realsense', [100, 130], nproc=2, progress=False)
    for s in serial:
        np.testing.assert_array_equal(parallel[s], serial[s])
    parsed = [line.split()[1] for line in log.read_text().splitlines()]
    assert sorted(parsed) == sorted(set(parsed)) and len(parsed) == 2  # each SDF once, in all
    assert str(os.getpid()) not in log.read_text().split()  # by the workers, not the parent


def test_broken_model_names_the_model_and_its_scenes(scene):
    root, dump, centres = scene
    for f in (0, 1):
        write_dump(dump, 100, f, rows_for(centres))
    with open(os.path.join(root, 'models', '001', 'textured.sdf'), 'w') as f:
        f.write('3 3 3\n0 0 0\n0.01\nnot numbers\n')
    scene_models.clear_asset_caches()
    with pytest.raises(EvaluationError, match=r'model .*001 \(scene 100\): .*not a dexnet SDF'):
        evaluate_dump(root, dump, 'realsense', [100], nproc=2, progress=False)
    with pytest.raises(EvaluationError, match=r'scene 100 frame 0: .*not a dexnet SDF'):
        evaluate_dump(root, dump, 'realsense', [100], progress=False)


def test_shared_models_follow_the_file(tmp_path):
    path = str(tmp_path / 'm.sdf')
    data = np.full((4, 4, 4), 0.001)
    write_dexnet_sdf(path, data, np.zeros(3), 0.01)
    scene_models.share_parsed_models(str(tmp_path / 'shared'))
    os.makedirs(tmp_path / 'shared')
    try:
        scene_models.clear_asset_caches()
        assert scene_models.cached_sdf(path).data[0, 0, 0] == 0.001
        assert len(os.listdir(tmp_path / 'shared')) == 1  # parsed once, shared
        write_dexnet_sdf(path, data * 2, np.zeros(3), 0.01)  # replaced: another key
        scene_models.clear_asset_caches()
        assert scene_models.cached_sdf(path).data[0, 0, 0] == 0.002
        assert len(os.listdir(tmp_path / 'shared')) == 2
    finally:
        scene_models.share_parsed_models(None)
        scene_models.clear_asset_caches()


def test_split_scene_equals_serial_and_resumes(scene, monkeypatch):
    root, dump, _ = scene
    centres = write_eval_dataset(root, scene=100, frames=3)
    for f, rows in enumerate((rows_for(centres), rows_for(centres)[1:], [])):
        write_dump(dump, 100, f, rows)
    serial = evaluate_dump(root, dump, 'realsense', [100], progress=False)[100]
    res = os.path.join(dump, 'res')
    split = evaluate_dump(root, dump, 'realsense', [100], nproc=2, results_dir=res,
                          progress=False)[100]  # frames 0-1 and 2 in two processes
    np.testing.assert_array_equal(serial, split)
    assert serial[0].any() and serial[1].any() and not serial[2].any()

    def boom(*a, **k):
        raise AssertionError('evaluated again')
    monkeypatch.setattr(graspnet_dump_eval, 'evaluate_scene', boom)
    again = evaluate_dump(root, dump, 'realsense', [100], nproc=2, results_dir=res,
                          progress=False)[100]
    np.testing.assert_array_equal(again, serial)


def test_metric_dumps_and_evaluates(scene):
    root, dump, centres = scene
    metric = GraspNetMetric(data_root=root, camera='realsense', dump_dir=dump, progress=False,
                            settings=dict(collision_thresh=0.01))
    samples = [dict(scene=100, frame=f, camera='realsense',
                    pred_grasps=torch.tensor(np.array(rows_for(centres)), dtype=torch.float32))
               for f in (0, 1)]
    metric.process({}, samples)
    figures = metric.evaluate(1)
    assert figures['graspnet/seen/AP'] > 0
    with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
        payload = json.load(f)
    assert payload['figures']['AP'] == pytest.approx(figures['graspnet/AP'])
    assert payload['settings'] == dict(collision_thresh=0.01)
    assert os.path.isfile(os.path.join(dump, 'scene_0100/realsense/0001.npy'))
    with pytest.raises(ValueError, match='camera'):
        metric.process({}, [dict(samples[0], camera='kinect')])


def test_frames_in_one_batch_equal_frames_alone(scene):
    """evaluate_frames (one force-closure pass for every object of every frame) gives each
    frame's evaluate_frame result, whatever the frames around it."""
    root, dump, centres = scene
    write_dump(dump, 100, 0, rows_for(centres))
    write_dump(dump, 100, 1, [top_down_grasp(0.7, centres[1], dy=0.004), rows_for(centres)[0]])
    inputs = graspnet_dump_eval.SceneInputs(root, 'realsense', 100)
    frames = [inputs.frame(dump, f) for f in (0, 1, 0)]
    batch = evaluate_frames(frames)
    for got, args in zip(batch, frames):
        want = evaluate_frame(*args)
        assert sorted(got) == sorted(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert (batch[0]['scores'] > 0).any() and (batch[1]['scores'] > 0).any()
