"""Why each grasp scored what it did: per-grasp tables, precision plots and coloured scenes, read
from the very :func:`evaluate_frame` results the AP is the mean of (``evaluate_scene``'s
``on_result``), not from a second implementation.

Written into ``out_dir`` (``mmgrasp-eval ... --diagnose DIR``):

- ``scene_%04d/%04d.csv`` per frame: every evaluated grasp (after width clipping, NMS, the best
  per object and the score cut), best first: rank, object index and id, score, width, mu (the
  smallest friction coefficient of the list that holds, -1 if none), collided, empty, outcome
  (``collided`` / ``empty`` / ``force_closure`` / ``no_force_closure``), in_top_k;
- ``scene_%04d/%04d.ply``: the posed model points (grey), the table points the evaluation used
  (light grey) and each evaluated gripper, coloured by outcome (legend in the header comments);
- ``frames.csv``, ``scenes.csv``, ``objects.csv``: counts per frame, scene and object
  (dumped, in width range, after NMS, evaluated = collided + empty + scored, force closure)
  and the AP of each frame / scene;
- ``scene_%04d/%04d.png``: the frame's RGB image with each evaluated gripper drawn by outcome
  (the PLY's colours, legend with the counts; a frame without RGB image or meta file is named
  in a warning);
- ``precision_at_k.png`` (mean precision@k per mu), ``ap_vs_mu.png`` (AP per mu) and
  ``outcomes_by_rank.png`` (per rank 1..top_k, the share of frames whose grasp there collided,
  was empty, had no force closure or had force closure, and had none).
"""
from __future__ import annotations

import csv
import os
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np

from mmgrasp.geometry import transform_points

from .functional import EVAL_FRICTION_COEFFICIENTS
from .graspnet_dump_eval import STANDARD, Protocol, SceneInputs, evaluate_scene, scene_frames
from .scene_models import read_annotation

OUTCOME_COLOURS = {'collided': (220, 40, 40), 'empty': (60, 110, 230),
                   'no_force_closure': (240, 170, 0), 'force_closure': (30, 180, 60)}
GRASP_COLUMNS = ('rank', 'object_index', 'object_id', 'score', 'width', 'mu', 'collided',
                 'empty', 'outcome', 'in_top_k')
COUNT_COLUMNS = ('dumped', 'in_width', 'after_nms', 'evaluated', 'collided', 'empty', 'scored',
                 'force_closure', 'no_force_closure')


def outcomes(result: dict) -> np.ndarray:
    """Per kept grasp of an :func:`evaluate_frame` result: 'collided' (a finger or the palm
    in a point, whether or not also empty), 'empty', 'force_closure' (mu > 0) or
    'no_force_closure' (-1: no contact pair, or none of the coefficients holds)."""
    out = np.where(result['scores'] > 0, 'force_closure', 'no_force_closure').astype(object)
    out[result['empty']] = 'empty'
    out[result['hit']] = 'collided'
    return out


def frame_counts(result: dict) -> Dict[str, int]:
    kinds = outcomes(result)
    counts = {k: int(result[k]) for k in ('dumped', 'in_width', 'after_nms')}
    counts['evaluated'] = len(kinds)
    for name in ('collided', 'empty', 'force_closure', 'no_force_closure'):
        counts[name] = int(np.sum(kinds == name))
    counts['scored'] = counts['force_closure'] + counts['no_force_closure']
    return counts


def _write_csv(path: str, columns: Sequence[str], rows: List[Sequence]) -> None:
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)
    os.replace(tmp, path)


def _ap(acc: np.ndarray) -> List[float]:
    return [100 * float(acc.mean()), 100 * float(acc[..., 3].mean()),
            100 * float(acc[..., 1].mean())]


# graspnetAPI's gripper mesh (plot_gripper_pro_max) with the collision detector's sizes
GRIPPER_HEIGHT, FINGER_WIDTH, DEPTH_BASE, TAIL_LENGTH = 0.02, 0.01, 0.02, 0.04
_UNIT_BOX = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], np.float64)


