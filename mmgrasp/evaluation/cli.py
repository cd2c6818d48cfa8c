"""``mmgrasp-eval`` (and ``tools/analysis/eval_dump.py``): GraspNet-1Billion AP of a dump folder,
or GraspClutter6D's when DATA_ROOT is a GraspClutter6D root (``%06d`` scenes).

    mmgrasp-eval DATA_ROOT DUMP --camera realsense --split seen [--json OUT] [--nproc 4]
    mmgrasp-eval DATA_ROOT DUMP --camera kinect --scenes 100 101 --frame-stride 10
    mmgrasp-eval DATA_ROOT DUMP --camera realsense --split seen --scale-ap
    mmgrasp-eval DATA_ROOT DUMP --camera realsense --scenes 100 --frames 0 1 --diagnose DIR
    mmgrasp-eval GC6D_ROOT DUMP --camera zivid --split test [--frames 0 4 8] [--json OUT]

Prints AP, AP0.8 and AP0.4 (percent) over all frames and per split (``--scale-ap``: also
Scale-Balanced-Grasp's AP by grasp width); ``--json`` writes them too. Per-scene results are
kept in ``DUMP/eval_<camera>/``, so an interrupted run resumes. A split whose scenes are not
all on disk, or a frame stride / list, is evaluated and labelled "sampled: N of M frames, not
comparable with published AP" (a warning; ``--require-complete`` makes it an error). A frame
without a dump file stops the run naming the file, on either dataset; ``--missing-dumps zero``
scores such frames 0 as graspclutter6dAPI does, and the table and the JSON say how many.
Frames whose dump holds no grasp (each scores 0) are counted in the table and the JSON and
named in a warning.
``--diagnose DIR`` writes per-grasp tables, plots and PLY scenes (:mod:`.diagnostics`).
"""
import argparse
import os
import sys
from typing import Dict, List, Optional

from .coverage import (MISSING_DUMPS, IncompleteEvaluation, check_coverage, coverage,
                       missing_dumps, split_names)
from .empty_frames import (empty_dump_frames, empty_frame_figures, empty_frames_message,
                           empty_frames_record)
from .graspnet_dump_eval import (EVALUATOR_VERSION, EvaluationError, auto_nproc, dump_path,
                                 evaluate_dump, evaluate_sizes, scene_frames, summarize,
                                 write_json)
from .report import results_table

SPLIT_CHOICES = ('seen', 'similar', 'novel', 'all', 'test')


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog='mmgrasp-eval',
                                description='GraspNet-1Billion AP of a dump folder')
    p.add_argument('data_root')
    p.add_argument('dump')
    p.add_argument('--camera', required=True,
                   help='GraspNet-1Billion: realsense, kinect; GraspClutter6D (a root of '
                        '%%06d scenes): realsense-d415, realsense-d435, azure-kinect, zivid or '
                        'the aliases realsense, kinect')
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument('--split', choices=SPLIT_CHOICES,
                       help="the split's scenes present under DATA_ROOT")
    which.add_argument('--scenes', type=int, nargs='+')
    frames = p.add_mutually_exclusive_group()
    frames.add_argument('--frame-stride', type=int, default=1,
                        help="every n-th annotated frame of each scene (labelled 'sampled')")
    frames.add_argument('--frames', type=int, nargs='+',
                        help="these frames of each scene (labelled 'sampled')")
    p.add_argument('--require-complete', action='store_true',
                   help='fail unless every frame of every scene of the split is evaluated')
    p.add_argument('--missing-dumps', choices=MISSING_DUMPS, default='error',
                   help="a frame without a dump file: stop naming it (default), or score it 0 "
                        "as graspclutter6dAPI's eval_scene does (the table says how many)")
    p.add_argument('--scale-ap', action='store_true',
                   help="also the AP by grasp width (Scale-Balanced-Grasp's evaluate_scale.py)")
    p.add_argument('--diagnose', metavar='DIR',
                   help='write per-grasp CSVs, per-scene/object tables, plots and PLY scenes')
    p.add_argument('--nproc', type=int,
                   help='evaluation processes (default: one per core, at most one per 16 '
                        'frames)')
    p.add_argument('--frame-timeout', type=float, default=600.0,
                   help='seconds one frame may take before the run stops with an error')
    p.add_argument('--json', help='write the figures here')
    p.add_argument('--no-progress', action='store_true')
    args = p.parse_args(argv)
    if args.frame_stride < 1:
        p.error(f'--frame-stride {args.frame_stride}: expected >= 1')
    return args


