"""The model files of the dataset layouts, parsed as the reference APIs read them: GraspNet's
annotation XML (object id and pose per object) and PLY vertices (open3d's values).

The evaluation reads them for its scene models and the label assets for posed model points
(HGGD's centre refinement), so they sit in the datasets layer, below both.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import List, Optional

import numpy as np
from plyfile import PlyData, PlyParseError

from mmgrasp.geometry import quaternion_to_graspnet_pose


def read_annotation(path: str) -> List[tuple]:
    """[(object id, float32 4x4 pose model -> camera)] of an annotation XML, in file order."""
    try:
        root = ET.parse(path).getroot()
        out = []
        for obj in root:
            fields = list(obj)
            obj_id = int(fields[0].text)
            translation = [float(v) for v in fields[3].text.split()]
            quaternion = [float(v) for v in fields[4].text.split()]
            if len(translation) != 3 or len(quaternion) != 4:
                raise ValueError(f'object {obj_id}: translation needs 3 numbers and '
                                 'quaternion 4 (w x y z)')
            out.append((obj_id, quaternion_to_graspnet_pose(translation, quaternion)))
    except (ET.ParseError, IndexError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f'{path}: not a GraspNet annotation ({err})') from None
    return out


def _ascii_vertices(path: str) -> Optional[np.ndarray]:
    """(N, 3) float64 vertices of an ASCII PLY, each value parsed as a double from its text as
    open3d's reader (rply's ``strtod``) does, for any property type; None for a binary PLY.

    graspnetAPI reads the models with open3d: a float32 round trip would move points that lie on
    an 8 mm voxel boundary (round-sized models have many) into the next voxel. The body is read as
    whitespace-separated tokens in element order, as rply reads it, so line breaks do not matter.
    """
    with open(path, 'rb') as f:
        if f.readline().strip() != b'ply':
            raise ValueError('no "ply" magic line')
        fmt = f.readline().split()
        if fmt[:1] != [b'format']:
            raise ValueError('no format line')
        if fmt[1:2] != [b'ascii']:
            return None
        elements = []  # [name, count, [is_list per property], [property names]]
        for raw in f:
            words = raw.split()
            if not words or words[0] in (b'comment', b'obj_info'):
                continue
            if words[0] == b'end_header':
                break
            if words[0] == b'element':
                elements.append([words[1], int(words[2]), [], []])
            elif words[0] == b'property' and elements:
                elements[-1][2].append(words[1] == b'list')
                elements[-1][3].append(words[-1].decode())
        else:
            raise ValueError('no end_header')
        tokens = f.read().split()
    pos = 0
    for name, count, lists, props in elements:
        if name == b'vertex':
            if not {'x', 'y', 'z'} <= set(props):
                raise ValueError(f'vertex properties {props} lack x, y or z')
            if any(lists):
                rows, pos = _ascii_rows(tokens, pos, count, lists)
            else:
                rows = tokens[pos:pos + count * len(props)]
                if len(rows) != count * len(props):
                    raise ValueError(f'{count} vertices announced, the file ends before')
                rows = [rows[i::len(props)] for i in range(len(props))]
            return np.array([rows[props.index(a)] for a in 'xyz'], dtype=np.float64).T.copy()
        pos = _ascii_rows(tokens, pos, count, lists)[1] if any(lists) else \
            pos + count * len(props)
    raise KeyError('vertex')


def _ascii_rows(tokens: list, pos: int, count: int, lists: List[bool]) -> tuple:
    """Columns (one token list per property; a list property keeps its first item) of ``count``
    rows of an element with list properties, starting at token ``pos``; and the next position."""
    columns: List[list] = [[] for _ in lists]
    try:
        for _ in range(count):
            for column, is_list in zip(columns, lists):
                if is_list:
                    n = int(tokens[pos])
                    column.append(tokens[pos + 1] if n else b'nan')
                    pos += 1 + n
                else:
                    column.append(tokens[pos])
                    pos += 1
    except IndexError:
        raise ValueError(f'{count} rows announced, the file ends before') from None
    if pos > len(tokens):
        raise ValueError(f'{count} rows announced, the file ends before')
    return columns, pos


def read_ply_points(path: str) -> np.ndarray:
    """(N, 3) float64 vertex positions of a PLY file (faces, if any, are ignored), the values
    graspnetAPI's open3d reader gives: ASCII values parsed as doubles, binary ``float`` values
    exactly (float32 widened)."""
    try:
        ascii_points = _ascii_vertices(path)
        if ascii_points is not None:
            return ascii_points
        vertex = PlyData.read(path)['vertex']
        return np.stack([np.asarray(vertex[a], dtype=np.float64) for a in 'xyz'], axis=1)
    except (KeyError, ValueError, OSError, IndexError, PlyParseError) as err:
        raise ValueError(f'{path}: cannot read PLY vertices ({err})') from None
