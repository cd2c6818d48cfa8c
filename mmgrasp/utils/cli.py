"""What every tool does with its command line before building a Runner."""
import os.path as osp
from typing import Optional

from mmengine.config import Config


def apply_cli_options(cfg: Config, config_path: str, cfg_options: Optional[dict],
                      work_dir: Optional[str]) -> Config:
    """Merge ``--cfg-options`` into ``cfg`` and settle its work dir: the command line, then the
    config file, then ``./work_dirs/<config stem>``."""
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])
    return cfg
