"""Pictures of clouds and grasps from the camera's viewpoint, without a window.

matplotlib with its Agg backend: it comes with mmengine, and renders headless with no GL, EGL
or display server (open3d's offscreen renderer needs EGL and is not a dependency). Points and
gripper boxes are projected with the camera intrinsics, so the picture has the depth image's
pixel grid: the pixel of a camera-frame point is where the intrinsics put it.
"""
import os
from typing import Optional

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from scipy.spatial import ConvexHull, QhullError  # noqa: E402

# graspnetAPI's gripper (plot_gripper_pro_max layout) with the collision detector's sizes.
GRIPPER_HEIGHT = 0.02
FINGER_WIDTH = 0.01
DEPTH_BASE = 0.02
TAIL_LENGTH = 0.04
GRIPPER_COLOUR = (1.0, 0.0, 0.0)  # no colour map used for clouds has pure red
BEST_COLOUR = (1.0, 0.85, 0.0)


def _box(x0: float, y0: float, z0: float, dx: float, dy: float, dz: float) -> np.ndarray:
    """(8, 3) corners of an axis-aligned box with lowest corner (x0, y0, z0)."""
    corners = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], np.float64)
    return corners * (dx, dy, dz) + (x0, y0, z0)


def gripper_boxes(grasps: np.ndarray) -> np.ndarray:
    """(N, 4, 8, 3) camera-frame corners of each grasp's left finger, right finger, base and
    tail (the approach line). Gripper frame: x approach, y closing direction; the fingers reach
    ``depth`` past the grasp centre, the base sits ``DEPTH_BASE`` behind it."""
    grasps = np.asarray(grasps, np.float64).reshape(-1, 17)
    out = np.empty((len(grasps), 4, 8, 3))
    h, f = GRIPPER_HEIGHT, FINGER_WIDTH
    for n, g in enumerate(grasps):
        width, depth = g[1], g[3]
        back = -(DEPTH_BASE + f)
        boxes = [_box(back, -width / 2 - f, -h / 2, depth + DEPTH_BASE + f, f, h),
                 _box(back, width / 2, -h / 2, depth + DEPTH_BASE + f, f, h),
                 _box(back, -width / 2, -h / 2, f, width, h),
                 _box(back - TAIL_LENGTH, -f / 2, -h / 2, TAIL_LENGTH, f, h)]
        rotation, centre = g[4:13].reshape(3, 3), g[13:16]
        out[n] = np.stack(boxes) @ rotation.T + centre
    return out


def project(points: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """(..., 3) camera-frame points -> (..., 2) pixel (u, v)."""
    z = np.maximum(points[..., 2], 1e-6)
    return np.stack([points[..., 0] / z * intrinsics[0, 0] + intrinsics[0, 2],
                     points[..., 1] / z * intrinsics[1, 1] + intrinsics[1, 2]], axis=-1)


def depth_colours(depth: np.ndarray, mask: Optional[np.ndarray] = None) -> np.ndarray:
    """(H, W, 3) float image: readings coloured near (bright) to far (dark), the rest white."""
    valid = depth > 0 if mask is None else (depth > 0) & mask
    image = np.ones(depth.shape + (3, ))
    if valid.any():
        values = depth[valid].astype(np.float64)
        lo, hi = np.percentile(values, (1, 99))
        scaled = np.clip((values - lo) / max(hi - lo, 1e-9), 0, 1)
        image[valid] = colormaps['viridis'](1 - scaled)[:, :3]
    return image


def draw_scene(image: np.ndarray, out: str, intrinsics: Optional[np.ndarray] = None,
               grasps: Optional[np.ndarray] = None, points: Optional[np.ndarray] = None,
               point_values: Optional[np.ndarray] = None, point_cmap: str = 'plasma',
               markers: Optional[np.ndarray] = None, title: Optional[str] = None,
               colorbar_label: Optional[str] = None, scale: int = 1) -> None:
    """Write a PNG of the image's size times ``scale``: the image, then ``points`` (camera
    frame) coloured by ``point_values``, ``markers`` (camera frame, black rings), and the
    grippers of ``grasps`` (GraspGroup rows, drawn worst first, the best in yellow)."""
    height, width = image.shape[:2]
    dpi = 100 * scale
    fig = plt.figure(figsize=(width / 100, height / 100), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.imshow(image, extent=(-0.5, width - 0.5, height - 0.5, -0.5), interpolation='nearest')
    if points is not None and len(points):
        uv = project(points, intrinsics)
        sc = ax.scatter(uv[:, 0], uv[:, 1], c=point_values, cmap=point_cmap, s=4, linewidths=0,
                        vmin=0, vmax=max(float(np.max(point_values)), 1e-6))
        if colorbar_label:
            bar = fig.colorbar(sc, ax=ax, fraction=0.03, pad=0.01)
            bar.set_label(colorbar_label)
            ax.set_position((0, 0, 1, 1))
    if markers is not None and len(markers):
        uv = project(markers, intrinsics)
        ax.scatter(uv[:, 0], uv[:, 1], s=14, facecolors='none', edgecolors='black',
                   linewidths=0.6)
    if grasps is not None and len(grasps):
        grasps = np.asarray(grasps)[np.argsort(np.asarray(grasps)[:, 0], kind='stable')]
        polygons, colours = [], []
        for n, boxes in enumerate(gripper_boxes(grasps)):
            colour = BEST_COLOUR if n == len(grasps) - 1 else GRIPPER_COLOUR
            for corners in project(boxes, intrinsics):
                try:
                    hull = corners[ConvexHull(corners).vertices]
                except QhullError:  # a box seen edge-on: its outline is a segment
                    hull = corners[[np.argmin(corners[:, 0]), np.argmax(corners[:, 0])]]
                polygons.append(hull)
                colours.append(colour)
        ax.add_collection(PolyCollection(polygons, facecolors=colours, edgecolors=colours,
                                         linewidths=0.8, antialiased=False))
    if title:
        ax.text(4, 4, title, va='top', fontsize=8, color='black',
                bbox=dict(facecolor='white', alpha=0.8, linewidth=0))
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)
    ax.axis('off')
    fig.savefig(out + '.tmp.png', dpi=dpi)
    plt.close(fig)
    os.replace(out + '.tmp.png', out)


def top_grasps(grasps: np.ndarray, top_k: int) -> np.ndarray:
    """The ``top_k`` highest-scoring rows."""
    order = np.argsort(-np.asarray(grasps)[:, 0], kind='stable')
    return np.asarray(grasps)[order[:top_k]]


__all__ = ['depth_colours', 'draw_scene', 'gripper_boxes', 'project', 'top_grasps']
