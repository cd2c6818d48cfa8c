#!/usr/bin/env python
"""Lay out GraspNet-1Billion scene folders from object poses (e.g. a simulator's) and rendered
or recorded depth, for objects whose ``models/%03d/`` exist under ROOT (written by
``generate_grasp_labels.py``).

SCENES is a JSON file::

    {"camera": "realsense", "image_size": [1280, 720],
     "intrinsics": [[fx, 0, cx], [0, fy, cy], [0, 0, 1]],
     "scenes": [{"id": 0,
                 "objects": [{"id": 3, "pose": 4x4 model -> table}, ...],
                 "camera_poses": [4x4 camera (x right, y down, z forward) -> table, ...],
                 "depth": ["d0.npy", ...], "label": ["s0.npy", ...]}]}

``depth`` (metres, ``.npy``; or uint16 millimetre ``.png``) and ``label`` (0 background, k = the
k-th object of ``objects``; ``.npy`` or ``.png``) are optional: without them each frame is
ray-cast from the objects' ``textured.sdf``. Paths are relative to the JSON file. The table top
is z = 0 of the table frame. Then run ``generate_collision_labels.py ROOT``.

    python tools/data/write_scenes.py data/mine scenes.json
"""
import argparse
import json
import os
import sys

import cv2
import numpy as np

from mmgrasp.datasets.labelgen.scenes import write_scene


def _image(path: str, depth: bool) -> np.ndarray:
    if path.endswith('.npy'):
        return np.load(path)
    image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ValueError(f'{path}: not a readable image')
    return image / 1000.0 if depth else image


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='dataset root holding models/%%03d/')
    p.add_argument('scenes', help='the JSON file described above')
    args = p.parse_args(argv)
    with open(args.scenes) as f:
        spec = json.load(f)
    here = os.path.dirname(os.path.abspath(args.scenes))
    try:
        for scene in spec['scenes']:
            depths = labels = None
            if 'depth' in scene:
                depths = [_image(os.path.join(here, d), True) for d in scene['depth']]
                labels = [_image(os.path.join(here, s), False) for s in scene['label']]
            write_scene(args.root, int(scene['id']), [o['id'] for o in scene['objects']],
                        [np.asarray(o['pose'], np.float64) for o in scene['objects']],
                        [np.asarray(c, np.float64) for c in scene['camera_poses']],
                        np.asarray(spec['intrinsics'], np.float64),
                        tuple(spec.get('image_size', (1280, 720))),
                        spec.get('camera', 'realsense'), depths, labels)
            print(f'[scenes] scene {int(scene["id"]):04d}: {len(scene["objects"])} objects, '
                  f'{len(scene["camera_poses"])} frames', flush=True)
    except (KeyError, ValueError) as err:
        print(f'write_scenes: {args.scenes}: {type(err).__name__}: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