def gripper_boxes(grasps: np.ndarray) -> np.ndarray:
    """(N, 4, 8, 3) camera-frame corners of each grasp's left finger, right finger, base and
    tail (the approach line), corners ordered (i, j, k) in {0, 1}^3. Gripper frame: x approach,
    y closing direction; the fingers reach ``depth`` past the centre, the base sits
    ``DEPTH_BASE`` behind it."""
    g = np.asarray(grasps, np.float64).reshape(-1, 17)
    width, depth = g[:, 1], g[:, 3]
    h, f, back = GRIPPER_HEIGHT, FINGER_WIDTH, -(DEPTH_BASE + FINGER_WIDTH)
    ones, length = np.ones_like(width), depth + DEPTH_BASE + f
    # per box: lowest corner (x0, y0, z0) and size (dx, dy, dz), each (N, 4)
    x0 = np.stack([back * ones, back * ones, back * ones, (back - TAIL_LENGTH) * ones], 1)
    y0 = np.stack([-width / 2 - f, width / 2, -width / 2, -f / 2 * ones], 1)
    dx = np.stack([length, length, f * ones, TAIL_LENGTH * ones], 1)
    dy = np.stack([f * ones, f * ones, width, f * ones], 1)
    low = np.stack([x0, y0, np.full_like(x0, -h / 2)], -1)
    size = np.stack([dx, dy, np.full_like(dx, h)], -1)
    corners = low[:, :, None] + _UNIT_BOX * size[:, :, None]  # (N, 4, 8, 3) gripper frame
    rotation, centre = g[:, 4:13].reshape(-1, 3, 3), g[:, 13:16]
    return np.einsum('nbkj,nij->nbki', corners, rotation) + centre[:, None, None]


def write_scene_ply(path: str, inputs: SceneInputs, frame: int, result: dict,
                    table_points: Optional[np.ndarray]) -> None:
    """Binary PLY: model points, table points and the evaluated grippers by outcome."""
    annotation = read_annotation(os.path.join(inputs.cam_dir, 'annotations',
                                              f'{frame:04d}.xml'))
    clouds = [transform_points(m, p) for m, (_, p) in zip(inputs.models, annotation)]
    points = [np.concatenate(clouds) if clouds else np.zeros((0, 3))]
    colours = [np.tile((150, 150, 150), (len(points[0]), 1))]
    if table_points is not None and len(table_points):
        points.append(table_points)
        colours.append(np.tile((210, 210, 210), (len(table_points), 1)))
    boxes = gripper_boxes(result['grasps']).reshape(-1, 8, 3)  # (G*4, 8, 3)
    kinds = np.repeat(outcomes(result), 4)
    # the 12 triangles of a box whose corners are ordered (i, j, k) in {0, 1}^3
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tri = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])
    base = sum(len(p) for p in points)
    faces = (tri[None] + base + 8 * np.arange(len(boxes))[:, None, None]).reshape(-1, 3)
    points.append(boxes.reshape(-1, 3))
    colours.append(np.repeat([OUTCOME_COLOURS[k] for k in kinds], 8, axis=0).reshape(-1, 3)
                   if len(kinds) else np.zeros((0, 3)))
    xyz = np.concatenate(points).astype('<f4')
    rgb = np.concatenate(colours).astype(np.uint8)
    vertex = np.empty(len(xyz), dtype=[('x', '<f4'), ('y', '<f4'), ('z', '<f4'),
                                       ('red', 'u1'), ('green', 'u1'), ('blue', 'u1')])
    for i, name in enumerate('xyz'):
        vertex[name] = xyz[:, i]
    for i, name in enumerate(('red', 'green', 'blue')):
        vertex[name] = rgb[:, i]
    face = np.empty(len(faces), dtype=[('n', 'u1'), ('v', '<i4', (3, ))])
    face['n'], face['v'] = 3, faces
    legend = ''.join(f'comment {k} {r} {g} {b}\n' for k, (r, g, b) in OUTCOME_COLOURS.items())
    header = ('ply\nformat binary_little_endian 1.0\ncomment mmgrasp evaluation diagnostics\n'
              + legend + f'element vertex {len(vertex)}\nproperty float x\nproperty float y\n'
              'property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\n'
              f'element face {len(face)}\nproperty list uchar int vertex_indices\nend_header\n')
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'wb') as f:
        f.write(header.encode('ascii'))
        f.write(vertex.tobytes())
        f.write(face.tobytes())
    os.replace(tmp, path)


