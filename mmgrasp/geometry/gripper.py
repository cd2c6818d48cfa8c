"""The parallel-jaw gripper: one description read by label generation, the label store's check,
the models (maximum width, depth and angle decoding, grasp height), the test-time collision
filter and the evaluator.

The default is GraspNet-1Billion's gripper (graspnetAPI ``eval_utils.collision_detection`` and
graspnet-baseline's ``ModelFreeCollisionDetector``): fingers 1 cm wide, 2 cm high, 6 cm long, a
2 cm base behind the grasp point, jaws opening to 10 cm; labels on 300 views x 12 in-plane
angles (a * pi / 12) x 4 depths ((d + 1) * 1 cm). Gripper frame: x = approach, y = closing axis,
z = height; the grasp point is the origin and ``depth`` how far the finger tips reach past it.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

_FLOATS = ('max_width', 'height', 'finger_width', 'base_depth', 'finger_length', 'depth_step')
_INTS = ('num_views', 'num_angles', 'num_depths')


@dataclasses.dataclass(frozen=True)
class Gripper:
    """A parallel-jaw gripper and the label grid it is annotated on (lengths in metres).

    Args:
        name: a label for messages and files; two grippers are the same when every other field
            is equal (the name is not compared).
        max_width: widest jaw opening: wider grasps are infeasible in the labels, predicted
            widths are clamped to it, the evaluator clips dumped widths to it.
        height: jaw height (z), the grasp rows' height column.
        finger_width: thickness of each finger along the closing axis.
        base_depth: depth of the palm behind the grasp point (graspnetAPI's ``depth_base``).
        finger_length: finger length of the test-time collision filter (graspnet-baseline).
        num_views, num_angles, num_depths: the label grid; angle a is a * pi / num_angles,
            depth d is (d + 1) * depth_step.
    """
    name: str = 'graspnet'
    max_width: float = 0.1
    height: float = 0.02
    finger_width: float = 0.01
    base_depth: float = 0.02
    finger_length: float = 0.06
    num_views: int = 300
    num_angles: int = 12
    num_depths: int = 4
    depth_step: float = 0.01

    def __post_init__(self):
        for key in _FLOATS:
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f'gripper {self.name!r}: {key}={value!r} must be a positive '
                                 f'number of metres')
            object.__setattr__(self, key, float(value))
        for key in _INTS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f'gripper {self.name!r}: {key}={value!r} must be a positive '
                                 f'integer')
            object.__setattr__(self, key, int(value))

    # the label grid ---------------------------------------------------------------------------
    @property
    def grid(self) -> tuple:
        """(num_views, num_angles, num_depths)."""
        return self.num_views, self.num_angles, self.num_depths

    def angles(self) -> np.ndarray:
        """(A,) float64 in-plane angles a * pi / A."""
        return np.arange(self.num_angles) * np.pi / self.num_angles

    def depths(self) -> np.ndarray:
        """(D,) float64 depths (d + 1) * depth_step, rounded as GraspNet stores 0.01 ... 0.04."""
        return np.round((np.arange(self.num_depths) + 1) * self.depth_step, 10)

    # identity ---------------------------------------------------------------------------------
    def fields(self) -> dict:
        """Every field but the name (what makes two grippers the same)."""
        out = dataclasses.asdict(self)
        out.pop('name')
        return out

    def same_as(self, other: 'Gripper') -> bool:
        return self.fields() == other.fields()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + '\n'

    def describe(self) -> str:
        """One line naming the gripper and its dimensions (used in every mismatch message)."""
        f = self.fields()
        dims = ', '.join(f'{k}={f[k]:g}' for k in _FLOATS)
        return f'{self.name!r} ({dims}, grid {self.num_views}x{self.num_angles}x' \
               f'{self.num_depths})'


GRASPNET_GRIPPER = Gripper()

GripperLike = Union[None, Gripper, Mapping[str, Any]]


def build_gripper(cfg: GripperLike = None) -> Gripper:
    """A :class:`Gripper` from None (GraspNet's), a Gripper, or a dict of its fields (missing
    fields take GraspNet's values; an unknown key is refused with the accepted names)."""
    if cfg is None:
        return GRASPNET_GRIPPER
    if isinstance(cfg, Gripper):
        return cfg
    if not isinstance(cfg, Mapping):
        raise TypeError(f'gripper must be None, a Gripper or a dict of its fields, got '
                        f'{type(cfg).__name__}')
    names = {f.name for f in dataclasses.fields(Gripper)}
    unknown = sorted(set(cfg) - names)
    if unknown:
        raise ValueError(f'gripper: unknown keys {unknown}; accepted: {sorted(names)}')
    kwargs = dict(cfg)
    if 'name' not in kwargs:
        kwargs['name'] = 'graspnet' if Gripper(**kwargs).same_as(GRASPNET_GRIPPER) else 'custom'
    return Gripper(**kwargs)


class GripperMismatchError(ValueError):
    """Two parts of one run (labels, model, evaluator) describe different grippers: a setting
    to fix, so the tools report it in one line rather than a traceback."""


def check_same_gripper(first: Gripper, first_where: str, second: Gripper,
                       second_where: Optional[str]) -> None:
    """Raise GripperMismatchError naming both grippers and where each comes from when they
    differ."""
    if not first.same_as(second):
        raise GripperMismatchError(f'two grippers in one run: {first_where} uses {first.describe()} but '
                         f'{second_where} uses {second.describe()}; labels, models and the '
                         f'evaluator must share one gripper - set the same gripper in both')


def read_gripper_file(path: str) -> Gripper:
    """The gripper of a ``gripper.json`` (written by ``tools/data/generate_grasp_labels.py``)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return build_gripper(data)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f'{path}: not a gripper description ({err})') from None


def parse_gripper_options(values: Sequence[str], option: str = '--gripper') -> Gripper:
    """The gripper of a command line's ``KEY=VALUE ...`` words (missing fields GraspNet's) or of
    one ``gripper.json``; ValueError naming the option, the key and what is wrong otherwise."""
    if len(values) == 1 and values[0].endswith('.json'):
        return read_gripper_file(values[0])
    names = [f.name for f in dataclasses.fields(Gripper)]
    fields: dict = {}
    for item in values:
        key, sep, text = item.partition('=')
        if not sep:
            raise ValueError(f'{option} {item!r}: expected KEY=VALUE or one gripper .json file')
        if key not in names:
            raise ValueError(f'{option} {item!r}: unknown key {key!r}; accepted: {names}')
        if key in fields:
            raise ValueError(f'{option} {item!r}: {key} is given twice')
        if key == 'name':
            fields[key] = text
            continue
        kind = 'integer' if key in _INTS else 'number of metres'
        try:
            fields[key] = int(text) if key in _INTS else float(text)
        except ValueError:
            raise ValueError(f'{option} {item!r}: {key} must be a positive {kind}, got '
                             f'{text!r}') from None
    try:
        return build_gripper(fields)
    except ValueError as err:
        raise ValueError(f'{option}: {err}') from None
