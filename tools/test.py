"""Run a trained grasp detector on a split, dump its grasps and print GraspNet-1Billion's AP
(or GraspClutter6D's, with GraspClutter6DMetric: dumps ``%06d/<camera>/%06d.npy`` by image id,
the protocol's settings printed with the table).

    python tools/test.py CONFIG CHECKPOINT [--dump DIR] [--nproc N] [--collision-thresh T]
                         [--scale-ap] [--frame-stride K | --frames F ...] [--require-complete]
                         [--dump-only] [--work-dir DIR] [--cfg-options ...]
                         [--launcher {none,pytorch,slurm}] [--show-dir DIR [--show-top-k 20]]

Writes ``<dump>/scene_%04d/<camera>/%04d.npy`` per frame, (M, 17) float32 rows of score,
width, height, depth, rotation (3×3), translation and object id (graspnetAPI's GraspGroup
format), evaluates them with GraspNetMetric (graspnetAPI's protocol) and prints a markdown
table of AP, AP0.8 and AP0.4 per split with the settings that produced them; the figures go to
``<dump>/graspnet_<camera>.json`` and to the Runner's visualisation backends. ``--dump-only``
only dumps (GraspDumpMetric). The split is the config's ``test_dataloader``. ``--scale-ap`` adds
Scale-Balanced-Grasp's AP by grasp width. ``--frame-stride`` / ``--frames`` run a sample of each
scene's frames; a sample or a split with scenes missing on disk is labelled "sampled: N of M
frames, not comparable with published AP" in the table, the JSON and the backends
(``--require-complete`` makes it an error). A ``--dump`` folder that already holds files is
refused unless ``--overwrite`` (then the frames run replace their dumps; others stay, unevaluated).
``--show-dir`` also draws each frame's top
grasps after NMS on its RGB image, ``DIR/scene_%04d_%04d.png`` (GraspNet-1Billion layout).

The checkpoint is loaded strictly: one whose tensors do not all fit the config's model (missing,
unexpected or mis-shaped keys) is refused with the keys named, never evaluated as a partly
initialised model. ``--launcher pytorch`` (torchrun, one process per GPU or CPU slot) shards the
frames over the processes; the first one prints the table.
"""
import argparse
import json
import os
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.dist import is_main_process
from mmengine.runner import Runner

from mmgrasp.datasets.graspclutter6d_reader import camera_name
from mmgrasp.engine.hooks import CheckpointLoadHook
from mmgrasp.evaluation.graspnet_dump_eval import EVALUATOR_VERSION
from mmgrasp.evaluation.report import results_table
from mmgrasp.registry import METRICS, RUNNERS
from mmgrasp.apis import (SETTING_ERRORS, add_launcher_args, apply_cli_options, apply_launcher,
                          check_data_roots, config_num_threads, init_cpu_distributed,
                          leave_distributed, pinned_threads, register_all_modules)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Dump and evaluate the grasps a detector '
                                                 'predicts')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--dump', help='output root (default: <work_dir>/dump)')
    parser.add_argument('--overwrite', action='store_true',
                        help='write into a --dump folder that already holds files (dumps of '
                             'the frames run are replaced; the others stay, not evaluated)')
    parser.add_argument('--dump-only', action='store_true',
                        help='only dump the grasps (GraspDumpMetric), no evaluation')
    parser.add_argument('--nproc', type=int, help='evaluation processes')
    parser.add_argument('--collision-thresh', type=float,
                        help='model.test_cfg.collision_thresh (0 switches the filter off)')
    parser.add_argument('--scale-ap', action='store_true',
                        help="also the AP by grasp width (Scale-Balanced-Grasp's evaluate_scale)")
    frames = parser.add_mutually_exclusive_group()
    frames.add_argument('--frame-stride', type=int,
                        help='every K-th frame of each test scene (a labelled, sampled run)')
    frames.add_argument('--frames', type=int, nargs='+',
                        help='these frames of each test scene (a labelled, sampled run)')
    parser.add_argument('--require-complete', action='store_true',
                        help='fail unless every frame of every scene of the split is evaluated')
    parser.add_argument('--work-dir', help='the dir to save logs')
    parser.add_argument('--show-dir', help="write each frame's predicted grasps as a PNG here")
    parser.add_argument('--show-top-k', type=int, default=20,
                        help='grasps drawn per frame with --show-dir (best after NMS)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value')
    add_launcher_args(parser)
    return parser.parse_args(argv)


def test_settings(cfg: Config) -> dict:
    """What the figures depend on besides the weights: camera, filters, evaluator."""
    model = cfg.model
    test_cfg = model.get('test_cfg') or {}
    thresh = float(test_cfg.get('collision_thresh', 0.0))
    collision = 'off' if thresh <= 0 else (
        f'{thresh:g} (voxel {test_cfg.get("collision_voxel_size", 0.01):g} m, approach '
        f'{test_cfg.get("approach_dist", 0.05):g} m, {test_cfg.get("collision_cloud", "masked")}'
        ' cloud)')
    if 'objectness_filter' in model:
        objectness = 'on' if model.objectness_filter else 'off (all seeds)'
    else:
        objectness = f'n/a (all seeds, {model.type})'
    return {'camera': cfg.test_dataloader.dataset.get('camera', 'realsense'),
            'collision threshold': collision, 'objectness filter': objectness,
            'evaluator': EVALUATOR_VERSION}


