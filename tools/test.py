"""Run a trained grasp detector on a split, dump its grasps and print GraspNet-1Billion's AP.

    python tools/test.py CONFIG CHECKPOINT [--dump DIR] [--nproc N] [--collision-thresh T]
                         [--dump-only] [--work-dir DIR] [--cfg-options ...]
                         [--launcher {none,pytorch,slurm}]

Writes ``<dump>/scene_%04d/<camera>/%04d.npy`` per frame, (M, 17) float32 rows of score,
width, height, depth, rotation (3×3), translation and object id (graspnetAPI's GraspGroup
format), evaluates them with GraspNetMetric (graspnetAPI's protocol) and prints a markdown
table of AP, AP0.8 and AP0.4 per split with the settings that produced them; the figures go to
``<dump>/graspnet_<camera>.json`` and to the Runner's visualisation backends. ``--dump-only``
only dumps (GraspDumpMetric). The split is the config's ``test_dataloader``.

The checkpoint is loaded strictly: one whose tensors do not all fit the config's model (missing,
unexpected or mis-shaped keys) is refused with the keys named, never evaluated as a partly
initialised model. ``--launcher pytorch`` (torchrun, one process per GPU or CPU slot) shards the
frames over the processes; the first one prints the table.
"""
import argparse
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.dist import is_main_process
from mmengine.runner import Runner

from mmgrasp.engine.hooks import CheckpointLoadHook

from mmgrasp.evaluation.graspnet_eval import EVALUATOR_VERSION
from mmgrasp.evaluation.report import results_table
from mmgrasp.registry import RUNNERS
from mmgrasp.utils import (add_launcher_args, apply_cli_options, apply_launcher,
                           init_cpu_distributed, leave_distributed, register_all_modules)
from mmgrasp.utils.checkpoint_keys import CheckpointMismatchError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Dump and evaluate the grasps a detector '
                                                 'predicts')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--dump', help='output root (default: <work_dir>/dump)')
    parser.add_argument('--dump-only', action='store_true',
                        help='only dump the grasps (GraspDumpMetric), no evaluation')
    parser.add_argument('--nproc', type=int, help='evaluation processes')
    parser.add_argument('--collision-thresh', type=float,
                        help='model.test_cfg.collision_thresh (0 switches the filter off)')
    parser.add_argument('--work-dir', help='the dir to save logs')
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
        objectness = 'n/a (all seeds, GSNet)'
    return {'camera': cfg.test_dataloader.dataset.get('camera', 'realsense'),
            'collision threshold': collision, 'objectness filter': objectness,
            'evaluator': EVALUATOR_VERSION}


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
    dump_dir = args.dump or osp.join(cfg.work_dir, 'dump')
    settings = test_settings(cfg)
    if args.dump_only:
        cfg.test_evaluator = dict(type='GraspDumpMetric', dump_dir=dump_dir)
    else:
        cfg.test_evaluator.dump_dir = dump_dir
        if cfg.test_evaluator.get('type') == 'GraspNetMetric':
            cfg.test_evaluator.settings = settings
            cfg.test_evaluator.camera = settings['camera']
            if args.nproc is not None:
                cfg.test_evaluator.nproc = args.nproc
    cfg.load_from = args.checkpoint
    cfg.resume = False
    init_cpu_distributed(args.launcher)
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.register_hook(CheckpointLoadHook(args.checkpoint, partial=False))
    try:
        metrics = runner.test()
    except CheckpointMismatchError as err:
        raise SystemExit(f'error: {err}') from None
    first_process = is_main_process()
    leave_distributed()
    if not first_process:
        return metrics
    if 'dump/frames' in metrics:
        print(f'wrote {metrics["dump/frames"]} frames to {dump_dir}')
    figures = {k[len('graspnet/'):]: v for k, v in metrics.items() if k.startswith('graspnet/')}
    if figures:
        runner.visualizer.add_scalars(
            {k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=0)
        print(f'GraspNet-1Billion evaluation of {dump_dir}:')
        print(results_table(figures, settings))
        print(f'figures: {osp.join(dump_dir, "graspnet_" + settings["camera"] + ".json")}')
    return metrics


if __name__ == '__main__':
    main()
