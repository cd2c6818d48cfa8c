"""Write a small synthetic dataset in both layouts and print the SHA-256 of every file, as JSON
(``python _synthetic_digest.py OUT``): run under other BLAS kernels and SIMD settings by
test_synthetic_machine_independence.py. The configuration touches every writer path: all six
shapes, both PLY formats, both GraspNet cameras, a test scene, a duplicated GC6D model."""
import hashlib
import json
import os
import sys

from mmgrasp.datasets.synthetic import (SHAPES, write_graspclutter6d_dataset,
                                        write_synthetic_dataset)

SMALL = dict(frames=2, points_per_object=40, grid=(6, 3, 2), image_size=(64, 36), progress=False)


def write_and_digest(root: str) -> dict:
    """{relative path: sha256} of the GraspNet-1Billion and GraspClutter6D datasets written
    under ``root``."""
    write_synthetic_dataset(os.path.join(root, 'graspnet'), scenes=1, objects=5,
                            models=len(SHAPES), test_scenes=[130], shapes=SHAPES,
                            ply_formats=('ascii', 'binary'), **SMALL)
    write_graspclutter6d_dataset(os.path.join(root, 'gc6d'), scenes=1, test_scenes=0,
                                 objects=3, **SMALL)
    digests = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, 'rb') as f:
                digests[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return digests


if __name__ == '__main__':
    print(json.dumps(write_and_digest(sys.argv[1])))