def write_frame_png(path: str, cam_dir: str, frame: int, result: dict) -> None:
    """The frame's RGB image with the evaluated grippers coloured by outcome."""
    import cv2
    import scipy.io

    from .grasp_drawing import draw_scene  # here: matplotlib loads only when pictures are drawn
    rgb = cv2.imread(os.path.join(cam_dir, 'rgb', f'{frame:04d}.png'), cv2.IMREAD_COLOR)
    if rgb is None:
        raise FileNotFoundError(f'{cam_dir}/rgb/{frame:04d}.png: cannot read the RGB image')
    intrinsics = scipy.io.loadmat(os.path.join(cam_dir, 'meta', f'{frame:04d}.mat'))[
        'intrinsic_matrix'].astype(np.float64)
    kinds = outcomes(result)
    colours = np.array([OUTCOME_COLOURS[k] for k in kinds], np.float64).reshape(-1, 3) / 255
    legend = [(f'{name.replace("_", " ")} ({int(np.sum(kinds == name))})',
               tuple(np.array(c) / 255)) for name, c in OUTCOME_COLOURS.items()]
    draw_scene(cv2.cvtColor(rgb, cv2.COLOR_BGR2RGB).astype(np.float64) / 255, path, intrinsics,
               np.asarray(result['grasps']), grasp_colours=colours, legend=legend,
               title=f'{len(kinds)} evaluated grasps by outcome')


def rank_outcomes(kinds_per_frame: List[np.ndarray], top_k: int) -> Dict[str, np.ndarray]:
    """Per rank 0..top_k-1, the share of frames whose grasp at that rank had each outcome
    (``'none'``: the frame had fewer grasps)."""
    shares = {name: np.zeros(top_k) for name in (*OUTCOME_COLOURS, 'none')}
    for kinds in kinds_per_frame:
        for rank in range(top_k):
            shares[kinds[rank] if rank < len(kinds) else 'none'][rank] += 1
    return {k: v / max(len(kinds_per_frame), 1) for k, v in shares.items()}


def _rank_plot(out_dir: str, kinds_per_frame: List[np.ndarray], top_k: int) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    shares = rank_outcomes(kinds_per_frame, top_k)
    ranks, bottom = np.arange(1, top_k + 1), np.zeros(top_k)
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, share in shares.items():
        colour = np.array(OUTCOME_COLOURS.get(name, (200, 200, 200))) / 255
        ax.bar(ranks, share, bottom=bottom, width=0.9, color=colour,
               label=name.replace('_', ' '))
        bottom += share
    ax.set(xlabel='rank (grasps of a frame by score, after NMS)', ylabel='share of frames',
           title=f'outcome per rank, {len(kinds_per_frame)} frames', ylim=(0, 1.0))
    ax.legend(fontsize=7, loc='upper right')
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, 'outcomes_by_rank.png'), dpi=100)
    plt.close(fig)


def _plots(out_dir: str, accuracy: np.ndarray) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    mean_k = accuracy.mean(axis=0) if len(accuracy) else np.zeros(accuracy.shape[1:])
    ks = np.arange(1, mean_k.shape[0] + 1)
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, mu in enumerate(EVAL_FRICTION_COEFFICIENTS):
        ax.plot(ks, mean_k[:, i], label=f'mu = {mu:.1f}')
    ax.set(xlabel='k (grasps ranked by score)', ylabel='precision@k (mean over frames)',
           title=f'precision@k, {len(accuracy)} frames', ylim=(0, 1.02))
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, 'precision_at_k.png'), dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    ap = 100 * mean_k.mean(axis=0)
    ax.plot(EVAL_FRICTION_COEFFICIENTS, ap, marker='o')
    ax.set(xlabel='friction coefficient mu', ylabel='AP at mu (%)',
           title=f'AP vs mu (AP = mean over mu: {ap.mean():.2f})', ylim=(0, 102))
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, 'ap_vs_mu.png'), dpi=100)
    plt.close(fig)


