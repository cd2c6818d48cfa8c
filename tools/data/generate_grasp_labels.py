#!/usr/bin/env python
"""GraspNet-1Billion grasp labels of one's own objects, from their meshes (metres).

Every mesh of MODELS (a dataset's ``models/`` folder of ``%03d/`` subfolders, or a folder of
``.obj`` / ``.ply`` / ``.stl`` meshes) is checked first (closed, wound one way, a positive
volume, a size in metres: mmgrasp/datasets/labelgen/intake.py); a refused mesh gets one line on
stderr and nothing is written for it (nothing at all when every mesh is refused). For each
accepted mesh, times ``--scale``, writes under OUT:

- ``models/%03d/textured.sdf`` (dexnet's SDF of the mesh; with ``--use-dexnet-sdf`` an existing
  ``textured.sdf`` beside the mesh is used as it is), ``textured.obj`` and ``nontextured.ply``
  (kept where they exist): what the evaluator reads;
- ``grasp_label/%03d_labels.npz``: points, offsets (angle, depth, width), collision, scores (μ
  of 0.1 ... 1.0, -1 infeasible) on the gripper's views x angles x depths, computed with the
  evaluator's physics (mmgrasp/datasets/labelgen/object_labels.py);
- ``grasp_label/gripper.json``: the gripper the labels are for (the label store and the
  training config check it).

Objects run in ``--nproc`` processes, each written atomically with a ``%03d_labels.json`` stamp
of its inputs and settings: a rerun skips objects whose stamp matches (``--force`` redoes
them). ``--max-memory`` bounds each process's working memory (cells closed at once).
``--label-backend torch`` (the default) computes the labels batched in torch, on CUDA when
present (``--device``); ``numpy`` is the reference it is tested against.

    python tools/data/generate_grasp_labels.py my_meshes/ data/mine --nproc 2
    python tools/data/generate_grasp_labels.py my_meshes/ data/mine_narrow \\
        --gripper max_width=0.08 finger_width=0.015
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
from mmgrasp.datasets.synthetic.boxes import SDF_RESOLUTION
from mmgrasp.geometry import parse_gripper_options, read_gripper_file


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('models', help="a folder of meshes, or a dataset's models/ folder")
    p.add_argument('out', help='dataset root to write models/ and grasp_label/ into')
    p.add_argument('--gripper', nargs='+', default=[], metavar='KEY=VALUE|FILE.json',
                   help="the gripper's fields (max_width=0.08 finger_width=0.015 ...; "
                        "mmgrasp.geometry.Gripper) or a gripper.json; default GraspNet's")
    p.add_argument('--scale', type=float, default=1.0,
                   help='factor from the mesh units to metres (0.001 for millimetres)')
    p.add_argument('--ids', type=int, nargs='+', default=None, help='only these object ids')
    p.add_argument('--voxel-size', type=float, default=LABEL_VOXEL,
                   help='label point spacing: voxel size of the surface downsampling (metres)')
    p.add_argument('--sdf-resolution', type=float, default=SDF_RESOLUTION,
                   help='cell size of the SDF written to textured.sdf (metres)')
    p.add_argument('--sdf-backend', choices=['open3d', 'numpy'], default='open3d',
                   help="mesh signed distances: open3d (pip install 'mmgrasp[labels]') or "
                        'numpy (exact brute force, for meshes of a few hundred triangles)')
    p.add_argument('--label-backend', choices=['torch', 'numpy'], default='torch',
                   help='the label physics: torch (batched; CUDA when present, else the CPU) '
                        'or numpy (the reference; the same labels, slower)')
    p.add_argument('--device', default=None,
                   help="torch device of the torch backend (default: 'cuda' when present)")
    p.add_argument('--use-dexnet-sdf', action='store_true',
                   help='use a textured.sdf found beside a mesh instead of computing one')
    p.add_argument('--nproc', type=int, default=1, help='objects labelled in parallel')
    p.add_argument('--max-memory', type=float, default=1.5, metavar='GIB',
                   help='working memory per process (GiB), the cells closed at once')
    p.add_argument('--seed', type=int, default=0, help='seed of the surface samples')
    p.add_argument('--force', action='store_true', help='redo objects that are up to date')
    return p.parse_args(argv)


def stamp_of(path: str, args, gripper) -> dict:
    st = os.stat(path)
    return dict(mesh=os.path.abspath(path), size=st.st_size, mtime_ns=st.st_mtime_ns,
                scale=args.scale, gripper=gripper.to_dict(), voxel_size=args.voxel_size,
                sdf_resolution=args.sdf_resolution, sdf_backend=args.sdf_backend,
                use_dexnet_sdf=args.use_dexnet_sdf, seed=args.seed, version=1,
                label_backend=args.label_backend)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        gripper = parse_gripper_options(args.gripper)
        meshes = find_meshes(args.models)
    except ValueError as err:
        print(f'generate_grasp_labels: {err}', file=sys.stderr)
        return 2
    if args.ids is not None:
        missing = sorted(set(args.ids) - set(meshes))
        if missing:
            print(f'generate_grasp_labels: no mesh for ids {missing} in {args.models}',
                  file=sys.stderr)
            return 2
        meshes = {i: meshes[i] for i in args.ids}
    intake = intake_meshes(meshes, args.scale)
    for line in intake.refused:
        print(f'generate_grasp_labels: {line}', file=sys.stderr, flush=True)
    if not intake.accepted:
        print(f'generate_grasp_labels: every mesh of {args.models} was refused; nothing '
              'written', file=sys.stderr)
        return 2
    meshes = {i: meshes[i] for i in intake.accepted}
    label_dir = os.path.join(args.out, 'grasp_label')
    os.makedirs(label_dir, exist_ok=True)
    gripper_path = os.path.join(label_dir, 'gripper.json')
    if os.path.isfile(gripper_path) and not read_gripper_file(gripper_path).same_as(gripper):
        if not args.force:
            print(f'generate_grasp_labels: {gripper_path} holds the gripper '
                  f'{read_gripper_file(gripper_path).describe()}, not {gripper.describe()}: '
                  f'one dataset holds labels of one gripper; write elsewhere or pass --force to '
                  f'relabel every object', file=sys.stderr)
            return 2
    with open(gripper_path + '.tmp', 'w') as f:
        f.write(gripper.to_json())
    os.replace(gripper_path + '.tmp', gripper_path)
    todo = {}
    for obj, path in meshes.items():
        stamp = stamp_of(path, args, gripper)
        stamp_path = os.path.join(label_dir, f'{obj:03d}_labels.json')
        done = os.path.isfile(os.path.join(label_dir, f'{obj:03d}_labels.npz')) and \
            os.path.isfile(stamp_path) and json.load(open(stamp_path)) == stamp
        if done and not args.force:
            print(f'[labels] object {obj:03d}: up to date, skipped', flush=True)
        else:
            todo[obj] = (labelling_path(obj, path, intake.accepted[obj], args.out, args.scale),
                         stamp)
    print(f'[labels] {len(todo)} of {len(meshes)} objects to label with gripper '
          f'{gripper.describe()}, {args.nproc} process(es)', flush=True)
    t0, failed = time.time(), []
    with label_pool(args.nproc) as pool:
        futures = {pool.submit(label_mesh_file, obj, path, args.out, gripper, args.voxel_size,
                               args.sdf_resolution, args.sdf_backend, args.max_memory,
                               args.seed, args.use_dexnet_sdf, stamp, args.label_backend,
                               args.device): obj
                   for obj, (path, stamp) in todo.items()}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            obj = futures[fut]
            try:
                _, points, share, seconds = fut.result()
                print(f'[labels] object {obj:03d} ({n}/{len(todo)}): {points} points, '
                      f'{100 * share:.1f} % of cells graspable, {seconds:.0f} s '
                      f'(elapsed {time.time() - t0:.0f} s)', flush=True)
            except Exception as err:  # noqa: BLE001 - reported per object, the rest go on
                failed.append(obj)
                print(f'[labels] object {obj:03d} ({meshes[obj]}) FAILED: '
                      f'{type(err).__name__}: {err}', file=sys.stderr, flush=True)
    return 1 if failed or intake.refused else 0


if __name__ == '__main__':
    sys.exit(main())
