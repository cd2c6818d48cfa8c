#!/usr/bin/env python
"""Golden GraspClutter6D evaluation outputs from graspclutter6dAPI 0.0.3 itself, for
mmgrasp's GraspClutter6DMetric to reproduce (tests/data/gc6d_golden/).

Runs ONLY in graspclutter6dAPI's environment (setup_graspclutter6dapi_env.sh; numpy 1.23.4).
For every dump folder, camera and test scene it calls the API's own
``GraspClutter6DEval.eval_scene(scene, dump, return_list=True)`` unchanged (max_width 0.14,
background filter on, 13 annotations, missing dumps scoring zeros), with two arrangements:

* the API caches dex-net models as pickles in ``<root>/dex_models``: it runs on a COPY of the
  dataset (the given root is never written) and empties that cache before every scene;
* ``np.random.seed(seed)`` before every scene: building a dex-net model draws 1000 random SDF
  surface cells (used for queries outside the SDF grid). With an empty cache a scene's first
  instance of each model builds it and a duplicate loads its pickle, so one draw per distinct
  model in scene_gt order; ``GraspClutter6DMetric(sdf_sample_seed=seed)`` draws the same.
  ``sdf_out_of_bounds_queries`` in golden.json counts ``Sdf3D.is_out_of_bounds`` hits; 0 means
  the draw cannot affect a result.

Writes into OUT: ``<dump>_<camera>.npz`` (``accuracy`` (S, 13, 50, 6), ``scene_ids``, and per
image ``grasps_SSSSSS_IIIIII`` / ``scores_...`` / ``collision_...``: the grasps the API kept,
sorted by predicted score, their friction score or -1, the collision-or-empty mask) and
``golden.json`` (AP, AP0.4, AP0.8 per dump and camera as ``eval_all`` computes them, versions).

    python tools/analysis/golden/make_gc6d_eval_golden.py ROOT OUT --cameras realsense-d435 \
        zivid --dump gt=DUMPS/gt --dump random=DUMPS/random
"""
import argparse
import contextlib
import importlib.metadata
import io
import json
import os
import platform
import shutil
import sys
import tempfile

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='GraspClutter6D root (read only; the API runs on a copy)')
    p.add_argument('out')
    p.add_argument('--cameras', nargs='+', default=['realsense-d435', 'zivid'])
    p.add_argument('--dump', action='append', required=True, metavar='NAME=DIR')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--dataset-info', default=None, metavar='JSON')
    return p.parse_args(argv)


class _OutOfBoundsCounter:
    def __init__(self):
        from graspclutter6dAPI.utils.dexnet.grasping.meshpy.sdf import Sdf3D
        self.count = 0
        original = Sdf3D.is_out_of_bounds

        def counting(sdf, coords):
            out = original(sdf, coords)
            self.count += bool(out)
            return out
        Sdf3D.is_out_of_bounds = counting


def main(argv=None):
    args = parse_args(argv)
    import open3d
    from graspclutter6dAPI import GraspClutter6DEval
    dumps = dict(d.split('=', 1) for d in args.dump)
    os.makedirs(args.out, exist_ok=True)
    counter = _OutOfBoundsCounter()
    golden = {'seed': args.seed, 'cameras': args.cameras,
              # the installed distribution's version: the module's __version__ still says 0.0.1
              'graspclutter6dAPI': importlib.metadata.version('graspclutter6dAPI'),
              'numpy': np.__version__, 'open3d': open3d.__version__,
              'python': platform.python_version(), 'meta': {}, 'dumps': {}}
    if args.dataset_info:
        with open(args.dataset_info) as f:
            golden['meta'] = json.load(f)
    with tempfile.TemporaryDirectory(prefix='gc6d-golden-') as tmp:
        root = os.path.join(tmp, 'root')
        shutil.copytree(args.root, root)
        for camera in args.cameras:
            ge = GraspClutter6DEval(root, camera, split='test')
            for name, dump_dir in dumps.items():
                details, accuracy = {}, []
                counter.count = 0
                for scene in ge.sceneIds:
                    shutil.rmtree(os.path.join(root, 'dex_models'), ignore_errors=True)
                    np.random.seed(args.seed)
                    with contextlib.redirect_stdout(io.StringIO()):
                        acc, grasps, scores, collision = ge.eval_scene(scene, dump_dir,
                                                                       return_list=True)
                    accuracy.append(np.stack(acc))
                    for ann in range(13):
                        if not os.path.isfile(os.path.join(dump_dir, f'{scene:06d}', ge.camera,
                                                           f'{ge.annId2ImgId(ann):06d}.npy')):
                            continue
                        key = f'{scene:06d}_{ge.annId2ImgId(ann):06d}'
                        details['grasps_' + key] = np.asarray(grasps[ann]).reshape(-1, 17)
                        details['scores_' + key] = np.asarray(scores[ann], np.float64)
                        details['collision_' + key] = np.asarray(collision[ann], bool)
                acc = np.stack(accuracy)
                np.savez_compressed(os.path.join(args.out, f'{name}_{ge.camera}.npz'),
                                    accuracy=acc, scene_ids=np.array(ge.sceneIds), **details)
                flat = acc.transpose(3, 0, 1, 2).reshape(6, -1).mean(axis=1)
                entry = {'AP': 100 * float(np.mean(acc)), 'AP0.4': 100 * float(flat[1]),
                         'AP0.8': 100 * float(flat[3]), 'scene_ids': list(ge.sceneIds),
                         'kept_grasps': int(sum(len(v) for k, v in details.items()
                                                if k.startswith('scores_'))),
                         'sdf_out_of_bounds_queries': counter.count}
                golden['dumps'][f'{name}_{ge.camera}'] = entry
                print(f'{name} {ge.camera}: AP {entry["AP"]:.3f} AP0.4 {entry["AP0.4"]:.3f} '
                      f'AP0.8 {entry["AP0.8"]:.3f}, {entry["kept_grasps"]} kept grasps, '
                      f'out-of-grid SDF queries {counter.count}', file=sys.stderr)
        assert not os.path.exists(os.path.join(args.root, 'dex_models')), 'wrote into the root'
    tmp = os.path.join(args.out, 'golden.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(golden, f, indent=1)
    os.replace(tmp, os.path.join(args.out, 'golden.json'))


if __name__ == '__main__':
    main()