def backend_scalars(figures: dict, coverage: dict) -> dict:
    """What the visualisation backends get: ``graspnet/AP`` ... for the whole split; a sampled
    or incomplete run's figures as ``graspnet_sampled/AP`` ... with its label (a string, kept
    by the JSON backends) and frame counts, so no dashboard shows it as published AP."""
    if coverage['complete']:
        return {f'graspnet/{k}': v for k, v in figures.items()}
    out = {f'graspnet_sampled/{k}': v for k, v in figures.items()}
    out.update({'graspnet_sampled/label': coverage['label'],
                'graspnet_sampled/evaluated_frames': coverage['frames'],
                'graspnet_sampled/official_frames': coverage['official_frames']})
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    register_all_modules(False)
    cfg = apply_cli_options(Config.fromfile(args.config), args.config, args.cfg_options,
                            args.work_dir)
    apply_launcher(cfg, args)
    for key in ('test_dataloader', 'test_cfg', 'test_evaluator'):
        if cfg.get(key) is None:
            raise SystemExit(f'{args.config}: no {key}; the dataset base configs define one')
    if args.collision_thresh is not None:
        cfg.model.setdefault('test_cfg', {})
        cfg.model.test_cfg.collision_thresh = args.collision_thresh
    cfg.test_dataloader.dataset.test_mode = True  # draws per frame, whatever else runs
    if args.frame_stride is not None:
        cfg.test_dataloader.dataset.frame_stride = args.frame_stride
    if args.frames is not None:
        cfg.test_dataloader.dataset.frames = args.frames
    check_data_roots(cfg, args.config,
                     ('test_dataloader', ) + (() if args.dump_only else ('test_evaluator', )))
    dump_dir = args.dump or osp.join(cfg.work_dir, 'dump')
    if not args.overwrite and osp.isdir(dump_dir) and os.listdir(dump_dir):
        raise SystemExit(f'{dump_dir} already holds files (an earlier run\'s dumps?): pick an '
                         'empty --dump folder, or pass --overwrite to write into it')
    if args.show_dir and cfg.test_evaluator.get('type') == 'GraspClutter6DMetric':
        raise SystemExit('--show-dir draws GraspNet-1Billion dumps; GraspClutter6D dumps are '
                         'named by image id')
    if args.show_top_k < 1:
        raise SystemExit(f'--show-top-k must be >= 1, got {args.show_top_k}')
    settings = test_settings(cfg)
    if args.dump_only:
        cfg.test_evaluator = dict(type='GraspDumpMetric', dump_dir=dump_dir)
    else:
        cfg.test_evaluator.dump_dir = dump_dir
        metric = METRICS.get(cfg.test_evaluator.get('type'))
        settings.update(getattr(metric, 'protocol', {}))  # GraspClutter6DMetric's rules
        if cfg.test_evaluator.get('type') in ('GraspNetMetric', 'GraspClutter6DMetric'):
            cfg.test_evaluator.settings = settings
            cfg.test_evaluator.camera = settings['camera']
            if cfg.test_evaluator.get('type') == 'GraspNetMetric':
                cfg.test_evaluator.split = cfg.test_dataloader.dataset.get('split', 'test')
                cfg.test_evaluator.scale_ap = args.scale_ap
                cfg.test_evaluator.require_complete = args.require_complete
            elif args.scale_ap or args.require_complete:
                raise SystemExit('--scale-ap and --require-complete are options of GraspNetMetric '
                                 "(GraspNet-1Billion's protocol), not of "
                                 f"{cfg.test_evaluator['type']}")
            if args.nproc is not None:
                cfg.test_evaluator.nproc = args.nproc
    cfg.load_from = args.checkpoint
    cfg.resume = False
    init_cpu_distributed(args.launcher)
    with pinned_threads(config_num_threads(cfg, args.config)):  # env_cfg.num_threads
        try:
            runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
            runner.register_hook(CheckpointLoadHook(args.checkpoint, partial=False))
            metrics = runner.test()
        except SETTING_ERRORS as err:
            raise SystemExit(f'error: {err}') from None
    first_process = is_main_process()
    leave_distributed()
    if not first_process:
        return metrics
    if 'dump/frames' in metrics:
        print(f'wrote {metrics["dump/frames"]} frames to {dump_dir}')
    if args.show_dir:
        from mmgrasp.apis.dump_pictures import write_dump_pictures
        dataset = runner.test_dataloader.dataset
        frames = [(info['scene'], info['frame']) for info in
                  map(dataset.get_data_info, range(len(dataset)))]
        count = write_dump_pictures(dataset.reader, frames, dump_dir, args.show_dir,
                                    args.show_top_k)
        print(f'drew {count} frames in {args.show_dir}')
    figures = {k[len('graspnet/'):]: v for k, v in metrics.items() if k.startswith('graspnet/')
               and isinstance(v, (int, float))}
    if figures:
        json_path = osp.join(dump_dir, 'graspnet_' + settings['camera'] + '.json')
        with open(json_path) as f:
            coverage = json.load(f)['coverage']
        runner.visualizer.add_scalars(backend_scalars(figures, coverage), step=0)
        print(f'GraspNet-1Billion evaluation of {dump_dir}:')
        print(results_table(figures, settings, coverage))
        print(f'figures: {json_path}')
    gc6d = {k[len('gc6d/'):]: v for k, v in metrics.items() if k.startswith('gc6d/')}
    if gc6d:
        json_path = osp.join(dump_dir, f'graspclutter6d_{camera_name(settings["camera"])}.json')
        with open(json_path) as f:
            coverage = json.load(f)['coverage']
        prefix = 'gc6d/' if coverage['complete'] else 'gc6d_sampled/'  # as graspnet_sampled/
        runner.visualizer.add_scalars({prefix + k: v for k, v in gc6d.items()
                                       if isinstance(v, (int, float))}, step=0)
        print(f'GraspClutter6D evaluation of {dump_dir}:')
        print(results_table(gc6d, settings, coverage))
        print(f'figures: {json_path}')
    return metrics


if __name__ == '__main__':
    main()
