#!/usr/bin/env python
"""Run HGGD's ``convert_grasp.py`` unmodified on a synthetic root and keep what it wrote, with
the random draws it made, as the golden of mmgrasp's per-image grasp asset.

Runs in a venv of its own (``tools/analysis/golden/setup_hggd_labels_env.sh``), never in mmgrasp's:
the script pins numpy 1.23 and imports open3d and grasp_nms. Nothing of the script is edited;
from outside, this driver

* loads ``convert_grasp.py`` as a module while ``customgraspnetAPI.GraspNet`` is redirected to
  the synthetic root (the module builds ``GraspNet('/ssd/graspnet', split='train')`` at import),
  then points the module globals the conversion reads (``graspnet_root``, ``output_path``,
  ``dataset``, ``annIds``) at the synthetic root and a scratch folder and calls its ``run``;
* seeds ``random`` (the script seeds only numpy) and records every ``random.sample`` draw,
  tagged by the dataset call it follows (model points after ``loadSceneModel``, the 5 000-grasp
  subsample after ``loadGrasp``, the visibility cloud after ``loadScenePointCloud``);
* records the visibility mask ``remove_invisible_grasp_points`` returns (the script computes it
  but does not apply it to the saved arrays).

Output: one npz with, per frame, under ``scene_%04d/frame_%04d/``, the ten arrays of
``{ann}_view.npz`` as written, the draws and ``visible_mask``; and a JSON record (environment,
file digests of the script, input digest, counts, wall time and peak memory). The model-point
and cloud draws are kept as sets, ``np.packbits`` of a mask over the population
(``draw_model_points_bits``, ``draw_cloud_bits``; sizes in the record): the script reads them
through minima and maxima only, so their order does not matter. The grasp subsample, whose
order decides NMS ties, is kept in draw order (``draw_subsample``, int32) when there was one.

    HGGD_VENV/bin/python tools/analysis/golden/make_hggd_labels_golden.py HGGD_SRC DATA_ROOT \
        OUT_NPZ OUT_JSON --scenes 0 1 --frames 2 --seed 0
"""
import argparse
import hashlib
import importlib.util
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time

import numpy as np

FIELDS = ('centers_2d', 'opens_2d', 'thetas_rad', 'gammas_rad', 'betas_rad', 'widths_2d',
          'heights_2d', 'scores_from_6d', 'object_ids', 'center_z_depths')


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('hggd', help='a checkout of THU-VCLab/HGGD (convert_grasp.py, util.py, '
                                'customgraspnetAPI/)')
    p.add_argument('root', help='dataset root written by tools/data/make_synthetic.py')
    p.add_argument('out', help='golden npz to write')
    p.add_argument('record', help='JSON record to write')
    p.add_argument('--camera', default='realsense', choices=('realsense', 'kinect'))
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True, help='annotations 0..N-1 per scene')
    p.add_argument('--seed', type=int, default=0, help="seed of Python's random module")
    p.add_argument('--make-synthetic-args', default=None, metavar='JSON',
                   help='the make_synthetic.py arguments that wrote ROOT (a JSON list), recorded '
                        'for the golden test to rewrite ROOT')
    return p.parse_args(argv)


