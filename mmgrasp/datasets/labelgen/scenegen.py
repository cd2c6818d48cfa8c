"""Cluttered scenes of one's own objects: dropped onto a table by a physics engine, checked on
the meshes, seen from GraspNet-1Billion's kind of camera trajectory, rendered, and written in its
layout with :func:`.scenes.write_scene`.

**Physics**: pybullet (Bullet; ``pip install pybullet``, which also ships the example meshes of
the guide). It installs from PyPI as a binary wheel for CPython 3.11, runs headless
(``DIRECT``), and is the engine of grasping work such as VGN's simulated clutter (Breyer et al.,
CoRL 2020); a drop of three objects settles in well under a second of CPU. A moving mesh
collides in Bullet as the convex hull of its vertices, so each object is first decomposed into
convex parts by the V-HACD built into pybullet (``pybullet.vhacd``); the parts are cached as
``models/%03d/collision_vhacd.obj``.

**Checks on the meshes**, not on the engine's hulls: a drop is kept only when every object ends
at rest (its pose still after a further half second of simulation, and its mesh within
``CONTACT`` of the table or of another object's mesh), on the table (no vertex below
``-PENETRATION``), and no mesh enters another deeper than ``PENETRATION`` (signed distances of
surface samples of each to every other, :func:`.mesh.mesh_signed_distance`). Else the scene is
dropped again from the next seeded draw.

**Cameras**: GraspNet-1Billion films each scene with a Kinect and a RealSense fixed together on
a robot arm that moves along one trajectory of 256 poses over a quarter sphere (Fang et al., CVPR
2020, section 3.1). The poses of that trajectory are published per scene but not its
parameters: here 8 rings from 70 to 35 degrees of elevation, 32 poses each over 180 degrees of
azimuth, 0.55 m from the table centre, travelled back and forth; the RealSense pose is the
Kinect's times ``rs_wrt_kn``; each camera has its own intrinsics
(:func:`..synthetic.scene.camera_intrinsics`).

**Depth noise** (optional, ``'kinect'``): the axial noise of Nguyen, Izadi and Lovell, "Modeling
Kinect Sensor Noise for Improved 3D Reconstruction and Tracking" (3DIMPVT 2012), eq. 6: a
Gaussian of sigma(z) = 0.0012 + 0.0019 (z - 0.4)^2 metres, drawn from (seed, scene, camera,
frame).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from typing import Optional, Sequence

import numpy as np

from mmgrasp.geometry import Gripper
from ..synthetic.graspnet import RS_WRT_KN
from ..synthetic.scene import (MAX_DEPTH, camera_intrinsics, item_rng, look_at, render,
                               rigid_transform)
from .mesh import TriangleMesh, mesh_signed_distance, sample_surface, write_mesh_obj
from .scenes import FieldModel, write_collision_labels, write_scene

#: views of GraspNet-1Billion's trajectory, per camera and scene
NUM_VIEWS = 256
#: deepest entry of a mesh into another or into the table accepted (metres)
PENETRATION = 0.002
#: farthest a resting mesh may be from what holds it (metres): the engine's hulls and contact
#: margin keep meshes a little apart
CONTACT = 0.004
#: objects are dropped over a disc of this radius about the table centre (metres)
DROP_RADIUS = 0.12
TIMESTEP = 1.0 / 240.0
DEPTH_NOISE = ('none', 'kinect')
_CAMERA_CODE = {'realsense': 0, 'kinect': 1}


def camera_trajectory(views: int = NUM_VIEWS) -> np.ndarray:
    """(views, 4, 4) Kinect poses (OpenCV axes) in the table frame: ``views`` poses spread
    evenly along the 256 of the trajectory described above."""
    rings, per_ring = 8, NUM_VIEWS // 8
    poses = []
    for r, elev in enumerate(np.deg2rad(np.linspace(70, 35, rings))):
        azims = np.deg2rad(np.linspace(-90, 90, per_ring))
        for azim in (azims if r % 2 == 0 else azims[::-1]):
            eye = 0.55 * np.array([np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim),
                                   np.sin(elev)])
            poses.append(look_at(eye, np.array([0.0, 0.0, 0.02])))
    pick = np.round(np.linspace(0, NUM_VIEWS - 1, views)).astype(int)
    return np.stack(poses)[pick]


def camera_poses(camera: str, views: int = NUM_VIEWS) -> np.ndarray:
    """``camera``'s poses in the table frame (the RealSense rides with the Kinect)."""
    kinect = camera_trajectory(views)
    if camera == 'kinect':
        return kinect
    if camera == 'realsense':
        return kinect @ RS_WRT_KN
    raise ValueError(f"camera {camera!r}: expected 'realsense' or 'kinect'")


