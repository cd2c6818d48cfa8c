"""Make golden.npz: open3d's normals of a sampled synthetic cloud (see README.md).

    PYTHONPATH=. python tests/data/normals_golden/make_golden.py points WORK/points.npy
    OPEN3D_VENV/bin/python tests/data/normals_golden/make_golden.py open3d WORK/points.npy \
        tests/data/normals_golden/golden.npz

The first step needs mmgrasp (the synthetic writer), the second only numpy and open3d.
"""
import sys
import tempfile

import numpy as np


def points(out: str) -> None:
    """4 000 points drawn as LoadGraspScene draws them from frame 0 of a synthetic scene, plus
    three isolated points (fewer than 3 neighbours within 0.1 m) and a collinear triple."""
    from mmgrasp.datasets.layouts import open_reader
    from mmgrasp.datasets.synthetic import write_synthetic_dataset
    from mmgrasp.datasets.transforms.loading import LoadGraspScene

    root = tempfile.mkdtemp() + '/graspnet'
    write_synthetic_dataset(root, scenes=1, frames=1, objects=5, points_per_object=40,
                            grid=(6, 3, 2), image_size=(320, 180), cameras=('realsense',),
                            seed=0, progress=False, test_scenes=())
    sample = LoadGraspScene(num_points=4000)(dict(
        reader=open_reader(root, 'realsense'), scene=0, frame=0,
        rng=np.random.default_rng(0)))
    extra = np.array([[0.5, 0.5, 2.0], [-0.5, 0.5, 2.0], [0.5, -0.5, 2.0],  # isolated
                      [-0.5, -0.5, 2.0], [-0.49, -0.5, 2.0], [-0.48, -0.5, 2.0]],  # a line
                     np.float32)
    np.save(out, np.concatenate([sample['points'], extra]))


def normals(points_file: str, out: str) -> None:
    import open3d as o3d

    xyz = np.load(points_file)
    cloud = o3d.geometry.PointCloud()
    cloud.points = o3d.utility.Vector3dVector(xyz.astype(np.float64))
    cloud.estimate_normals(search_param=o3d.geometry.KDTreeSearchParamHybrid(radius=0.1,
                                                                             max_nn=30))
    np.savez_compressed(out, points=xyz, normals=np.asarray(cloud.normals),
                        open3d_version=np.array(o3d.__version__))


if __name__ == '__main__':
    if sys.argv[1] == 'points':
        points(sys.argv[2])
    else:
        normals(sys.argv[2], sys.argv[3])