def input_digest(root: str, camera: str, scenes, frames: int) -> str:
    """SHA-1 over what the conversion reads of ``scenes`` (npz and PNG files carry
    timestamps, so their arrays are hashed, not their bytes): grasp and collision labels,
    annotations, camera poses and intrinsics, model PLY files and depth images."""
    import cv2  # both environments have it; imported here so the test env imports this module
    h = hashlib.sha1()

    def arrays(path):
        with np.load(path) as npz:
            for key in sorted(npz.files):
                h.update(f'{os.path.relpath(path, root)}/{key}'.encode() + npz[key].tobytes())

    def raw(path):
        with open(path, 'rb') as f:
            h.update(os.path.relpath(path, root).encode() + hashlib.sha1(f.read()).digest())

    objects = set()
    for scene in sorted(scenes):
        sdir = os.path.join(root, 'scenes', f'scene_{scene:04d}')
        cdir = os.path.join(sdir, camera)
        raw(os.path.join(sdir, 'object_id_list.txt'))
        with open(os.path.join(sdir, 'object_id_list.txt')) as f:
            objects.update(int(line) for line in f if line.strip())
        arrays(os.path.join(root, 'collision_label', f'scene_{scene:04d}', 'collision_labels.npz'))
        for name in ('camera_poses.npy', 'camK.npy'):
            raw(os.path.join(cdir, name))
        for frame in range(frames):
            raw(os.path.join(cdir, 'annotations', f'{frame:04d}.xml'))
            depth = cv2.imread(os.path.join(cdir, 'depth', f'{frame:04d}.png'),
                               cv2.IMREAD_UNCHANGED)
            h.update(f'{scene}/{frame}/depth'.encode() + depth.tobytes())
    for obj in sorted(objects):
        arrays(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz'))
        raw(os.path.join(root, 'models', f'{obj:03d}', 'nontextured.ply'))
    return h.hexdigest()


class DrawRecorder:
    """Wraps ``random.sample`` and the dataset calls that precede each draw of the script."""

    def __init__(self):
        self.frame = None
        self.stage = None
        self.draws = {}  # (scene, frame) -> {name: indices}
        self.visible = {}
        self.sizes = {}
        self._sample = random.sample

    def sample(self, population, k, **kwargs):
        out = self._sample(population, k, **kwargs)
        name = {'models': 'draw_model_points', 'grasps': 'draw_subsample',
                'cloud': 'draw_cloud'}[self.stage]
        slot = self.draws.setdefault(self.frame, {})
        assert name not in slot, f'two draws at stage {self.stage} of frame {self.frame}'
        slot[name] = np.asarray(out, dtype=np.int32)
        self.sizes.setdefault(self.frame, {})[name] = len(population)
        return out

    def tag(self, method, stage):
        def wrapped(*args, **kwargs):
            if stage == 'models':
                self.frame = (kwargs['sceneId'], kwargs['annId'])
            self.stage = stage
            return method(*args, **kwargs)
        return wrapped

    def visibility(self, function):
        def wrapped(*args, **kwargs):
            mask = function(*args, **kwargs)
            self.visible[self.frame] = np.asarray(mask, dtype=bool)
            return mask
        return wrapped


def file_sha1(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.sha1(f.read()).hexdigest()


def load_convert_module(hggd: str, root: str, camera: str, scenes):
    """convert_grasp as a module, its import-time GraspNet built on ``root``."""
    sys.path.insert(0, hggd)
    import customgraspnetAPI
    real = customgraspnetAPI.GraspNet

    def redirected(_root, camera=camera, split='train'):
        return real(root, camera=camera, split=(min(scenes), max(scenes) + 1))

    customgraspnetAPI.GraspNet = redirected
    try:
        spec = importlib.util.spec_from_file_location(
            'convert_grasp', os.path.join(hggd, 'convert_grasp.py'))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        customgraspnetAPI.GraspNet = real
    module.camera = camera  # the script's global (its value: realsense)
    module.dataset = real(root, camera=camera, split=(min(scenes), max(scenes) + 1))
    return module


def main(argv=None) -> None:
    args = parse_args(argv)
    root = os.path.abspath(args.root)
    module = load_convert_module(args.hggd, root, args.camera, args.scenes)
    recorder = DrawRecorder()
    random.sample = recorder.sample
    dataset = module.dataset
    dataset.loadSceneModel = recorder.tag(dataset.loadSceneModel, 'models')
    dataset.loadGrasp = recorder.tag(dataset.loadGrasp, 'grasps')
    dataset.loadScenePointCloud = recorder.tag(dataset.loadScenePointCloud, 'cloud')
    module.remove_invisible_grasp_points = recorder.visibility(
        module.remove_invisible_grasp_points)
    work = tempfile.mkdtemp(prefix='hggd_convert_')
    module.graspnet_root = root
    module.output_path = work
    module.annIds = range(args.frames)
    random.seed(args.seed)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    module.run(list(args.scenes))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    arrays, counts = {}, {}
    for scene in args.scenes:
        for frame in range(args.frames):
            key = f'scene_{scene:04d}/frame_{frame:04d}'
            path = os.path.join(work, '6d_dataset', f'scene_{scene}', 'grasp_labels',
                                f'{frame}_view.npz')
            with np.load(path) as npz:
                assert sorted(npz.files) == sorted(FIELDS), npz.files
                for name in FIELDS:
                    arrays[f'{key}/{name}'] = npz[name]
            sizes = recorder.sizes[(scene, frame)]
            for name, draw in recorder.draws[(scene, frame)].items():
                if name == 'draw_subsample':
                    arrays[f'{key}/{name}'] = draw
                    continue
                mask = np.zeros(sizes[name], dtype=bool)
                mask[draw] = True
                arrays[f'{key}/{name}_bits'] = np.packbits(mask)
            arrays[f'{key}/visible_mask'] = recorder.visible[(scene, frame)]
            with open(os.path.join(work, '6d_dataset', f'scene_{scene}', 'infos',
                                   f'{frame}_info.json')) as f:
                info = json.load(f)
            counts[key] = dict(saved=int(len(arrays[f'{key}/object_ids'])),
                               after_nms=int(len(recorder.visible[(scene, frame)])),
                               visible=int(info['numgrasp']),
                               draw_populations=recorder.sizes[(scene, frame)])
    np.savez_compressed(args.out, **arrays)
    import open3d
    from importlib.metadata import version
    record = dict(
        reference='THU-VCLab/HGGD@69580ff convert_grasp.py (unmodified)',
        files={name: file_sha1(os.path.join(args.hggd, name))
               for name in ('convert_grasp.py', 'util.py', 'customgraspnetAPI/graspnet.py',
                            'customgraspnetAPI/grasp.py', 'customgraspnetAPI/utils/utils.py',
                            'customgraspnetAPI/utils/rotation.py')},
        command=' '.join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:])),
        environment=dict(python=platform.python_version(), numpy=np.__version__,
                         open3d=open3d.__version__, grasp_nms=version('grasp_nms'),
                         stubs=[]),
        camera=args.camera, scenes=list(args.scenes), frames=args.frames,
        random_seed=args.seed,
        make_synthetic=json.loads(args.make_synthetic_args or 'null'),
        input_sha1=input_digest(root, args.camera, args.scenes, args.frames), counts=counts,
        cost=dict(wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                  frames=len(args.scenes) * args.frames,
                  s_per_frame=round(wall / (len(args.scenes) * args.frames), 3),
                  rss_before_mib=round(rss_before, 1),
                  peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                     1)))
    with open(args.record, 'w') as f:
        json.dump(record, f, indent=1)
    print(json.dumps(record['counts'], indent=1))
    print(f'wall {wall:.1f} s, peak RSS {record["cost"]["peak_rss_mib"]} MiB')


if __name__ == '__main__':
    main()