@contextlib.contextmanager
def _quiet():
    """Silence the C library's prints (V-HACD reports every step on stdout)."""
    saved = os.dup(1)
    with open(os.devnull, 'w') as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def convex_parts(mesh: TriangleMesh, path: str) -> str:
    """``path``: V-HACD's convex parts of ``mesh`` (an OBJ of one group per part), made once
    and written through a temporary name."""
    if not os.path.isfile(path):
        import pybullet as pb
        tmp = f'{path}.tmp{os.getpid()}'
        write_mesh_obj(tmp + '.in.obj', mesh)
        with _quiet():
            pb.vhacd(tmp + '.in.obj', tmp + '.obj', os.devnull, resolution=100000)
        os.remove(tmp + '.in.obj')
        os.replace(tmp + '.obj', path)
    return path


def _quaternion_matrix(q) -> np.ndarray:
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _mass_centre(mesh: TriangleMesh) -> np.ndarray:
    """Centre of the enclosed volume (signed tetrahedra from the origin)."""
    tri = mesh.vertices[mesh.faces]
    vol = np.einsum('ij,ij->i', tri[:, 0], np.cross(tri[:, 1], tri[:, 2])) / 6.0
    return (vol[:, None] * tri.sum(1) / 4.0).sum(0) / vol.sum()


def simulate_drop(meshes: Sequence[TriangleMesh], parts: Sequence[str],
                  rng: np.random.Generator, max_seconds: float = 6.0) -> tuple:
    """Drop the meshes one above the other over the table (z = 0) at random positions and
    orientations from ``rng`` and run pybullet until every body is still. Returns the 4x4
    mesh -> table poses and whether the engine found them at rest."""
    with _quiet():  # the module prints its build time on import
        import pybullet as pb
    cid = pb.connect(pb.DIRECT)
    try:
        pb.setGravity(0, 0, -9.81, physicsClientId=cid)
        pb.setTimeStep(TIMESTEP, physicsClientId=cid)
        table = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=cid)
        pb.createMultiBody(0, table, physicsClientId=cid)
        bodies, centres, z = [], [], 0.0
        for mesh, part in zip(meshes, parts):
            centre = _mass_centre(mesh)
            radius = float(np.linalg.norm(mesh.vertices - centre, axis=1).max())
            shape = pb.createCollisionShape(pb.GEOM_MESH, fileName=part,
                                            collisionFramePosition=(-centre).tolist(),
                                            physicsClientId=cid)
            q = rng.normal(size=4)
            r, a = DROP_RADIUS * np.sqrt(rng.random()), rng.uniform(0, 2 * np.pi)
            z += radius + 0.005
            body = pb.createMultiBody(0.1, shape, basePosition=[r * np.cos(a), r * np.sin(a), z],
                                      baseOrientation=(q / np.linalg.norm(q)).tolist(),
                                      physicsClientId=cid)
            pb.changeDynamics(body, -1, lateralFriction=0.8, rollingFriction=0.001,
                              spinningFriction=0.001, physicsClientId=cid)
            bodies.append(body)
            centres.append(centre)
            z += radius

        def state():
            out = []
            for body, centre in zip(bodies, centres):
                pos, quat = pb.getBasePositionAndOrientation(body, physicsClientId=cid)
                pose = rigid_transform(_quaternion_matrix(quat), pos)
                out.append(pose @ rigid_transform(np.eye(3), -centre))
            return out

        def still():
            for body in bodies:
                lin, ang = pb.getBaseVelocity(body, physicsClientId=cid)
                if np.linalg.norm(lin) > 1e-3 or np.linalg.norm(ang) > 1e-2:
                    return False
            return True

        steps = int(max_seconds / TIMESTEP)
        for step in range(steps):
            pb.stepSimulation(physicsClientId=cid)
            if step % 24 == 23 and step * TIMESTEP > 0.5 and still():
                break
        before = state()
        for _ in range(int(0.5 / TIMESTEP)):  # half a second more: nothing may move
            pb.stepSimulation(physicsClientId=cid)
        after = state()
        moved = max(np.abs(a[:3, 3] - b[:3, 3]).max() for a, b in zip(before, after))
        turned = max(np.abs(a[:3, :3] - b[:3, :3]).max() for a, b in zip(before, after))
        return after, bool(still() and moved < 1e-3 and turned < 1e-2)
    finally:
        pb.disconnect(physicsClientId=cid)


