"""The on-disk layouts mmgrasp reads, and the one way to open a reader for a root.

A root says which layout it is: GraspNet-1Billion keeps ``scenes/scene_%04d``, GraspClutter6D
(BOP-style) ``scenes/%06d``. Every component that is handed a data root (the dataset, the label
and frame stores, graspness generation, the tools) opens its reader here, so a new layout is one
entry in :data:`LAYOUTS`.
"""
import os
import re
from typing import Optional, Union

from mmgrasp.storage.source import DatasetFileError
from .graspclutter6d_reader import GraspClutter6DReader
from .graspnet_reader import GraspNetReader

LAYOUTS = {'graspnet': GraspNetReader, 'graspclutter6d': GraspClutter6DReader}
Reader = Union[GraspNetReader, GraspClutter6DReader]


def detect_layout(root: str) -> str:
    """'graspnet' or 'graspclutter6d' from the scene folder names under ``root/scenes``
    (GraspNet-1Billion when there is none yet)."""
    folder = os.path.join(root, 'scenes')
    if not os.path.isdir(folder):
        raise DatasetFileError(folder, 'not a dataset root: no scenes/ folder')
    names = os.listdir(folder)
    found = {'graspnet' if re.fullmatch(r'scene_\d{4}', n) else
             'graspclutter6d' if re.fullmatch(r'\d{6}', n) else None for n in names} - {None}
    if len(found) > 1:
        raise DatasetFileError(folder, 'holds both scene_%04d (GraspNet-1Billion) and %06d '
                                       '(GraspClutter6D) folders')
    return found.pop() if found else 'graspnet'  # an empty root: the reader says what is missing


def open_reader(root: str, camera: Optional[str] = None, layout: Optional[str] = None,
                tolerance_dir: Optional[str] = None,
                graspness_dir: Optional[str] = None) -> Reader:
    """The reader of ``root`` (``layout`` None: detected; given: checked against the root).
    ``camera`` None is the layout's default ('realsense'; on GraspClutter6D the d435)."""
    found = detect_layout(root)
    if layout is not None and layout != found:
        if layout not in LAYOUTS:
            raise ValueError(f'layout={layout!r}: expected one of {sorted(LAYOUTS)}')
        raise DatasetFileError(os.path.join(root, 'scenes'),
                               f'layout={layout!r} was asked for but the root is {found!r}')
    return LAYOUTS[found](root, camera or 'realsense', tolerance_dir, graspness_dir)
