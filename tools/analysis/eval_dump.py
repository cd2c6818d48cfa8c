"""Evaluate a dump folder with GraspNet-1Billion's protocol (graspnetAPI's rules, mmgrasp's code).

    python tools/analysis/eval_dump.py DATA_ROOT DUMP --camera realsense --split seen [--json OUT]
    python tools/analysis/eval_dump.py DATA_ROOT DUMP --camera kinect --scenes 100 101 --nproc 4

Prints AP, AP0.8 and AP0.4 (percent) over all frames and per split; ``--json`` writes them
too. Per-scene results are kept in ``DUMP/eval_<camera>/``, so an interrupted run resumes.
"""
import argparse
import sys

from mmgrasp.evaluation.graspnet_eval import (EVALUATOR_VERSION, SPLITS, EvaluationError,
                                              evaluate_dump, summarize, write_json)
from mmgrasp.evaluation.report import results_table

SPLIT_CHOICES = ('seen', 'similar', 'novel', 'all')


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='GraspNet-1Billion AP of a dump folder')
    p.add_argument('data_root')
    p.add_argument('dump')
    p.add_argument('--camera', required=True, choices=('realsense', 'kinect'))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument('--split', choices=SPLIT_CHOICES)
    which.add_argument('--scenes', type=int, nargs='+')
    p.add_argument('--nproc', type=int, default=1, help='evaluation processes')
    p.add_argument('--frame-timeout', type=float, default=600.0,
                   help='seconds one frame may take before the run stops with an error')
    p.add_argument('--json', help='write the figures here')
    p.add_argument('--no-progress', action='store_true')
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.scenes:
        scenes = args.scenes
    elif args.split == 'all':
        scenes = [s for ids in SPLITS.values() for s in ids]
    else:
        scenes = list(SPLITS[args.split])
    try:
        accuracy = evaluate_dump(args.data_root, args.dump, args.camera, scenes, nproc=args.nproc,
                                 results_dir=f'{args.dump}/eval_{args.camera}',
                                 frame_timeout=args.frame_timeout,
                                 progress=not args.no_progress)
    except (EvaluationError, FileNotFoundError) as err:
        sys.exit(f'eval_dump: {err}')
    figures = summarize(accuracy)
    settings = dict(camera=args.camera, evaluator=EVALUATOR_VERSION)
    print()
    print(results_table(figures, settings))
    if args.json:
        write_json(args.json, dict(figures=figures, scenes=scenes, settings=settings,
                                   dump_dir=args.dump))
    return figures


if __name__ == '__main__':
    main()