def _posed(mesh: TriangleMesh, pose: np.ndarray) -> TriangleMesh:
    return TriangleMesh(mesh.vertices @ pose[:3, :3].T + pose[:3, 3], mesh.faces)


def mesh_contacts(meshes: Sequence[TriangleMesh], poses: Sequence[np.ndarray],
                  samples: int = 400, seed: int = 0) -> tuple:
    """On the posed meshes: (deepest entry of a mesh into another, in metres; deepest vertex
    below the table; per object the gap to the nearest support, table or another mesh)."""
    posed = [_posed(m, p) for m, p in zip(meshes, poses)]
    points = [np.concatenate([m.vertices, sample_surface(m, samples, seed)]) for m in posed]
    depth = 0.0
    gaps = [float(max(m.vertices[:, 2].min(), 0.0)) for m in posed]
    for i, pts in enumerate(points):
        for j, other in enumerate(posed):
            if i == j:
                continue
            d = mesh_signed_distance(other, pts, backend='numpy')
            depth = max(depth, float(-d.min()))
            gaps[i] = min(gaps[i], float(max(d.min(), 0.0)))
    below = float(max(-min(m.vertices[:, 2].min() for m in posed), 0.0))
    return depth, below, gaps


def drop_scene(meshes: Sequence[TriangleMesh], parts: Sequence[str], seed: int, scene: int,
               attempts: int = 10) -> list:
    """Mesh -> table poses of a scene whose drop passes the checks above; ValueError naming
    the scene when ``attempts`` seeded drops all fail."""
    why = ''
    for attempt in range(attempts):
        poses, rest = simulate_drop(meshes, parts, item_rng(seed, 'drop', scene, attempt))
        depth, below, gaps = mesh_contacts(meshes, poses)
        if not rest:
            why = 'still moving'
        elif depth > PENETRATION or below > PENETRATION:
            why = f'meshes {1000 * max(depth, below):.1f} mm into each other or the table'
        elif max(gaps) > CONTACT:
            why = f'an object {1000 * max(gaps):.1f} mm from any support'
        elif max(np.hypot(*p[:2, 3]) for p in poses) > 0.4:
            why = 'an object off the table'
        else:
            return poses
    raise ValueError(f'scene {scene}: no drop of {attempts} passed the checks (last: {why})')


