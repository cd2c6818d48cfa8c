#!/usr/bin/env python
"""Write the synthetic dataset's object models as triangle meshes (``%03d.ply``), the input
``generate_grasp_labels.py`` takes: the same models ``make_synthetic.py`` draws for the same
``--seed``, ``--shapes`` and ``--points-per-object`` (boxes and the L exact, curved shapes with
vertices ``--spacing`` apart).

    python tools/data/export_synthetic_meshes.py data/meshes --models 12 \\
        --shapes box sphere cylinder capsule torus lshape
"""
import argparse
import os
import sys

from mmgrasp.datasets.labelgen.mesh import TriangleMesh, write_mesh_ply
from mmgrasp.datasets.synthetic import SHAPES
from mmgrasp.datasets.synthetic.scene import make_model, model_mesh


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('out', help='folder for %%03d.ply')
    p.add_argument('--models', type=int, default=12, help='model ids 0..M-1')
    p.add_argument('--shapes', nargs='+', default=['box'], choices=SHAPES)
    p.add_argument('--points-per-object', type=int, default=2000,
                   help="as make_synthetic.py's (it shares the models' random stream)")
    p.add_argument('--spacing', type=float, default=0.002, help='vertex spacing (metres)')
    p.add_argument('--seed', type=int, default=0)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for m in range(a.models):
        model = make_model(a.seed, m, a.points_per_object, a.shapes[m % len(a.shapes)])
        write_mesh_ply(os.path.join(a.out, f'{m:03d}.ply'),
                       TriangleMesh(*model_mesh(model, a.spacing)))
    print(f'wrote {a.models} meshes to {a.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
