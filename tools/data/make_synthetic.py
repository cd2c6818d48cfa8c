#!/usr/bin/env python
"""Write a small deterministic GraspNet-1Billion-layout dataset of box objects.

Training scenes 0..N-1 and, for the evaluator, test scenes (default 100, 130, 160: one each of
seen, similar, novel) with annotations, box models (dense nontextured.ply, textured.obj/.sdf) and
grasp labels computed with the evaluator's physics.

Example (the real 300x12x4 label grid, several GB):
    python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10
A real GraspNet-1Billion frame's label density (9 objects of ~1 500 label points; the recipes'
"a quarter, at least 300" keeps ~3 400 label points a frame; RealSense 1280x720), as the loader
benchmarks use it:
    python tools/data/make_synthetic.py data/synthetic_real --scenes 2 --frames 4 --objects 9 \
        --points-per-object 1500 --cameras realsense --test-scenes
Small, fast variant for smoke tests:
    python tools/data/make_synthetic.py data/synthetic_small --scenes 1 --frames 2 --objects 3 \
        --points-per-object 40 --grid 6 3 2 --image-size 320 180
GraspClutter6D layout (four cameras, 13 annotations each, one model twice in all scenes but the
last; scene ids 1..N train, the next --test-scenes COUNT test):
    python tools/data/make_synthetic.py data/synthetic_gc6d --layout graspclutter6d --scenes 2 \
        --test-scenes 1 --objects 4 --points-per-object 40 --grid 6 3 2 --image-size 320 180
"""
import argparse
import sys

from mmgrasp.datasets.synthetic import PLY_FORMATS, SHAPES, write_synthetic_dataset
from mmgrasp.datasets.synthetic.gc6d import write_graspclutter6d_dataset


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
    p.add_argument('--cameras', nargs='+', default=None, choices=['realsense', 'kinect'],
                   help='GraspNet-1Billion cameras (default both); GraspClutter6D writes its four')
    p.add_argument('--duplicates', type=int, default=None,
                   help='the first K scenes hold one model twice (default 0; GraspClutter6D: all '
                        'scenes but the last)')
    p.add_argument('--test-scenes', type=int, nargs='*', default=None, metavar='ID',
                   help='test-split scene ids to write as well (100-129 seen, 130-159 similar, '
                        '160-189 novel); default one per split; none with a bare --test-scenes. '
                        'GraspClutter6D: one number, how many test scenes (default 1)')
    p.add_argument('--max-label-width', type=float, default=0.1, metavar='M',
                   help='chords wider than M metres are infeasible (default: the gripper\'s 0.1 m, '
                        'as the evaluator; real labels also hold wider grasps)')
    p.add_argument('--layout', choices=['graspnet', 'graspclutter6d'], default='graspnet',
                   help='on-disk layout: GraspNet-1Billion or GraspClutter6D (test scenes: a '
                        'count; duplicates: default all scenes but the last; frames <= 13)')
    p.add_argument('--shapes', nargs='+', default=['box'], choices=SHAPES, metavar='SHAPE',
                   help=f'model m is shapes[m %% len(shapes)], of {", ".join(SHAPES)} '
                        '(default: box)')
    p.add_argument('--ply-formats', nargs='+', default=['ascii'], choices=PLY_FORMATS,
                   help="model m's nontextured.ply is written in ply_formats[m %% len] "
                        '(default: ascii)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--quiet', action='store_true', help='no progress lines on stderr')
    return p.parse_args(argv)


def _gc6d_test_count(values) -> int:
    if values is None:
        return 1
    if len(values) > 1:
        raise ValueError(f'--layout graspclutter6d: --test-scenes takes one count, got {values}')
    return values[0] if values else 0


def main(argv=None) -> None:
    a = parse_args(argv)
    try:
        if a.layout == 'graspclutter6d':
            if a.cameras is not None:
                raise ValueError('--layout graspclutter6d writes its four cameras: drop --cameras')
            if a.shapes != ['box'] or a.ply_formats != ['ascii']:
                raise ValueError('--layout graspclutter6d writes box models in ASCII PLY: drop '
                                 '--shapes / --ply-formats')
            write_graspclutter6d_dataset(
                a.out, scenes=a.scenes, frames=a.frames, objects=a.objects, models=a.models,
                points_per_object=a.points_per_object, grid=tuple(a.grid),
                image_size=tuple(a.image_size), duplicates=a.duplicates, seed=a.seed,
                progress=not a.quiet, test_scenes=_gc6d_test_count(a.test_scenes),
                max_label_width=a.max_label_width)
            return
        write_synthetic_dataset(
            a.out, scenes=a.scenes, frames=a.frames, objects=a.objects, models=a.models,
            points_per_object=a.points_per_object, grid=tuple(a.grid),
            image_size=tuple(a.image_size), cameras=a.cameras or ['realsense', 'kinect'],
            duplicates=a.duplicates or 0,
            seed=a.seed, progress=not a.quiet,
            test_scenes=[100, 130, 160] if a.test_scenes is None else a.test_scenes,
            max_label_width=a.max_label_width, shapes=a.shapes, ply_formats=a.ply_formats)
    except (FileExistsError, ValueError) as e:
        sys.exit(f'make_synthetic: error: {e}')


if __name__ == '__main__':
    main()
