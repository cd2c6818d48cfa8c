"""docs/faq.md quotes the messages users see: each quoted error is produced here by the code
that raises it (or, where producing it needs a missing library, found in that code), so a
changed message fails this test instead of leaving the FAQ quoting an old one."""
import os
import re

import numpy as np
import pytest

from mmgrasp.apis.grasp_inferencer import check_intrinsics, read_depth
from mmgrasp.datasets.layouts import detect_layout
from mmgrasp.datasets.transforms.depth_image import implausible_depth
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quoted_lines() -> list:
    """The lines of the FAQ's ```text blocks (the quoted messages)."""
    with open(os.path.join(REPO, 'docs', 'faq.md'), encoding='utf-8') as f:
        blocks = re.findall(r'^```text\n(.*?)^```', f.read(), re.M | re.S)
    return [line for block in blocks for line in block.splitlines()]


def source(*parts: str) -> str:
    with open(os.path.join(REPO, *parts), encoding='utf-8') as f:
        return f.read()


def test_the_faq_quotes_the_messages_the_code_prints(tmp_path, monkeypatch):
    quoted = quoted_lines()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as missing:
        detect_layout('data/synthetic')
    assert f'mmgrasp.storage.source.DatasetFileError: {missing.value}' in quoted

    np.save('depth.npy', np.full((48, 64), 0.6, np.float32))
    with pytest.raises(TypeError) as metres:
        read_depth('depth.npy')
    assert str(metres.value) in quoted
    assert implausible_depth(1, 1000, 'depth.png') in quoted

    with pytest.raises(ValueError) as matrix:
        check_intrinsics(np.eye(3) * 2)
    prefix = str(matrix.value).split(' got ')[0]
    assert any(line.startswith(prefix + ' got ') for line in quoted), prefix

    demo = script_module('demo/grasp_demo.py')
    open('K.mat', 'wb').close()
    with pytest.raises(SystemExit) as mat:
        demo.read_intrinsics('K.mat')
    assert str(mat.value) in quoted

    # raised where a dataset or a library is missing: the quoted text is the code's
    graspness = next(line for line in quoted if 'graspness labels are generated' in line)
    assert 'file not found; GSNet graspness labels are generated ' in graspness and \
        'file not found; GSNet graspness labels are generated ' in \
        source('mmgrasp', 'datasets', 'graspnet_reader.py')
    open3d = next(line for line in quoted if 'need open3d' in line)
    assert open3d.startswith('signed distances of meshes need open3d: pip install ') and \
        "'mmgrasp[labels]' (or open3d-cpu), or use the numpy backend for " in open3d and \
        'signed distances of meshes need open3d: pip install ' in \
        source('mmgrasp', 'datasets', 'labelgen', 'mesh.py')


def test_the_check_catches_a_changed_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert implausible_depth(1, 100, 'depth.png') not in quoted_lines()  # another factor
    with pytest.raises(ValueError) as missing:
        detect_layout('data/other')
    assert f'mmgrasp.storage.source.DatasetFileError: {missing.value}' not in quoted_lines()