def select_frames(root: str, camera: str, scenes: List[int], stride: int = 1,
                  frames: Optional[List[int]] = None) -> Dict[int, List[int]]:
    """{scene: frames}: every ``stride``-th annotated frame, or those of ``frames`` (each must
    be annotated)."""
    out = {}
    for s in scenes:
        annotated = scene_frames(root, camera, s)
        if frames is None:
            out[s] = annotated[::stride]
        else:
            missing = sorted(set(frames) - set(annotated))
            if missing:
                raise FileNotFoundError(f'scene {s}: frames {missing} have no annotation '
                                        f'(annotated: {annotated[0]}..{annotated[-1]})')
            out[s] = sorted(set(frames))
    return out


def present_scenes(root: str, camera: str, split: str) -> List[int]:
    """The scenes of ``split`` with annotations under ``root``."""
    from .coverage import TEST_SPLITS
    return [s for name in split_names(split) for s in TEST_SPLITS[name]
            if os.path.isdir(os.path.join(root, 'scenes', f'scene_{s:04d}', camera,
                                          'annotations'))]


def _report_missing(missing: Optional[dict], settings: dict) -> None:
    """``--missing-dumps zero``: a settings row and a warning saying how many frames scored 0."""
    if missing is not None:
        settings['missing dumps'] = missing['label']
        print(f'warning: mmgrasp-eval: {missing["label"]}', file=sys.stderr)


def main_gc6d(args: argparse.Namespace) -> dict:
    """GraspClutter6D's AP of a dump folder (``%06d/<camera>/%06d.npy``), the rules of
    :mod:`.graspclutter6d_dump_eval`, over the frames asked for (annotation indices 0..12), labelled
    as ``tools/test.py`` labels them."""
    from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader
    from . import graspclutter6d_dump_eval as gc6d
    if args.scale_ap or args.diagnose or args.split not in (None, 'test', 'all'):
        sys.exit('mmgrasp-eval: a GraspClutter6D root takes --split test (or --scenes), without '
                 '--scale-ap / --diagnose (GraspNet-1Billion options)')
    try:
        reader = GraspClutter6DReader(args.data_root, args.camera)
        test_split = reader.scene_ids('test')
        scenes = args.scenes or test_split
        run = {}
        for s in scenes:
            annotated = list(range(reader.num_frames(s)))
            if args.frames is None:
                run[s] = annotated[::args.frame_stride]
            else:
                missing = sorted(set(args.frames) - set(annotated))
                if missing:
                    raise FileNotFoundError(f'{reader.scene_camera_path(s)}: annotations '
                                            f'{missing} have no {reader.camera} image')
                run[s] = sorted(set(args.frames))
        cov = gc6d.coverage(run, test_split)
        if not cov['complete']:
            if args.require_complete:
                raise IncompleteEvaluation(f'{cov["label"]} ({cov["details"]})')
            print(f'warning: mmgrasp-eval: {cov["label"]} ({cov["details"]})', file=sys.stderr)
        def path_of(scene: int, frame: int) -> str:
            return gc6d.dump_path(args.dump, scene, reader.camera, reader.image_id(frame))

        missing = missing_dumps(run, path_of, args.missing_dumps,
                                f'GraspClutter6D\'s {args.dump}/%06d/{reader.camera}/%06d.npy '
                                f'(scene, image id)')
        nproc = auto_nproc(sum(map(len, run.values()))) if args.nproc is None else args.nproc
        accuracy = gc6d.evaluate_dump(args.data_root, args.dump, reader.camera, scenes,
                                      nproc, frames=run, missing_dumps=args.missing_dumps)
    except (EvaluationError, FileNotFoundError, IncompleteEvaluation, ValueError) as err:
        sys.exit(f'mmgrasp-eval: {err}')
    figures = gc6d.summarize(accuracy)
    empty_record = empty_frames_record(empty_dump_frames(args.dump, reader.camera, run, path_of),
                                       sum(map(len, run.values())))
    figures['empty_frames'] = empty_record['count']
    message = empty_frames_message(empty_record, 'mmgrasp-eval')
    if message:
        print(f'warning: {message}', file=sys.stderr)
    settings = dict(camera=reader.camera, evaluator=gc6d.EVALUATOR_VERSION)
    _report_missing(missing, settings)
    print()
    print(results_table(figures, settings, cov))
    if args.json:
        write_json(args.json, dict(figures=figures, scenes=scenes, settings=settings,
                                   test_split=cov['complete'], coverage=cov,
                                   missing_dumps=missing, empty_frames=empty_record,
                                   dump_dir=args.dump))
    return figures


