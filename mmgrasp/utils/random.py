"""Per-sample random streams.

Training: every random draw of a sample (point sampling, label-point sampling, augmentation)
comes from one generator derived from (seed, epoch, index) alone. A sample therefore does not
depend on which worker loads it, how many workers there are, whether they persist, or whether the
run was resumed.

Test time: the draws of a frame come from (seed, scene, camera, frame) alone, so a frame's
prediction is the same whatever else is in the run (``--frame-stride``, ``--frames``, the
launcher's shards) and :class:`~mmgrasp.apis.GraspInferencer` given the frame's id reproduces it.
An image without a dataset id is keyed by its content.
"""
import operator
import zlib

import numpy as np

_FRAME_STREAM = zlib.crc32(b'test-frame')  # separates the test streams from the training ones
_IMAGE_STREAM = zlib.crc32(b'depth-image')


def _words(name: str, values) -> list:
    words = [operator.index(v) for v in values]
    if min(words) < 0:
        raise ValueError(f'{name} needs non-negative integers, got {tuple(words)}')
    return words


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator of training sample ``index`` in ``epoch`` of a run seeded ``seed``.

    ``np.random.default_rng([seed, epoch, index])``: numpy's SeedSequence mixes the three
    entropy words, so neighbouring indices or epochs give independent streams.
    """
    return np.random.default_rng(_words('sample_rng', (seed, epoch, index)))


def frame_rng(seed: int, scene: int, camera: str, frame: int) -> np.random.Generator:
    """The test-time generator of ``frame`` of ``scene`` seen by ``camera`` (the dataset's camera
    name; GraspClutter6D's resolved one, e.g. ``'realsense-d435'``)."""
    seed, scene, frame = _words('frame_rng', (seed, scene, frame))
    return np.random.default_rng([seed, _FRAME_STREAM, scene, zlib.crc32(camera.encode()), frame])


def image_rng(seed: int, depth: np.ndarray) -> np.random.Generator:
    """The test-time generator of a depth image that has no dataset id: keyed by its content
    and shape, so it draws the same wherever it sits in a call or a batch."""
    depth = np.ascontiguousarray(depth)
    return np.random.default_rng(_words('image_rng', (seed, *depth.shape)) + [
        _IMAGE_STREAM, zlib.crc32(depth.tobytes())])
