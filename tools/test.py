"""Run a trained grasp detector on a split and dump its grasps in GraspNet's layout.

    python tools/test.py CONFIG CHECKPOINT [--dump DIR] [--work-dir DIR] [--cfg-options ...]

Writes ``<dump>/scene_%04d/<camera>/%04d.npy`` per frame, (M, 17) float32 rows of score,
width, height, depth, rotation (3×3), translation and object id: graspnetAPI's GraspGroup
format, so GraspNetEval and the usual tools evaluate them. The split is the config's
``test_dataloader`` (GraspNet-1Billion's 'test' scenes; the synthetic demo tests on its train
scenes, which are all it has).
"""
import argparse
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.runner import Runner

from mmgrasp.registry import RUNNERS
from mmgrasp.utils import apply_cli_options, register_all_modules


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Dump the grasps a detector predicts')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--dump', help='output root (default: <work_dir>/dump)')
    parser.add_argument('--work-dir', help='the dir to save logs')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value')
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    register_all_modules(False)
    cfg = apply_cli_options(Config.fromfile(args.config), args.config, args.cfg_options,
                            args.work_dir)
    for key in ('test_dataloader', 'test_cfg', 'test_evaluator'):
        if cfg.get(key) is None:
            raise SystemExit(f'{args.config}: no {key}; the dataset base configs define one')
    cfg.test_evaluator.dump_dir = args.dump or osp.join(cfg.work_dir, 'dump')
    cfg.load_from = args.checkpoint
    cfg.resume = False
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    metrics = runner.test()
    print(f'wrote {metrics.get("dump/frames", 0)} frames to {cfg.test_evaluator.dump_dir}')


if __name__ == '__main__':
    main()
