#!/usr/bin/env python
"""Pictures of training samples as the pipeline gives them, like mmdet's browse_dataset.

    python tools/analysis/browse_dataset.py CONFIG [--output-dir DIR] [--num 5]
        [--colour graspness|mu] [--cfg-options ...]

For each of the first ``--num`` samples of ``train_dataloader``: the frame's depth image from
the camera's viewpoint, coloured by depth, overlaid with

- ``--colour graspness``: the sampled input points coloured by GSNet's point graspness
  (the pipeline needs ``LoadGraspScene(with_graspness=True)``);
- ``--colour mu``: the objects' label points coloured by their best (lowest) friction
  coefficient μ over all views, angles and depths (grey: no feasible grasp); lower is better;

and (with ``graspness``) the label points the pipeline chose for training (SampleGraspLabels) as
black rings; with ``mu`` the coloured points are those chosen label points. The
augmentation is switched off, so everything lines up with the depth image. Writes
``<output-dir>/scene_%04d_%04d.png`` (rendered offscreen with matplotlib).
"""
import argparse
import os
import sys

import numpy as np
from mmengine.config import Config, DictAction

from mmgrasp.evaluation.grasp_drawing import depth_colours, draw_scene
from mmgrasp.registry import DATASETS, build_in_scope
from mmgrasp.apis import register_all_modules

AUGMENTATIONS = ('RandomFlipRotateScene', )


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('--output-dir', default='browse_dataset')
    parser.add_argument('--num', type=int, default=5, help='samples to draw')
    parser.add_argument('--colour', choices=('graspness', 'mu'), default='graspness')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv)


def best_mu(labels) -> np.ndarray:
    """(n,) lowest μ > 0 over each label point's grid; NaN where no cell is feasible."""
    scores = labels.dense().scores.reshape(labels.num_points, -1).numpy()
    feasible = np.where(scores > 0, scores, np.inf).min(axis=1)
    return np.where(np.isfinite(feasible), feasible, np.nan)


def to_camera(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    return points @ pose[:3, :3].T + pose[:3, 3]


def draw_sample(dataset, index: int, colour: str, out_dir: str) -> str:
    results = dataset[index]
    sample = results['data_samples']
    inputs = results['inputs']
    meta = sample.metainfo
    reader = dataset.reader
    scene, frame = int(meta['scene']), int(meta['frame'])
    depth = reader.load_depth(scene, frame)
    intrinsics = reader.load_meta(scene, frame).intrinsics
    labels = sample.grasp_labels if 'grasp_labels' in sample else []
    chosen = [to_camera(lab.points.numpy(), lab.pose.numpy()) for lab in labels]
    if colour == 'graspness':
        if 'graspness' not in inputs:
            raise SystemExit("--colour graspness needs LoadGraspScene(with_graspness=True) and "
                             "'graspness' in PackGraspInputs' keys")
        points, values = inputs['points'].numpy(), inputs['graspness'].numpy()
        label = 'point graspness'
        cmap = 'plasma'
    else:
        if not labels:
            raise SystemExit('--colour mu needs SampleGraspLabels in the pipeline')
        points = np.concatenate(chosen)
        mus = np.concatenate([best_mu(lab) for lab in labels])
        values = np.nan_to_num(mus, nan=0.0)
        label = 'best μ (lower is better; 0: none)'
        cmap = 'plasma_r'
    path = os.path.join(out_dir, f'scene_{scene:04d}_{frame:04d}.png')
    draw_scene(depth_colours(depth), path, intrinsics, points=points, point_values=values,
               point_cmap=cmap,
               markers=np.concatenate(chosen) if chosen and colour == 'graspness' else None,
               title=f'scene {scene} frame {frame}: {len(points)} points, '
                     f'{sum(len(c) for c in chosen)} chosen label points',
               colorbar_label=label)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    register_all_modules(False)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    dataset_cfg = cfg.train_dataloader.dataset
    dataset_cfg.pipeline = [t for t in dataset_cfg.pipeline if t['type'] not in AUGMENTATIONS]
    dataset = build_in_scope(DATASETS, dataset_cfg)
    os.makedirs(args.output_dir, exist_ok=True)
    for index in range(min(args.num, len(dataset))):
        print(draw_sample(dataset, index, args.colour, args.output_dir))
    return 0


if __name__ == '__main__':
    sys.exit(main())
