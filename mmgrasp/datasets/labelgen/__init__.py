"""Grasp and collision labels of one's own objects, computed from their meshes with the
evaluator's physics, and the scene folders that use them (GraspNet-1Billion's layout):
:mod:`.mesh` (meshes, surface samples, signed distances), :mod:`.object_labels` (the label
grids of one object), :mod:`.objects` (its model and label files), :mod:`.scenes` (scene
collision labels and the scene writer), :mod:`.intake` (meshes checked before any work),
:mod:`.scenegen` (cluttered scenes dropped by pybullet, filmed and written).

Modules import downwards only: mesh; object_labels -> synthetic.labels; objects -> mesh,
object_labels; scenes -> objects, synthetic.scene; intake -> mesh; scenegen -> mesh, scenes."""
from .mesh import TriangleMesh, label_points, mesh_signed_distance, read_mesh, write_mesh_ply
from .object_labels import object_grasp_labels
from .objects import LABEL_VOXEL, generate_object, model_points, write_model_files

__all__ = ['LABEL_VOXEL', 'TriangleMesh', 'generate_object', 'label_points',
           'mesh_signed_distance', 'model_points', 'object_grasp_labels', 'read_mesh',
           'write_mesh_ply', 'write_model_files']
