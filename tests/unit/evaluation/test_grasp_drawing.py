"""draw_scene keeps its legends off the scene: the score bar and a named legend sit in a strip
to the right of the image, so a grasp drawn where the legend used to be (the image's right
edge) keeps every pixel of its outline, and the image area changes only along the grippers."""
import cv2
import numpy as np
import pytest

from mmgrasp.evaluation.grasp_drawing import (draw_scene, gripper_outlines, legend_strip,
                                              project)

K = np.array([[231.8, 0, 160.0], [0, 231.8, 90.0], [0, 0, 1]])


def edge_grasps() -> np.ndarray:
    """Four grippers at 0.5 m approaching along the optical axis, at the right edge of a
    320 x 180 image (u 270-300), from the top to the bottom, where the old legend panel was."""
    rows = np.zeros((4, 17))
    rows[:, 0] = [0.2, 0.4, 0.6, 0.9]
    rows[:, 1:4] = [0.05, 0.02, 0.02]
    rows[:, 4:13] = np.array([[0, 0, -1], [0, 1, 0], [1, 0, 0]]).ravel()  # x axis = camera z
    rows[:, 13:16] = [[0.26, v, 0.5] for v in (-0.15, -0.05, 0.05, 0.15)]
    rows[:, 16] = -1
    return rows


def _read(path):
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB).astype(int)


@pytest.mark.parametrize('named', [False, True])
def test_the_legend_covers_no_grasp(tmp_path, named):
    image = np.full((180, 320, 3), 0.5)
    grasps = edge_grasps()
    uv = project(gripper_outlines(grasps), K)
    assert (uv[:, :4, 0] > 0.8 * 320).all() and (uv[:, :4, 0] < 319).all()  # in the image
    colours = dict(grasp_colours=np.eye(3)[[0, 1, 2, 0]],
                   legend=[('force closure (2)', (1, 0, 0)), ('collision (1)', (0, 1, 0)),
                           ('wrong object (1)', (0, 0, 1))]) if named else {}
    draw_scene(image, str(tmp_path / 'plain.png'))
    draw_scene(image, str(tmp_path / 'grasps.png'), K, grasps, **colours)
    plain, picture = _read(tmp_path / 'plain.png'), _read(tmp_path / 'grasps.png')
    strip = legend_strip(not named, False, named)
    assert picture.shape == (180, 320 + strip, 3) and plain.shape == (180, 320, 3)
    assert ((picture[:, 320:] < 200).any(-1)).sum() > 50  # the legend, in the strip
    changed = np.abs(picture[:, :320] - plain).max(-1) > 40
    near = np.zeros_like(changed)
    for outline in uv:
        # every pixel along the U of each gripper is drawn (nothing lies over it)
        for a, b in zip(outline[:3], outline[1:4]):
            for t in np.linspace(0, 1, 20):
                u, v = np.round(a + t * (b - a)).astype(int)
                assert changed[v - 1:v + 2, u - 1:u + 2].any(), (u, v)
        lo = np.floor(outline.min(0)).astype(int) - 2
        hi = np.ceil(outline.max(0)).astype(int) + 3
        near[max(lo[1], 0):hi[1], max(lo[0], 0):hi[0]] = True
    assert not (changed & ~near).any()  # the image area changes only along the grippers