def main(argv=None) -> dict:
    args = parse_args(argv)
    from mmgrasp.datasets.layouts import detect_layout
    try:
        layout = detect_layout(args.data_root)
    except (OSError, ValueError) as err:  # DatasetFileError names the folder
        sys.exit(f'mmgrasp-eval: {err}')
    if layout == 'graspclutter6d':
        return main_gc6d(args)
    if args.camera not in ('realsense', 'kinect'):
        sys.exit(f'mmgrasp-eval: --camera {args.camera}: a GraspNet-1Billion root '
                 f'({args.data_root}) has realsense and kinect')
    scenes = args.scenes or present_scenes(args.data_root, args.camera, args.split)
    try:
        if not scenes:
            raise FileNotFoundError(f'{args.data_root}: no scene of split {args.split} has '
                                    f'{args.camera} annotations')
        frames = select_frames(args.data_root, args.camera, scenes, args.frame_stride,
                               args.frames)
        cov = coverage(frames, args.split)
        message = check_coverage(cov, args.require_complete, 'mmgrasp-eval')
        if message:
            print(f'warning: {message}', file=sys.stderr)
        missing = missing_dumps(
            frames, lambda s, f: dump_path(args.dump, s, args.camera, f), args.missing_dumps,
            f'GraspNet-1Billion\'s {args.dump}/scene_%04d/{args.camera}/%04d.npy')
        if missing is not None and args.diagnose:
            raise FileNotFoundError(f'--diagnose needs a dump for every frame: {missing["label"]}')
        options = dict(results_dir=f'{args.dump}/eval_{args.camera}', nproc=args.nproc,
                       frame_timeout=args.frame_timeout, progress=not args.no_progress,
                       missing_dumps=args.missing_dumps)
        if args.diagnose:
            from .diagnostics import diagnose_dump
            accuracy = diagnose_dump(args.data_root, args.dump, args.camera, scenes,
                                     args.diagnose, frames)
        else:
            accuracy = evaluate_dump(args.data_root, args.dump, args.camera, scenes, frames,
                                     **options)
        figures = summarize(accuracy)
        empty = empty_dump_frames(args.dump, args.camera, frames)
        figures.update(empty_frame_figures(empty, scenes))
        empty_record = empty_frames_record(empty, sum(map(len, frames.values())))
        message = empty_frames_message(empty_record, 'mmgrasp-eval')
        if message:
            print(f'warning: {message}', file=sys.stderr)
        if args.scale_ap:
            figures.update(evaluate_sizes(args.data_root, args.dump, args.camera, scenes,
                                          frames, **options))
    except (EvaluationError, FileNotFoundError, IncompleteEvaluation) as err:
        sys.exit(f'mmgrasp-eval: {err}')
    settings = dict(camera=args.camera, evaluator=EVALUATOR_VERSION)
    _report_missing(missing, settings)
    print()
    print(results_table(figures, settings, cov))
    if args.diagnose:
        print(f'diagnostics: {args.diagnose}')
    if args.json:
        write_json(args.json, dict(figures=figures, scenes=scenes, settings=settings,
                                   coverage=cov, missing_dumps=missing,
                                   empty_frames=empty_record, dump_dir=args.dump))
    return figures


def console() -> None:
    """The ``mmgrasp-eval`` entry point (exit status 0; main's figures are not an exit code)."""
    main()


if __name__ == '__main__':
    console()
