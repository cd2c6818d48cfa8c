#!/usr/bin/env python
"""A GraspNet-1Billion-layout dataset from a folder of object meshes, in one command.

    python tools/data/make_dataset.py MESHES OUT [--scenes N] [--views V] [--gripper ...]
        [--nproc P] [--shard I/N]

Steps (``--steps``, all by default, in this order):

- every mesh of MESHES is checked (mmgrasp/datasets/labelgen/intake.py); a refused mesh gets one
  line and no file; when every mesh is refused nothing is written;
- ``labels``: each object's ``models/%03d/`` and ``grasp_label/%03d_labels.npz`` (the label API
  of mmgrasp/datasets/labelgen, as generate_grasp_labels.py);
- ``scenes``: N training scenes (ids 0, 1, ...) and ``--test-scenes`` test scenes (100, 101,
  ...): ``--objects`` objects dropped onto the table by pybullet and checked on the meshes,
  ``--views`` of GraspNet's 256 camera poses per camera, depth, labels and RGB ray-cast from the
  meshes (optional Kinect depth noise), annotations, meta, then the scene collision labels
  (mmgrasp/datasets/labelgen/scenegen.py);
- ``store``: the label store and GSNet's graspness of the training scenes.

Every file is written under a temporary name and renamed; a rerun skips the objects and scenes
whose stamp (inputs and settings) matches (``--force`` redoes them). ``--shard I/N`` makes this
run the I-th of N (0-based) over objects (``labels``) and scenes (``scenes``), so that N jobs of
a cluster (a SLURM array, torchrun ranks) build one dataset: first every shard with
``--steps labels``, then every shard with ``--steps scenes``, then one ``--steps store``.
"""
import argparse
import concurrent.futures as cf
import json
import os
import sys
import time

from mmgrasp.datasets.labelgen.intake import intake_meshes, labelling_path
from mmgrasp.datasets.labelgen.objects import (LABEL_VOXEL, find_meshes, label_mesh_file,
                                                label_pool)
from mmgrasp.datasets.labelgen.scenegen import (DEPTH_NOISE, NUM_VIEWS, make_scene, scene_ids,
                                                scene_objects)
from mmgrasp.datasets.synthetic.boxes import SDF_RESOLUTION
from mmgrasp.geometry import parse_gripper_options, read_gripper_file

STEPS = ('labels', 'scenes', 'store')
PROG = 'make_dataset'


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('meshes', help="a folder of .obj/.ply/.stl meshes, or a dataset's models/")
    p.add_argument('out', help='the dataset root to write')
    p.add_argument('--scenes', type=int, default=10, help='training scenes (ids 0 ...)')
    p.add_argument('--test-scenes', type=int, default=None,
                   help='test scenes (ids 100 ...); default a fifth of --scenes, at least 1')
    p.add_argument('--objects', type=int, default=10, help='objects per scene (at most all)')
    p.add_argument('--views', type=int, default=NUM_VIEWS,
                   help=f'frames per camera, spread over the {NUM_VIEWS} poses of the trajectory')
    p.add_argument('--cameras', nargs='+', default=['realsense', 'kinect'],
                   choices=['realsense', 'kinect'])
    p.add_argument('--image-size', type=int, nargs=2, default=(1280, 720), metavar=('W', 'H'))
    p.add_argument('--depth-noise', choices=DEPTH_NOISE, default='none',
                   help="'kinect': Nguyen et al. (2012)'s axial noise on the rendered depth")
    p.add_argument('--gripper', nargs='+', default=[], metavar='KEY=VALUE|FILE.json',
                   help="the gripper's fields (mmgrasp.geometry.Gripper) or a gripper.json")
    p.add_argument('--scale', type=float, default=1.0,
                   help='factor from the mesh units to metres (0.001 for millimetres)')
    p.add_argument('--voxel-size', type=float, default=LABEL_VOXEL,
                   help='label point spacing (metres)')
    p.add_argument('--sdf-resolution', type=float, default=SDF_RESOLUTION,
                   help='cell size of textured.sdf (metres)')
    p.add_argument('--sdf-backend', choices=['open3d', 'numpy'], default='open3d')
    p.add_argument('--label-backend', choices=['torch', 'numpy'], default='torch',
                   help='the label physics: torch (batched; CUDA when present, else the CPU) '
                        'or numpy (the reference; the same labels, slower)')
    p.add_argument('--device', default=None,
                   help="torch device of the torch backend (default: 'cuda' when present)")
    p.add_argument('--max-memory', type=float, default=1.5, metavar='GIB',
                   help='working memory per process (GiB)')
    p.add_argument('--nproc', type=int, default=1, help='objects / scenes in parallel')
    p.add_argument('--shard', default='0/1', metavar='I/N', help='run the I-th of N shards')
    p.add_argument('--steps', nargs='+', choices=STEPS, default=list(STEPS))
    p.add_argument('--cache', default=None, help='label store cache (default $MMGRASP_CACHE)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--force', action='store_true', help='redo what is up to date')
    return p.parse_args(argv)


