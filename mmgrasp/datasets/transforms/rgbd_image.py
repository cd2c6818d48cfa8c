"""Loading one dataset frame as whole RGB and depth images (HGGD's input)."""
from typing import Dict, List, Optional, Tuple

from mmcv.transforms import BaseTransform

from mmgrasp.registry import TRANSFORMS
from mmgrasp.storage.frames.images import ImageStore, open_image_store, read_images
from mmgrasp.storage.labels.store import default_cache_dir
from mmgrasp.storage.source import GraspSource
from .loading import SOURCES, prepared_readers

_image_stores: Dict[Tuple[str, str, str], ImageStore] = {}


@TRANSFORMS.register_module()
class LoadRGBDImage(BaseTransform):
    """Load a frame's whole colour and raw depth images, as integers, and its camera.

    The images leave the worker as stored (uint8 RGB, uint16 raw depth); conversion to float,
    resizing and normalisation belong to the data preprocessor, on the device.

    ``source='frames'`` (the default) reads the image store (:mod:`mmgrasp.storage.frames.images`:
    every frame of the root's camera decoded once, memory-mapped; built by :meth:`prepare`,
    which the dataset calls in the main process before loader workers fork, or on first use;
    rebuilt when a source file changes). ``source='files'`` decodes the PNG files and the meta
    file for every sample (the reference path). Both give the same values, bit for bit.

    Required Keys:

    - reader (GraspNetReader or GraspClutter6DReader)
    - scene (int)
    - frame (int)

    Added Keys:

    - rgb (np.uint8, (H, W, 3)): RGB channel order
    - depth (np.uint16, (H, W)): raw depth as stored in the PNG; metres = depth / factor_depth
    - intrinsics (np.float64, (3, 3)): GraspNet-1Billion ``meta.mat`` ``intrinsic_matrix``,
      GraspClutter6D ``scene_camera.json`` ``cam_K``
    - factor_depth (float)
    - camera (str): the reader's camera (GraspClutter6D's aliases resolved)

    Args:
        source: ``'frames'`` (the image store) or ``'files'`` (the dataset files).
        cache_dir: image store cache (default ``$MMGRASP_CACHE``).
    """

    def __init__(self, source: str = 'frames', cache_dir: Optional[str] = None):
        if source not in SOURCES:
            raise ValueError(f'LoadRGBDImage: source={source!r}: expected one of {SOURCES}')
        self.source = source
        self.cache_dir = cache_dir

    def image_store(self, reader: GraspSource) -> ImageStore:
        """The image store of the reader's root and camera, opened (built when missing or
        stale) once a process; forked workers inherit it."""
        key = (reader.root, reader.camera, self.cache_dir or default_cache_dir())
        if key not in _image_stores:
            _image_stores[key] = open_image_store(reader, self.cache_dir)
        return _image_stores[key]

    def prepare(self, data_root: str, camera: Optional[str] = None,
                reader: Optional[GraspSource] = None) -> List[ImageStore]:
        """With ``source='frames'``, open (and build when needed) the image store in the main
        process, before workers fork."""
        if self.source != 'frames':
            return []
        return [self.image_store(r) for r in prepared_readers(data_root, camera, reader)]

    def transform(self, results: dict) -> dict:
        reader, scene, frame = results['reader'], results['scene'], results['frame']
        if self.source == 'frames':
            images = self.image_store(reader).frame(scene, frame)
        else:
            images = read_images(reader, scene, frame)
        results['rgb'] = images.rgb
        results['depth'] = images.depth
        results['intrinsics'] = images.intrinsics
        results['factor_depth'] = images.factor_depth
        results['camera'] = reader.camera
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(source={self.source!r}, cache_dir={self.cache_dir!r})'
