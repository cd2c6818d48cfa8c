#!/usr/bin/env python
"""Labels generated from meshes against the synthetic writer's labels (exact distances) on the
synthetic shapes, every differing cell put in a class that explains it.

For each model: its mesh (``model_mesh``) goes through the generator (SDF of the mesh ->
``object_grasp_labels``) on the label points the synthetic writer uses, and the synthetic
writer's own labels are computed on the same points (``box_grasp_labels`` /
``shape_grasp_labels``). A cell differs when μ differs. Classes (first that holds):

- ``rule``: the synthetic writer rejects the cell by one of its safety rules and the generator
  (the evaluator's physics) accepts it: an exact contact within ``EDGE_MARGIN`` of an edge
  (boxes: of a face border; curved shapes: a normal turn above 45 degrees), a contact within
  ``CENTRE_MARGIN`` of the jaw centre, a width at the maximum, or (concave shapes) the jaw
  line meeting the surface again between the contact and the open jaw;
- ``normal``: both feasible, or one of them infeasible at the μ grid's end, and the exact
  antipodal angle and the evaluator's (its contacts and plane-fit normals on the SDF) lie on
  either side of a friction cone arctan(k / 10): the evaluator's normal estimate moves the
  cell across a μ step (the largest angle difference is reported), or the exact angle ties a
  cone to 1e-6 rad (45 degrees exactly at μ = 1.0: float rounding decides);
- ``contact``: the evaluator's contact search finds no contact, or another one than the exact
  surface crossing (more than a cell away): dexnet's zero-crossing rules near a corner;
- ``unexplained``: anything else (the check asserts there is none).

    python tools/analysis/compare_generated_labels.py --models 6 --views 60 --points 40 \\
        --shapes box sphere cylinder capsule torus lshape
"""
import argparse
import json
import sys

import numpy as np

from mmgrasp.datasets.labelgen.mesh import TriangleMesh, mesh_signed_distance
from mmgrasp.datasets.labelgen.object_labels import jaw_axes, label_grasps, object_grasp_labels
from mmgrasp.datasets.synthetic.boxes import box_signed_distance, curved_sdf_grid
from mmgrasp.datasets.synthetic.labels import (CENTRE_MARGIN, EDGE_ANGLE, EDGE_MARGIN,
                                               box_grasp_labels, shape_grasp_labels)
from mmgrasp.datasets.synthetic.scene import eval_points, make_model, model_mesh
from mmgrasp.geometry import SignedDistanceField, antipodal_angles, build_gripper, close_jaws

CLASSES = ('rule', 'normal', 'contact', 'unexplained')


class _Exact:
    """The model's exact signed distance and normals (boxes too)."""

    def __init__(self, model):
        self.model = model

    def sdf(self, p):
        if self.model.shape is None:
            return box_signed_distance(self.model.half, p)
        return self.model.shape.sdf(p)

    def normal(self, p, step=1e-5):
        grad = np.stack([self.sdf(p + step * e) - self.sdf(p - step * e) for e in np.eye(3)], -1)
        return grad / np.maximum(np.linalg.norm(grad, axis=-1, keepdims=True), 1e-12)


def _exits(exact, c, u, limit):
    """Exact distances from c along u to the surface (bisection on the exact SDF)."""
    lo, hi = np.zeros(len(c)), np.full(len(c), limit)
    ts = np.linspace(0, limit, 201)[1:]
    out = exact.sdf(c[:, None] + ts[None, :, None] * u[:, None]) >= 0
    found = out.any(1)
    hi = np.where(found, ts[np.argmax(out, 1)], limit)
    lo = np.maximum(hi - ts[0], 0)
    for _ in range(40):
        mid = (lo + hi) / 2
        o = exact.sdf(c + mid[:, None] * u) >= 0
        hi, lo = np.where(o, mid, hi), np.where(o, lo, mid)
    return np.where(found, hi, np.nan)


def _on_edge(exact, q, n):
    helper = np.where(np.abs(n[:, :1]) < 0.9, np.eye(3)[0], np.eye(3)[1])
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    t2 = np.cross(n, t1)
    edge = np.zeros(len(q), bool)
    for t in (t1, -t1, t2, -t2):  # the same probe as the synthetic writer's, on the exact field
        edge |= np.einsum('ij,ij->i', exact.normal(q + (EDGE_MARGIN + 1e-3) * t), n) < \
            np.cos(EDGE_ANGLE) + 0.05
    return edge


