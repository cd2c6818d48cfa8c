"""``arctan2`` and ``arcsin`` through the C library on every CPU.

numpy's float32 and float64 ``arctan2`` and ``arcsin`` call SVML on CPUs with AVX-512 and the C
library (glibc's libm) elsewhere, and the two round differently (on an AVX-512 AMD EPYC: 8 % of
random float64 values, 40 % of float32 ``arctan2`` values). The reference scripts whose arrays
mmgrasp reproduces bit for bit (HGGD's ``convert_grasp.py``) ran where numpy called the C
library, so these functions call it on every CPU: the labels then do not depend on the SIMD
code path numpy picks for the machine. They are element-wise Python calls (about 0.5 µs a
value), for label building, not for hot loops.
"""
from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

__all__ = ['arctan2', 'arcsin']


def _open_libm() -> ctypes.CDLL:
    """glibc's libm by its soname; elsewhere wherever ``find_library`` finds it (which starts
    a subprocess, so it is not the first try)."""
    try:
        return ctypes.CDLL('libm.so.6')
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library('m'))


_LIBM = _open_libm()


def _libm_function(name: str, ctype, arity: int):
    function = getattr(_LIBM, name)
    function.restype = ctype
    function.argtypes = [ctype] * arity
    return np.frompyfunc(function, arity, 1)


_FUNCTIONS = {
    ('arctan2', np.float32): _libm_function('atan2f', ctypes.c_float, 2),
    ('arctan2', np.float64): _libm_function('atan2', ctypes.c_double, 2),
    ('arcsin', np.float32): _libm_function('asinf', ctypes.c_float, 1),
    ('arcsin', np.float64): _libm_function('asin', ctypes.c_double, 1),
}


def _call(name: str, *args) -> np.ndarray:
    """numpy's ``name`` as the C library computes it, element-wise, in the dtype numpy's ufunc
    would compute in (float32 only when every argument is float32)."""
    args = [np.asarray(a) for a in args]
    dtype = np.result_type(*args, np.float32)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f'{name}: float32 or float64 arguments expected, got {dtype}')
    out = _FUNCTIONS[name, dtype.type](*(a.astype(dtype, copy=False) for a in args))
    return np.asarray(out, dtype=dtype)


def arctan2(y, x) -> np.ndarray:
    """``np.arctan2(y, x)`` as the C library's ``atan2f`` / ``atan2`` computes it."""
    return _call('arctan2', y, x)


def arcsin(x) -> np.ndarray:
    """``np.arcsin(x)`` as the C library's ``asinf`` / ``asin`` computes it."""
    return _call('arcsin', x)
