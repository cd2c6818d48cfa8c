#!/usr/bin/env python
"""Write a small deterministic GraspNet-1Billion-layout dataset of box objects.

Training scenes 0..N-1 and, for the evaluator, test scenes (default 100, 130, 160: one each of
seen, similar, novel) with annotations, box models (dense nontextured.ply, textured.obj/.sdf) and
grasp labels computed with the evaluator's physics.

Example (the real 300x12x4 label grid, several GB):
    python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10
Small, fast variant for smoke tests:
    python tools/data/make_synthetic.py /tmp/syn --scenes 1 --frames 2 --objects 3 \
        --points-per-object 40 --grid 6 3 2 --image-size 320 180
"""
import argparse
import sys

from mmgrasp.datasets.synthetic import PLY_FORMATS, SHAPES, write_synthetic_dataset


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('out', help='output dataset root (must not exist, or be an empty directory)')
    p.add_argument('--scenes', type=int, default=4)
    p.add_argument('--frames', type=int, default=4, help='frames per camera per scene')
    p.add_argument('--objects', type=int, default=10, help='object instances per scene')
    p.add_argument('--models', type=int, default=None,
                   help='object models (ids 0..M-1, M <= 88); default objects+2')
    p.add_argument('--points-per-object', type=int, default=2000,
                   help='label points per model (+-10%%)')
    p.add_argument('--grid', type=int, nargs=3, default=(300, 12, 4), metavar=('V', 'A', 'D'),
                   help='views, in-plane angles, depths of the label grid')
    p.add_argument('--image-size', type=int, nargs=2, default=(1280, 720), metavar=('W', 'H'))
    p.add_argument('--cameras', nargs='+', default=['realsense', 'kinect'],
                   choices=['realsense', 'kinect'])
    p.add_argument('--duplicates', type=int, default=0,
                   help='the first K scenes hold one model twice')
    p.add_argument('--test-scenes', type=int, nargs='*', default=[100, 130, 160], metavar='ID',
                   help='test-split scene ids to write as well (100-129 seen, 130-159 similar, '
                        '160-189 novel); default one per split; none with a bare --test-scenes')
    p.add_argument('--max-label-width', type=float, default=0.1, metavar='M',
                   help='chords wider than M metres are infeasible (default: the gripper\'s 0.1 m, '
                        'as the evaluator; real labels also hold wider grasps)')
    p.add_argument('--shapes', nargs='+', default=['box'], choices=SHAPES, metavar='SHAPE',
                   help=f'model m is shapes[m %% len(shapes)], of {", ".join(SHAPES)} '
                        '(default: box)')
    p.add_argument('--ply-formats', nargs='+', default=['ascii'], choices=PLY_FORMATS,
                   help="model m's nontextured.ply is written in ply_formats[m %% len] "
                        '(default: ascii)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--quiet', action='store_true', help='no progress lines on stderr')
    return p.parse_args(argv)


def main(argv=None) -> None:
    a = parse_args(argv)
    try:
        write_synthetic_dataset(
            a.out, scenes=a.scenes, frames=a.frames, objects=a.objects, models=a.models,
            points_per_object=a.points_per_object, grid=tuple(a.grid),
            image_size=tuple(a.image_size), cameras=a.cameras, duplicates=a.duplicates,
            seed=a.seed, progress=not a.quiet, test_scenes=a.test_scenes,
            max_label_width=a.max_label_width, shapes=a.shapes, ply_formats=a.ply_formats)
    except (FileExistsError, ValueError) as e:
        sys.exit(f'make_synthetic: error: {e}')


if __name__ == '__main__':
    main()
