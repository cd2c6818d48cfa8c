"""Pictures of clouds and grasps, from the camera or from the side, without a window.

matplotlib with its Agg backend: it comes with mmengine, and renders headless with no GL, EGL
or display server (open3d's offscreen renderer needs EGL and is not a dependency). Points and
grippers are projected with the camera intrinsics, so the picture has the depth image's pixel
grid: the pixel of a camera-frame point is where the intrinsics put it. Grippers are drawn as
GraspNet draws them, thin: the two fingers and the base as one U-shaped line in the gripper's
mid-plane and the approach line behind it, coloured by score on a colour map with its legend,
so the scene stays visible under them. :func:`side_view` turns the cloud and the grasps about
the cloud's centre to look at them from the side.
"""
import os
from typing import Optional, Sequence, Tuple

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402

# graspnetAPI's gripper (plot_gripper_pro_max layout) with the collision detector's sizes.
DEPTH_BASE = 0.02
TAIL_LENGTH = 0.04
SCORE_CMAP = 'RdYlGn'  # low scores red, high green (graspnetAPI colours grasps by score too)
BAR_STRIP = 90  # px (× scale) to the right of the image for each colour bar
LEGEND_STRIP = 150  # px (× scale) for a legend of named colours


def legend_strip(grasps: bool, colorbar: bool, legend: bool) -> int:
    """Width in px (at scale 1) of the strip :func:`draw_scene` adds to the right of the image
    for its legends: a score bar when ``grasps`` are coloured by score, a colour bar for
    points, a named legend. Legends sit there so that none covers a grasp or a point."""
    return BAR_STRIP * (int(grasps) + int(colorbar)) + LEGEND_STRIP * int(legend)