def diagnose_dump(root: str, dump_dir: str, camera: str, scenes: Sequence[int], out_dir: str,
                  frames: Optional[Dict[int, Sequence[int]]] = None,
                  protocol: Protocol = STANDARD, sdf_sample_seed: Optional[int] = None,
                  ply: bool = True, plots: bool = True,
                  pictures: bool = True) -> Dict[int, np.ndarray]:
    """Evaluate the dump (one process) writing the files listed in the module docstring
    (``ply``: the PLY scenes, ``pictures``: the frame PNGs, ``plots``: the three plots);
    returns {scene: (frames, top_k, 6) accuracy}, the arrays the AP is the mean of."""
    os.makedirs(out_dir, exist_ok=True)
    frame_rows: List[tuple] = []
    scene_rows: List[tuple] = []
    objects: Dict[int, Dict[str, int]] = {}
    accuracy: Dict[int, np.ndarray] = {}
    kinds_per_frame: List[np.ndarray] = []
    unpictured: List[str] = []
    for scene in scenes:
        scene_dir = os.path.join(out_dir, f'scene_{scene:04d}')
        os.makedirs(scene_dir, exist_ok=True)
        chosen = list(frames[scene]) if frames and scene in frames else \
            scene_frames(root, camera, scene)
        inputs = SceneInputs(root, camera, scene, sdf_sample_seed) if ply else None
        totals = dict.fromkeys(COUNT_COLUMNS, 0)

        def record(s, f, result):
            ids = [i for i, _ in read_annotation(os.path.join(
                root, 'scenes', f'scene_{s:04d}', camera, 'annotations', f'{f:04d}.xml'))]
            kinds = outcomes(result)
            kinds_per_frame.append(kinds[:protocol.top_k])
            cam_dir = os.path.join(root, 'scenes', f'scene_{s:04d}', camera)
            needed = [os.path.join(cam_dir, kind, f'{f:04d}.{ext}')
                      for kind, ext in (('rgb', 'png'), ('meta', 'mat'))]
            if pictures and all(map(os.path.isfile, needed)):
                write_frame_png(os.path.join(scene_dir, f'{f:04d}.png'), cam_dir, f, result)
            elif pictures:
                unpictured.append(next(p for p in needed if not os.path.isfile(p)))
            rows = [(r, int(o), ids[o], float(g[0]), float(g[1]), float(mu), bool(h),
                     bool(e) and not h, k, r < protocol.top_k)
                    for r, (o, g, mu, h, e, k) in enumerate(zip(
                        result['object'], result['grasps'], result['scores'], result['hit'],
                        result['empty'], kinds))]
            _write_csv(os.path.join(scene_dir, f'{f:04d}.csv'), GRASP_COLUMNS, rows)
            counts = frame_counts(result)
            frame_rows.append((s, f, *[counts[c] for c in COUNT_COLUMNS],
                               *_ap(result['accuracy'])))
            for c in COUNT_COLUMNS:
                totals[c] += counts[c]
            for o, k in zip(result['object'], kinds):
                entry = objects.setdefault(ids[o], dict(evaluated=0, **{
                    n: 0 for n in OUTCOME_COLOURS}))
                entry['evaluated'] += 1
                entry[k] += 1
            if ply:
                _, models, _, poses, table = inputs.frame(dump_dir, f)
                posed = np.concatenate([transform_points(m, p) for m, p in zip(models, poses)])
                # the table points the evaluation can use: within 5 cm of the objects' boxes
                write_scene_ply(os.path.join(scene_dir, f'{f:04d}.ply'), inputs, f, result,
                                table.inside(posed.min(0) - 0.05, posed.max(0) + 0.05))
        accuracy[scene] = evaluate_scene(root, dump_dir, camera, scene, chosen,
                                         sdf_sample_seed, protocol=protocol, on_result=record)
        scene_rows.append((scene, len(chosen), *[totals[c] for c in COUNT_COLUMNS],
                           *_ap(accuracy[scene])))
    if unpictured:
        warnings.warn(f'diagnostics: no picture of {len(unpictured)} frames, their RGB image '
                      f'or meta file is missing (first: {unpictured[0]})')
    ap_columns = ('AP', 'AP0.8', 'AP0.4')
    _write_csv(os.path.join(out_dir, 'frames.csv'), ('scene', 'frame', *COUNT_COLUMNS,
                                                     *ap_columns), frame_rows)
    _write_csv(os.path.join(out_dir, 'scenes.csv'), ('scene', 'frames', *COUNT_COLUMNS,
                                                     *ap_columns), scene_rows)
    _write_csv(os.path.join(out_dir, 'objects.csv'),
               ('object_id', 'evaluated', *OUTCOME_COLOURS),
               [(o, e['evaluated'], *[e[n] for n in OUTCOME_COLOURS])
                for o, e in sorted(objects.items())])
    if plots:
        _rank_plot(out_dir, kinds_per_frame, protocol.top_k)
        _plots(out_dir, np.concatenate(list(accuracy.values())) if accuracy else
               np.zeros((0, protocol.top_k, len(EVAL_FRICTION_COEFFICIENTS))))
    return accuracy
