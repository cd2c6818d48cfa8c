"""GraspNetMetric's protocol on synthetic test scenes whose labels come from the same physics:
grasps made from the labels score high, random grasps near zero, grasps moved off their
objects low."""
import numpy as np
import pytest

from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.evaluation.graspnet_dump_eval import evaluate_dump, summarize
from label_grasps import label_grasps, random_grasps, shifted_grasps

SCENES = (100, 160)


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('sanity') / 'graspnet')
    write_synthetic_dataset(root, scenes=1, frames=2, objects=6, points_per_object=200,
                            grid=(60, 12, 4), image_size=(320, 180), cameras=('realsense', ),
                            seed=0, progress=False, test_scenes=SCENES)
    return root


def evaluate(root, dump, make):
    rng = np.random.default_rng(0)
    for s in SCENES:
        for f in (0, 1):
            rows = make(root, s, f, rng)
            folder = dump / f'scene_{s:04d}' / 'realsense'
            folder.mkdir(parents=True, exist_ok=True)
            np.save(folder / f'{f:04d}.npy', rows)
    return summarize(evaluate_dump(root, str(dump), 'realsense', SCENES, nproc=2,
                                   progress=False))


@pytest.mark.slow
def test_label_random_and_shifted_grasps(dataset, tmp_path):
    gt = evaluate(dataset, tmp_path / 'gt', lambda r, s, f, g: label_grasps(r, s, f, 10, g))
    rnd = evaluate(dataset, tmp_path / 'random', lambda r, s, f, g: random_grasps(r, s, f, 50, g))
    off = evaluate(dataset, tmp_path / 'shifted',
                   lambda r, s, f, g: shifted_grasps(label_grasps(r, s, f, 10, g), g))
    print('label', gt, 'random', rnd, 'shifted', off)
    assert gt['AP'] >= 80 and gt['seen/AP'] >= 80 and gt['novel/AP'] >= 80
    assert rnd['AP'] < 5
    assert off['AP'] < 10
    # mu <= 0.4 labels: every force-closure grasp passes at 0.4 already
    assert gt['AP0.4'] == pytest.approx(gt['AP0.8'])