def project(points: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """(..., 3) camera-frame points -> (..., 2) pixel (u, v)."""
    z = np.maximum(points[..., 2], 1e-6)
    return np.stack([points[..., 0] / z * intrinsics[0, 0] + intrinsics[0, 2],
                     points[..., 1] / z * intrinsics[1, 1] + intrinsics[1, 2]], axis=-1)


def gripper_outlines(grasps: np.ndarray) -> np.ndarray:
    """(N, 6, 3) camera-frame polyline of each gripper: finger tip, finger root, base, other
    base corner, other finger tip (the U of fingers and base, mid-plane), then the approach
    line's end; the approach line runs from the base centre (the mean of points 1 and 2)."""
    grasps = np.asarray(grasps, np.float64).reshape(-1, 17)
    w, d = grasps[:, 1] / 2, grasps[:, 3]
    b = np.full(len(grasps), -DEPTH_BASE)
    zero = np.zeros(len(grasps))
    local = np.stack([np.stack([d, -w, zero], 1), np.stack([b, -w, zero], 1),
                      np.stack([b, w, zero], 1), np.stack([d, w, zero], 1),
                      np.stack([b, zero, zero], 1),
                      np.stack([b - TAIL_LENGTH, zero, zero], 1)], 1)
    rot = grasps[:, 4:13].reshape(-1, 3, 3)
    return np.einsum('nij,nkj->nki', rot, local) + grasps[:, None, 13:16]


def back_project(depth: np.ndarray, intrinsics: np.ndarray, factor_depth: float,
                 mask: Optional[np.ndarray] = None) -> tuple:
    """(points (N, 3) camera frame, (N,) flat pixel indices) of the readings (inside ``mask``)."""
    valid = depth > 0 if mask is None else (depth > 0) & mask
    v, u = np.nonzero(valid)
    z = depth[v, u].astype(np.float64) / factor_depth
    x = (u - intrinsics[0, 2]) * z / intrinsics[0, 0]
    y = (v - intrinsics[1, 2]) * z / intrinsics[1, 1]
    return np.stack([x, y, z], 1), np.flatnonzero(valid)


def side_view(points: np.ndarray, grasps: Optional[np.ndarray], angle_deg: float = -45.0):
    """The cloud and grasps turned by ``angle_deg`` about the camera's x axis through the cloud's
    median: for a camera looking down at a table (GraspNet's 40-70 degrees), -45 looks along the
    table top, so grippers show their height above it."""
    centre = np.median(points, axis=0)
    a = np.deg2rad(angle_deg)
    turn = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    turned = (points - centre) @ turn.T + centre
    if grasps is None or not len(grasps):
        return turned, grasps
    g = np.array(grasps, np.float64).reshape(-1, 17)
    g[:, 4:13] = (turn @ g[:, 4:13].reshape(-1, 3, 3)).reshape(-1, 9)
    g[:, 13:16] = (g[:, 13:16] - centre) @ turn.T + centre
    return turned, g


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
               colorbar_label: Optional[str] = None, scale: int = 1,
               point_colours: Optional[np.ndarray] = None, point_size: float = 4.0,
               score_range: Optional[tuple] = None,
               grasp_colours: Optional[np.ndarray] = None,
               legend: Optional[Sequence[Tuple[str, tuple]]] = None,
               score_label: str = 'grasp score') -> None:
    """Write a PNG of the image's size times ``scale``, widened by a strip at its right for
    the legends (:func:`legend_strip`; none when nothing needs one), so that no legend covers
    the scene: the image, then ``points`` (camera frame) coloured by ``point_values`` (or RGB
    ``point_colours``), ``markers`` (camera frame, black rings), and the grippers of
    ``grasps`` (GraspGroup rows) as thin outlines coloured by score (``score_range``, default
    the drawn scores' range) with a legend titled ``score_label`` (what the method's score
    is: the detectors' ``score_label``), the best drawn last (on top). ``grasp_colours``
    ((N, 3) RGB in [0, 1], one per grasp, drawn in the given order) colours the grippers
    instead, with ``legend`` ((name, colour) pairs) in place of the score bar."""
    height, width = image.shape[:2]
    dpi = 100 * scale
    score_bar = grasps is not None and len(grasps) > 0 and grasp_colours is None
    point_bar = bool(colorbar_label) and points is not None and len(points) > 0 and \
        point_colours is None
    total = width + legend_strip(score_bar, point_bar, bool(legend))
    fig = plt.figure(figsize=(total / 100, height / 100), dpi=dpi)
    ax = fig.add_axes((0, 0, width / total, 1))
    bars = []  # the strip's colour bars, left to right

    def bar_axes():
        left = width + BAR_STRIP * len(bars) + 8
        bars.append(fig.add_axes((left / total, 0.1, 10 / total, 0.8)))
        return bars[-1]

    ax.imshow(image, extent=(-0.5, width - 0.5, height - 0.5, -0.5), interpolation='nearest')
    if points is not None and len(points):
        uv = project(points, intrinsics)
        order = np.argsort(-points[:, 2], kind='stable')  # far first: near points cover them
        if point_colours is not None:
            ax.scatter(uv[order, 0], uv[order, 1], c=point_colours[order], s=point_size,
                       linewidths=0)
        else:
            sc = ax.scatter(uv[:, 0], uv[:, 1], c=point_values, cmap=point_cmap, s=point_size,
                            linewidths=0, vmin=0, vmax=max(float(np.max(point_values)), 1e-6))
            if point_bar:
                bar = fig.colorbar(sc, cax=bar_axes())
                bar.set_label(colorbar_label, fontsize=7)
                bar.ax.tick_params(labelsize=6)
    if markers is not None and len(markers):
        uv = project(markers, intrinsics)
        ax.scatter(uv[:, 0], uv[:, 1], s=14, facecolors='none', edgecolors='black',
                   linewidths=0.6)
    if grasps is not None and len(grasps) and grasp_colours is not None:
        uv = project(gripper_outlines(np.asarray(grasps)), intrinsics)
        base = (uv[:, 1] + uv[:, 2]) / 2
        lines = [line for n in range(len(uv)) for line in (uv[n, :4],
                                                           np.stack([base[n], uv[n, 5]]))]
        ax.add_collection(LineCollection(lines, colors=np.repeat(grasp_colours, 2, axis=0),
                                         linewidths=1.0))
    elif score_bar:
        grasps = np.asarray(grasps)[np.argsort(np.asarray(grasps)[:, 0], kind='stable')]
        lo, hi = score_range or (float(grasps[:, 0].min()), float(grasps[:, 0].max()))
        norm = Normalize(lo, hi if hi > lo else lo + 1e-6)
        colours = colormaps[SCORE_CMAP](norm(grasps[:, 0]))
        uv = project(gripper_outlines(grasps), intrinsics)
        base = (uv[:, 1] + uv[:, 2]) / 2
        lines, line_colours = [], []
        for n in range(len(grasps)):
            lines += [uv[n, :4], np.stack([base[n], uv[n, 5]])]
            line_colours += [colours[n]] * 2
        ax.add_collection(LineCollection(lines, colors=line_colours, linewidths=1.0))
        bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=SCORE_CMAP), cax=bar_axes())
        bar.set_label(score_label, fontsize=7)
        bar.ax.tick_params(labelsize=6)
    if legend:
        fig.legend(handles=[Line2D([], [], color=c, label=name) for name, c in legend],
                   loc='center left', bbox_to_anchor=((width + BAR_STRIP * len(bars) + 4) / total,
                                                      0.5), fontsize=7, frameon=False)
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


__all__ = ['back_project', 'depth_colours', 'draw_scene', 'gripper_outlines', 'project',
           'side_view', 'top_grasps']