def _shard(text: str) -> tuple:
    index, sep, count = text.partition('/')
    if not (sep and index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise ValueError(f'--shard {text!r}: expected I/N with 0 <= I < N')
    return int(index), int(count)


def _up_to_date(path: str, stamp: dict) -> bool:
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        return json.load(f) == stamp


def _pool(nproc: int, jobs: dict, tag: str, describe) -> int:
    """Run {key: (fn, args)} in ``nproc`` processes with a progress line each; failures."""
    t0, failed = time.time(), 0
    with label_pool(nproc) as pool:
        futures = {pool.submit(fn, *args): key for key, (fn, args) in jobs.items()}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            key = futures[fut]
            try:
                print(f'[{tag}] {describe(key, fut.result())} ({n}/{len(jobs)}, elapsed '
                      f'{time.time() - t0:.0f} s)', flush=True)
            except Exception as err:  # noqa: BLE001 - reported per item, the rest go on
                failed += 1
                print(f'{PROG}: [{tag}] {key} FAILED: {type(err).__name__}: {err}',
                      file=sys.stderr, flush=True)
    return failed


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        index, count = _shard(args.shard)
        gripper = parse_gripper_options(args.gripper)
        found = find_meshes(args.meshes)
        test = max(1, args.scenes // 5) if args.test_scenes is None else args.test_scenes
        scenes = scene_ids(args.scenes, test)
        if args.views < 1 or args.objects < 1:
            raise ValueError('--views and --objects take a positive count')
    except ValueError as err:
        print(f'{PROG}: {err}', file=sys.stderr)
        return 2
    intake = intake_meshes(found, args.scale)
    for line in intake.refused:
        print(f'{PROG}: {line}', file=sys.stderr, flush=True)
    if not intake.accepted:
        print(f'{PROG}: every mesh of {args.meshes} was refused; nothing written',
              file=sys.stderr)
        return 2
    ids = sorted(intake.accepted)
    print(f'[make_dataset] {len(ids)} objects accepted, {len(intake.refused)} refused; '
          f'shard {index}/{count}; steps {" ".join(args.steps)}', flush=True)
    failed = len(intake.refused)
    label_dir = os.path.join(args.out, 'grasp_label')
    if 'labels' in args.steps:
        os.makedirs(label_dir, exist_ok=True)
        gripper_path = os.path.join(label_dir, 'gripper.json')
        if os.path.isfile(gripper_path) and not read_gripper_file(gripper_path).same_as(
                gripper) and not args.force:
            print(f'{PROG}: {gripper_path} holds the gripper '
                  f'{read_gripper_file(gripper_path).describe()}, not {gripper.describe()}: '
                  'write elsewhere or pass --force', file=sys.stderr)
            return 2
        if not os.path.isfile(gripper_path) or args.force:
            with open(gripper_path + f'.tmp{os.getpid()}', 'w') as f:
                f.write(gripper.to_json())
            os.replace(gripper_path + f'.tmp{os.getpid()}', gripper_path)
        jobs = {}
        for obj in ids[index::count]:
            path = found[obj]
            st = os.stat(path)
            stamp = dict(mesh=os.path.abspath(path), size=st.st_size, mtime_ns=st.st_mtime_ns,
                         scale=args.scale, gripper=gripper.to_dict(), voxel_size=args.voxel_size,
                         sdf_resolution=args.sdf_resolution, sdf_backend=args.sdf_backend,
                         label_backend=args.label_backend, use_dexnet_sdf=False, seed=args.seed,
                         version=1)
            if not args.force and os.path.isfile(
                    os.path.join(label_dir, f'{obj:03d}_labels.npz')) and _up_to_date(
                    os.path.join(label_dir, f'{obj:03d}_labels.json'), stamp):
                print(f'[labels] object {obj:03d}: up to date, skipped', flush=True)
                continue
            mesh_path = labelling_path(obj, path, intake.accepted[obj], args.out, args.scale)
            jobs[f'object {obj:03d}'] = (label_mesh_file, (
                obj, mesh_path, args.out, gripper, args.voxel_size, args.sdf_resolution,
                args.sdf_backend, args.max_memory, args.seed, False, stamp, args.label_backend,
                args.device))
        print(f'[labels] {len(jobs)} objects to label, gripper {gripper.describe()}', flush=True)
        failed += _pool(args.nproc, jobs, 'labels', lambda key, r: f'{key}: {r[1]} points, '
                        f'{100 * r[2]:.1f} % of cells graspable, {r[3]:.0f} s')
    if 'scenes' in args.steps:
        gripper_path = os.path.join(label_dir, 'gripper.json')
        missing = [i for i in ids if not os.path.isfile(os.path.join(
            label_dir, f'{i:03d}_labels.json'))]
        if missing or not os.path.isfile(gripper_path):
            print(f'{PROG}: no labels of objects {missing} in {label_dir}: run --steps labels '
                  'of every shard first', file=sys.stderr)
            return 3
        gripper = read_gripper_file(gripper_path)
        settings = dict(views=args.views, cameras=args.cameras, image_size=list(args.image_size),
                        depth_noise=args.depth_noise, seed=args.seed, objects=args.objects)
        jobs = {}
        for scene in scenes[index::count]:
            chosen = [ids[k] for k in scene_objects(len(ids), args.objects, args.seed, scene)]
            labels = {}
            for i in chosen:
                with open(os.path.join(label_dir, f'{i:03d}_labels.json')) as f:
                    labels[f'{i:03d}'] = json.load(f)
            stamp = dict(settings, object_ids=chosen, labels=labels, version=1)
            done = os.path.join(args.out, 'scenes', f'scene_{scene:04d}', 'make_dataset.json')
            if not args.force and _up_to_date(done, stamp):
                print(f'[scenes] scene {scene:04d}: up to date, skipped', flush=True)
                continue
            jobs[f'scene {scene:04d}'] = (make_scene, (
                args.out, scene, chosen, [intake.accepted[i] for i in chosen], gripper,
                settings, stamp))
        print(f'[scenes] {len(jobs)} of {len(scenes[index::count])} scenes to make, '
              f'{args.views} views x {len(args.cameras)} camera(s)', flush=True)
        failed += _pool(args.nproc, jobs, 'scenes',
                        lambda key, r: f'{key}: {r[0]} objects at rest, {r[1]:.0f} s')
    if 'store' in args.steps and not failed:
        if count > 1:
            print(f'{PROG}: --steps store runs once, over every shard\'s scenes: drop --shard',
                  file=sys.stderr)
            return 2
        from mmgrasp.datasets.graspness import generate_graspness
        train = [s for s in scenes if s < 100]
        for camera in args.cameras:
            written = generate_graspness(args.out, camera, train, args.cache,
                                         overwrite=args.force)
            print(f'[store] {camera}: label store ready, {written} graspness files written',
                  flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
