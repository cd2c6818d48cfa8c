#!/usr/bin/env python
"""Signed distances of triangle meshes: accuracy and speed of the candidate libraries on the
grids the label generator samples (docs/notes/benchmarks/label_generation.md).

Two steps, because the libraries live in a venv of their own:

1. ``export`` (mmgrasp's environment): the synthetic shapes as closed meshes (2 mm vertex
   spacing), the 2 mm SDF grid of each (the generator's), and on 2000 grid points drawn with a
   fixed seed the exact signed distance to the mesh by mmgrasp's brute-force numpy backend
   (``mesh_signed_distance(..., backend='numpy')``: the nearest triangle's closest point, the
   sign from the generalised winding number).
2. ``measure`` (any environment with the libraries): per library and shape, the wall time of
   the whole grid (one thread) and the largest error and sign errors on the reference points.

    python tools/analysis/benchmark_mesh_sdf.py export data/meshsdf.npz
    OMP_NUM_THREADS=1 SDFBENCH_PYTHON tools/analysis/benchmark_mesh_sdf.py \
        measure data/meshsdf.npz
"""
import argparse
import json
import time

import numpy as np

KINDS = ('box', 'sphere', 'cylinder', 'capsule', 'torus', 'lshape')


def export(path: str) -> None:
    from mmgrasp.datasets.labelgen.mesh import closest_distance, winding_number
    from mmgrasp.datasets.synthetic.boxes import sdf_grid_points
    from mmgrasp.datasets.synthetic.scene import make_model, model_mesh
    rng = np.random.default_rng(0)
    data, meta = {}, {}
    for m, kind in enumerate(KINDS):
        vertices, faces = model_mesh(make_model(0, m, 10, kind), spacing=0.002)
        grid, _, _ = sdf_grid_points(vertices.min(0), vertices.max(0))
        flat = grid.reshape(-1, 3)
        ref = flat[rng.choice(len(flat), 2000, replace=False)]
        tri = vertices[faces]
        t0 = time.perf_counter()
        inside = winding_number(ref, tri) > 0.5
        ref_sdf = np.where(inside, -1, 1) * closest_distance(ref, tri)
        numpy_seconds = (time.perf_counter() - t0) * len(flat) / len(ref)
        data[f'{kind}_vertices'], data[f'{kind}_faces'] = vertices, faces
        data[f'{kind}_grid'], data[f'{kind}_ref'] = flat, ref
        data[f'{kind}_ref_sdf'] = ref_sdf
        meta[kind] = dict(faces=len(faces), grid=len(flat),
                          numpy_grid_seconds_extrapolated=round(numpy_seconds, 1))
    np.savez(path, **data)
    print(json.dumps(meta))


def _libraries():
    def open3d_sdf(v, f, q):
        import open3d as o3d
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.core.Tensor(v.astype(np.float32)),
                            o3d.core.Tensor(f.astype(np.uint32)))
        return scene.compute_signed_distance(o3d.core.Tensor(q.astype(np.float32))).numpy()

    def pysdf_sdf(v, f, q):
        from pysdf import SDF
        return -SDF(v.astype(np.float32), f.astype(np.uint32))(q.astype(np.float32))

    def trimesh_sdf(v, f, q):
        import trimesh
        return -trimesh.proximity.signed_distance(trimesh.Trimesh(v, f, process=False), q)

    def pcu_sdf(v, f, q):
        import point_cloud_utils as pcu
        return pcu.signed_distance_to_mesh(q, v, f.astype(np.int32))[0]

    return dict(open3d=open3d_sdf, pysdf=pysdf_sdf, trimesh=trimesh_sdf,
                point_cloud_utils=pcu_sdf)


def measure(path: str, libraries) -> None:
    data = np.load(path)
    results = {}
    for name, fn in _libraries().items():
        if libraries and name not in libraries:
            continue
        for kind in KINDS:
            v, f = data[f'{kind}_vertices'], data[f'{kind}_faces']
            try:
                t0 = time.perf_counter()
                fn(v, f, data[f'{kind}_grid'])
                wall = time.perf_counter() - t0
                got = np.asarray(fn(v, f, data[f'{kind}_ref']), np.float64)
            except Exception as err:  # noqa: BLE001 - reported per library
                results.setdefault(name, {})[kind] = f'{type(err).__name__}: {err}'[:200]
                continue
            ref = data[f'{kind}_ref_sdf']
            results.setdefault(name, {})[kind] = dict(
                grid=int(len(data[f'{kind}_grid'])), seconds=round(wall, 3),
                max_abs_error_um=round(float(np.abs(got - ref).max()) * 1e6, 2),
                sign_errors=int((np.sign(got) != np.sign(ref)).sum()))
    print(json.dumps(results, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('step', choices=['export', 'measure'])
    p.add_argument('data', help='the exported npz')
    p.add_argument('--libraries', nargs='*', default=None)
    a = p.parse_args(argv)
    export(a.data) if a.step == 'export' else measure(a.data, a.libraries)


if __name__ == '__main__':
    main()