def compare(model, gripper, mu_gen, w_gen, sdf: SignedDistanceField, points) -> dict:
    """Counts per class and the largest angle difference of the ``normal`` class."""
    if model.shape is None:
        mu_syn, _ = box_grasp_labels(model.half, points, gripper.grid, gripper.max_width)
    else:
        mu_syn, _ = shape_grasp_labels(model.shape, points, gripper.grid, gripper.max_width)
    differ = np.argwhere(mu_gen != mu_syn)
    rot, centres, _ = label_grasps(points, gripper)
    axes = jaw_axes(rot)
    pi, vi, ai, di = differ.T
    c, u = centres[pi, vi, di], axes[vi, ai]
    exact = _Exact(model)
    limit = gripper.max_width / 2
    t_pos, t_neg = _exits(exact, c, u, limit), _exits(exact, c, -u, limit)
    q1, q2 = c - t_neg[:, None] * u, c + t_pos[:, None] * u
    n1, n2 = exact.normal(q1), exact.normal(q2)
    width = 2 * np.maximum(t_pos, t_neg) + 0.01
    with np.errstate(invalid='ignore'):
        rule = (np.minimum(t_pos, t_neg) < CENTRE_MARGIN + 1e-3) | \
            (width > gripper.max_width - 2e-3) | _on_edge(exact, q1, n1) | _on_edge(exact, q2, n2)
        for q, sign in ((q1, -1), (q2, 1)):  # the surface again before the open jaw
            ts = np.linspace(0, 1, 101)[1:, None, None]
            path = q[None] + ts * ((c + sign * width[:, None] / 2 * u) - q)[None]
            rule |= (exact.sdf(path) < -1e-4).any(0)
    rule &= mu_syn[pi, vi, ai, di] < 0
    wg = np.where(w_gen[pi, vi, ai, di] > 0, w_gen[pi, vi, ai, di], width)
    found, qe, ne = close_jaws(sdf, c, u, np.nan_to_num(wg, nan=gripper.max_width))
    contact = ~found | (np.linalg.norm(qe[:, 0] - q1, axis=1) > sdf.resolution) | \
        (np.linalg.norm(qe[:, 1] - q2, axis=1) > sdf.resolution)
    alpha_exact = antipodal_angles(q1, n1, q2, n2)
    alpha_eval = antipodal_angles(qe[:, 0], ne[:, 0], qe[:, 1], ne[:, 1])
    cones = np.arctan(np.arange(1, 11) / 10)
    with np.errstate(invalid='ignore'):
        across = ((alpha_exact[:, None] > cones) != (alpha_eval[:, None] > cones)).any(1)
        across |= (np.abs(alpha_exact[:, None] - cones) < 1e-6).any(1)  # a tie with a cone
    normal = ~rule & ~contact & across
    contact &= ~rule
    unexplained = ~(rule | normal | contact)
    out = dict(cells=int(mu_gen.size), differ=int(len(differ)),
               both_feasible=int(((mu_gen > 0) & (mu_syn > 0)).sum()),
               gen_feasible=int((mu_gen > 0).sum()), syn_feasible=int((mu_syn > 0).sum()),
               rule=int(rule.sum()), normal=int(normal.sum()), contact=int(contact.sum()),
               unexplained=int(unexplained.sum()),
               max_normal_angle_deg=float(np.degrees(np.nanmax(
                   np.abs(alpha_exact - alpha_eval)[normal]))) if normal.any() else 0.0)
    out['unexplained_cells'] = differ[unexplained][:10].tolist()
    return out


def generated(model, gripper, backend='numpy', resolution=0.002):
    mesh = TriangleMesh(*model_mesh(model))
    values, origin, res = curved_sdf_grid(mesh.vertices.min(0), mesh.vertices.max(0),
                                          lambda p: mesh_signed_distance(mesh, p, backend),
                                          resolution)
    sdf = SignedDistanceField(values, origin, res)
    labels = object_grasp_labels(sdf, model.points, eval_points(model), gripper)
    return labels, sdf


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', type=int, default=6)
    p.add_argument('--shapes', nargs='+', default=['box', 'sphere', 'cylinder', 'capsule',
                                                   'torus', 'lshape'])
    p.add_argument('--views', type=int, default=60)
    p.add_argument('--points', type=int, default=40)
    p.add_argument('--backend', default='numpy', choices=['numpy', 'open3d'])
    p.add_argument('--seed', type=int, default=0)
    a = p.parse_args(argv)
    gripper = build_gripper(dict(num_views=a.views))
    rows = {}
    for m in range(a.models):
        model = make_model(a.seed, m, a.points, a.shapes[m % len(a.shapes)])
        labels, sdf = generated(model, gripper, a.backend)
        rows[f'{m:03d} {a.shapes[m % len(a.shapes)]}'] = compare(
            model, gripper, labels['scores'], labels['offsets'][..., 2], sdf, model.points)
        print(m, json.dumps(rows[f'{m:03d} {a.shapes[m % len(a.shapes)]}']), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
