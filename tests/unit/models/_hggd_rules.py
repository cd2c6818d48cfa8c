"""HGGD's 2-D targets written from the published rules (shared/reference/hggd.md §1.2, §7), one
label at a time in plain Python and numpy: independent of mmgrasp's vectorised worker code and
torch rendering, which the tests compare with it (and it with the reference's goldens)."""
import math
from typing import Dict, Tuple

import numpy as np


def rules_rectangles(rows: Dict[str, np.ndarray], native_width: int, input_width: int,
                     min_width: float = 0., min_score: float = 0.8) -> list:
    """(centre (x, y) int, width float, θ float32, depth mm) per kept row, in row order at the
    input scale: the score/width filter, θ wrapped by π in float32, the rectangle's four corners
    (float32 half-axis and normal on the float64 centre, each truncated to int32), halved."""
    scale = native_width / input_width
    out = []
    for i in range(len(rows['thetas_rad'])):
        if rows['widths_2d'][i] < min_width or rows['scores_from_6d'][i] < min_score:
            continue
        theta = rows['thetas_rad'][i]
        if theta > np.pi / 2 or theta < -np.pi / 2:
            theta = np.float32((theta + np.float32(np.pi / 2)) % np.float32(np.pi)
                               - np.float32(np.pi / 2))
        half = np.float32(rows['widths_2d'][i] / np.float32(2))
        axis = np.array([half * np.cos(theta), half * -np.sin(theta)], np.float32)
        normal = np.array([-axis[1], axis[0]], np.float32)
        normal = normal / np.float32(math.sqrt(float(normal[0] * normal[0] + normal[1] * normal[1])))
        normal = (normal * rows['heights_2d'][i] / np.float32(2)).astype(np.float32)
        c = rows['centers_2d'][i]
        corners = [np.trunc(c + normal + axis), np.trunc(c + normal - axis),
                   np.trunc(c - normal - axis), np.trunc(c - normal + axis)]
        points = [p / scale for p in corners]
        centre = tuple(int(v) for v in np.trunc(sum(points) / 4))
        width = math.hypot(*(points[0] - points[1]))
        out.append((centre, width, np.float32(theta), float(rows['center_z_depths'][i])))
    return out


def rules_targets(rects: list, raw_depth: np.ndarray, size: Tuple[int, int], ratio: int = 8,
                  anchor_k: int = 6, anchor_w: float = 50., anchor_z: float = 20.,
                  radius: int = 10, min_distance: float = 8.) -> Dict[str, np.ndarray]:
    """``loc_map`` (1, W_in, H_in) and the four anchor maps (anchor_k, W_in / ratio,
    H_in / ratio), float32, of ``rects`` (:func:`rules_rectangles`) on the x-major raw depth
    (W, H) in mm."""
    width_in, height_in = size
    native_w, native_h = raw_depth.shape
    sigma = (2 * radius + 1) / 6
    offsets = np.arange(-radius, radius + 1)
    gauss = np.exp(-(offsets[:, None] ** 2 + offsets[None, :] ** 2) / (2 * sigma ** 2))
    gauss[gauss < np.finfo(float).eps * gauss.max()] = 0
    loc = np.zeros((width_in, height_in))
    drawn = []
    for (x, y), *_ in rects:
        if all(math.hypot(x - a, y - b) >= min_distance for a, b in drawn):
            drawn.append((x, y))
            for i, dx in enumerate(offsets):
                for j, dy in enumerate(offsets):
                    if 0 <= x + dx < width_in and 0 <= y + dy < height_in:
                        loc[x + dx, y + dy] = max(loc[x + dx, y + dy], gauss[i, j])

    cells = (anchor_k, width_in // ratio, height_in // ratio)
    count, theta_sum, depth_sum, width_sum = (np.zeros(cells) for _ in range(4))
    step = math.pi / anchor_k
    for (x, y), w, theta, z in rects:
        u, v = x // ratio, y // ratio
        if not (0 <= u < cells[1] and 0 <= v < cells[2]):
            continue
        px, py = x * native_w // width_in, y * native_w // width_in
        window = raw_depth[max(0, px - 2):min(native_w - 1, px + 2),
                           max(0, py - 2):min(native_h - 1, py + 2)]
        observed = np.median(window)
        theta = min(max(float(theta), -math.pi / 2 + 1e-8), math.pi / 2 - 1e-8)
        g, r = divmod(theta + math.pi / 2, step)
        cell = (int(g), u, v)
        count[cell] += 1
        theta_sum[cell] += r / step - 0.5
        width_sum[cell] += math.log(w / anchor_w)
        if observed > 0:
            depth_sum[cell] += min(max((z - float(observed)) / (2 * anchor_z), -0.5), 0.5)
        elif count[cell] > 1 and depth_sum[cell] > 0:
            depth_sum[cell] *= count[cell] / (count[cell] - 1)
    divisor = np.maximum(count, 1)
    return dict(loc_map=loc[None].astype(np.float32),
                cls_mask=(2 / (1 + np.exp(-count)) - 1).astype(np.float32),
                theta_offset=(theta_sum / divisor).astype(np.float32),
                depth_offset=(depth_sum / divisor).astype(np.float32),
                width_offset=(width_sum / divisor).astype(np.float32))


def maintain_events(rects: list, raw_depth: np.ndarray, size: Tuple[int, int],
                    ratio: int = 8, anchor_k: int = 6) -> int:
    """The most "maintain" events (labels without depth that are not their (anchor, cell)'s
    first) of any (anchor, cell)."""
    native_w, native_h = raw_depth.shape
    seen, events = {}, {}
    for (x, y), _, theta, _ in rects:
        u, v = x // ratio, y // ratio
        if not (0 <= u < size[0] // ratio and 0 <= v < size[1] // ratio):
            continue
        px, py = x * native_w // size[0], y * native_w // size[0]
        window = raw_depth[max(0, px - 2):min(native_w - 1, px + 2),
                           max(0, py - 2):min(native_h - 1, py + 2)]
        theta = min(max(float(theta), -math.pi / 2 + 1e-8), math.pi / 2 - 1e-8)
        cell = (divmod(theta + math.pi / 2, math.pi / anchor_k)[0], u, v)
        if seen.get(cell) and np.median(window) <= 0:
            events[cell] = events.get(cell, 0) + 1
        seen[cell] = True
    return max(events.values(), default=0)
