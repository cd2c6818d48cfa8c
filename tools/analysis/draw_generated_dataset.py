#!/usr/bin/env python
"""Pictures of a dataset written by tools/data/make_dataset.py: one frame of a scene (RGB,
instance labels, depth) and one object's grasp labels (its label points coloured by the share of
their collision-free grasps that hold at friction coefficient μ = 0.1, and at any μ <= 1).

    python tools/analysis/draw_generated_dataset.py data/mine --scene 0 --frame 0 --object 9 \\
        --out-dir docs/images
"""
import argparse
import os
import sys

import cv2
import numpy as np


def scene_picture(root: str, scene: int, frame: int, camera: str) -> np.ndarray:
    """RGB | instance labels | depth of one frame, side by side (BGR, uint8)."""
    folder = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
    name = f'{frame:04d}.png'
    rgb = cv2.imread(os.path.join(folder, 'rgb', name), cv2.IMREAD_COLOR)
    label = cv2.imread(os.path.join(folder, 'label', name), cv2.IMREAD_UNCHANGED)
    depth = cv2.imread(os.path.join(folder, 'depth', name), cv2.IMREAD_UNCHANGED)
    if rgb is None or label is None or depth is None:
        raise ValueError(f'{folder}: no rgb, label and depth {name}')
    ids = np.unique(label[label > 0])
    lut = np.zeros((256, 3), np.uint8)
    lut[ids] = cv2.applyColorMap(np.linspace(40, 255, len(ids)).astype(np.uint8)[:, None],
                                 cv2.COLORMAP_TURBO)[:, 0]
    valid = depth > 0
    near, far = (np.percentile(depth[valid], [1, 99]) if valid.any() else (0, 1))
    scaled = np.clip((depth.astype(np.float64) - near) / max(far - near, 1) * 255, 0, 255)
    depth_bgr = np.where(valid[..., None], cv2.applyColorMap(scaled.astype(np.uint8),
                                                             cv2.COLORMAP_VIRIDIS), 0)
    return np.concatenate([rgb, lut[label], depth_bgr], axis=1)


def labels_picture(root: str, obj: int, path: str) -> None:
    """The object's label points seen from above, coloured by the share of their grasps that
    hold (collision-free) at μ = 0.1 and at any μ <= 1; grey: none."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    with np.load(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz')) as f:
        points, scores, collision = f['points'], f['scores'], f['collision']
    holds = (scores > 0) & ~collision
    share = holds.reshape(len(points), -1).mean(1)
    firm = (holds & (scores <= 0.1 + 1e-6)).reshape(len(points), -1).mean(1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), dpi=100)
    order = np.argsort(points[:, 2])  # top view: the highest points drawn last
    for ax, values, title in [(axes[0], 100 * firm, 'holding at μ = 0.1 (%)'),
                              (axes[1], 100 * share, 'holding at μ <= 1 (%)')]:
        pts, vals = points[order], values[order]
        none = vals == 0
        ax.scatter(pts[none, 0], pts[none, 1], c='lightgrey', s=30, edgecolors='grey')
        art = ax.scatter(pts[~none, 0], pts[~none, 1], c=vals[~none], cmap='magma', s=30,
                         edgecolors='k', linewidths=0.3)
        fig.colorbar(art, ax=ax, shrink=0.8)
        ax.set_title(title)
        ax.set_aspect('equal')
        ax.set_xlabel('x (m)')
        ax.set_ylabel('y (m)')
    fig.suptitle(f'object {obj:03d} from above: its label points, by the share of their '
                 'collision-free grasps')
    fig.tight_layout()
    tmp = path + '.tmp.png'
    fig.savefig(tmp, metadata={'Software': None})
    plt.close(fig)
    os.replace(tmp, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='a dataset written by make_dataset.py')
    p.add_argument('--scene', type=int, default=0)
    p.add_argument('--frame', type=int, default=0)
    p.add_argument('--camera', default='realsense')
    p.add_argument('--object', type=int, required=True, help='whose labels to draw')
    p.add_argument('--out-dir', default='.')
    args = p.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    try:
        scene = scene_picture(args.root, args.scene, args.frame, args.camera)
        labels = os.path.join(args.out_dir, 'own_objects_labels.png')
        labels_picture(args.root, args.object, labels)
    except (OSError, ValueError, KeyError) as err:
        print(f'draw_generated_dataset: {err}', file=sys.stderr)
        return 2
    path = os.path.join(args.out_dir, 'own_objects_scene.png')
    ok, buf = cv2.imencode('.png', scene)
    with open(path + '.tmp', 'wb') as f:
        f.write(buf.tobytes())
    os.replace(path + '.tmp', path)
    print(f'wrote {path} and {labels}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
