#!/usr/bin/env python
"""Print the resolved config (``_base_`` merged, ``--cfg-options`` applied), as mmdet's
tools/misc/print_config.py does, with every secret-looking option redacted the way
ConfigHashHook redacts the work dir's dump (mmgrasp.storage.secrets): what this prints is what
a training would log.

    python tools/misc/print_config.py CONFIG [--cfg-options KEY=VALUE ...] [--save-path OUT.py]
"""
import argparse
import os
import sys

from mmengine.config import Config, DictAction

from mmgrasp.engine.hooks.config_hash_hook import redacted_config


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings (key=value, dotted keys)')
    parser.add_argument('--save-path', help='also write the redacted config there (.py)')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not os.path.isfile(args.config):
        raise SystemExit(f'{args.config}: no such config file')
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    cfg = redacted_config(cfg)
    print(cfg.pretty_text)
    if args.save_path:
        if not args.save_path.endswith('.py'):
            raise SystemExit(f'{args.save_path}: --save-path must end in .py')
        tmp = f'{args.save_path}.tmp{os.getpid()}.py'
        cfg.dump(tmp)
        os.replace(tmp, args.save_path)
        print(f'saved: {args.save_path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