def depth_noise(z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Nguyen et al. (2012)'s axial Kinect noise added to the readings (z > 0) of ``z``."""
    sigma = 0.0012 + 0.0019 * (z - 0.4) ** 2
    return np.where(z > 0, np.maximum(z + sigma * rng.standard_normal(z.shape), 1e-3), 0.0)


def render_scene(root: str, scene: int, object_ids: Sequence[int],
                 poses: Sequence[np.ndarray], views: int = NUM_VIEWS,
                 cameras: Sequence[str] = ('realsense', 'kinect'),
                 image_size: tuple = (1280, 720), noise: str = 'none', seed: int = 0) -> None:
    """Depth, instance labels and RGB of every view of each camera, ray-cast from the objects'
    ``models/%03d/textured.sdf`` under ``root``, written with :func:`.scenes.write_scene`."""
    if noise not in DEPTH_NOISE:
        raise ValueError(f'depth noise {noise!r}: expected one of {DEPTH_NOISE}')
    fields = [FieldModel(os.path.join(root, 'models', f'{i:03d}', 'textured.sdf'))
              for i in object_ids]
    palette = item_rng(seed, 'palette').integers(60, 230, (len(object_ids) + 1, 3))
    for cam in cameras:
        K = camera_intrinsics(cam, image_size)
        cams = camera_poses(cam, views)
        depths, segs, rgbs = [], [], []
        for f, cam_wrt_table in enumerate(cams):
            z, seg, table = render(K, image_size, cam_wrt_table, poses,
                                   [m.half for m in fields], list(range(1, len(fields) + 1)),
                                   fields)
            z = np.where(z <= MAX_DEPTH, z, 0.0)
            if noise == 'kinect':
                z = depth_noise(z, item_rng(seed, 'depth-noise', scene, _CAMERA_CODE[cam], f))
            seg = np.where(table | (z == 0), 0, seg)
            shade = np.clip(1.25 - 0.5 * z, 0.3, 1.0)[..., None]
            colour = np.where(table[..., None], 170, palette[seg])
            rgbs.append(np.where(z[..., None] > 0, colour * shade, 0).astype(np.uint8))
            depths.append(z)
            segs.append(seg)
        write_scene(root, scene, object_ids, poses, cams, K, image_size, cam, depths, segs,
                    rgbs)


def make_scene(root: str, scene: int, object_ids: Sequence[int],
               meshes: Sequence[TriangleMesh], gripper: Gripper, settings: dict,
               stamp: dict) -> tuple:
    """One scene of ``tools/data/make_dataset.py`` (a process of its pool): the objects'
    convex parts, the drop, the rendered frames, the collision labels, then ``stamp`` as
    ``scenes/scene_%04d/make_dataset.json``, the mark that the scene is done. ``settings``:
    views, cameras, image_size, depth_noise, seed. Returns (objects, seconds)."""
    t0 = time.time()
    shutil.rmtree(os.path.join(root, 'graspness', f'scene_{scene:04d}'), ignore_errors=True)
    parts = [convex_parts(m, os.path.join(root, 'models', f'{i:03d}', 'collision_vhacd.obj'))
             for i, m in zip(object_ids, meshes)]
    poses = drop_scene(meshes, parts, settings['seed'], scene)
    render_scene(root, scene, object_ids, poses, settings['views'], settings['cameras'],
                 tuple(settings['image_size']), settings['depth_noise'], settings['seed'])
    write_collision_labels(root, scene, gripper, settings['cameras'][0])
    path = os.path.join(root, 'scenes', f'scene_{scene:04d}', 'make_dataset.json')
    with open(path + f'.tmp{os.getpid()}', 'w') as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
    os.replace(path + f'.tmp{os.getpid()}', path)
    return len(object_ids), time.time() - t0


def scene_objects(num_models: int, per_scene: int, seed: int, scene: int) -> list:
    """Positions (into the sorted model ids) of a scene's objects, drawn without replacement."""
    rng = item_rng(seed, 'scene-objects', scene)
    return sorted(rng.choice(num_models, size=min(per_scene, num_models), replace=False).tolist())


def scene_ids(train: int, test: int) -> list:
    """GraspNet-1Billion's ids: training scenes 0, 1, ... (at most 100), test scenes 100, 101,
    ... (at most 90)."""
    if not 0 <= train <= 100 or not 0 <= test <= 90:
        raise ValueError(f'{train} training and {test} test scenes: GraspNet-1Billion holds at '
                         'most 100 and 90')
    return list(range(train)) + list(range(100, 100 + test))


__all__ = ['NUM_VIEWS', 'camera_poses', 'camera_trajectory', 'convex_parts', 'depth_noise',
           'drop_scene', 'make_scene', 'mesh_contacts', 'render_scene', 'scene_ids',
           'scene_objects', 'simulate_drop']
