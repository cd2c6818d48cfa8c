"""arctan2 and arcsin through the C library: the C functions' values on every CPU (Python's
``math`` calls the same double-precision functions), in the dtype numpy would compute in."""
import math

import numpy as np
import pytest

from mmgrasp.geometry import libm


def samples(dtype):
    rng = np.random.default_rng(0)
    y, x = rng.uniform(-50, 50, (2, 2000)).astype(dtype)
    x[:3] = 0.0  # atan2's axes and signed zeros
    y[:2] = (0.0, -0.0)
    return y, x, rng.uniform(-1, 1, 2000).astype(dtype)


def test_float64_values_are_the_c_librarys():
    y, x, s = samples(np.float64)
    out = libm.arctan2(y, x)
    assert out.dtype == np.float64 and out.shape == y.shape
    assert out.tolist() == [math.atan2(a, b) for a, b in zip(y.tolist(), x.tolist())]
    assert libm.arcsin(s).tolist() == [math.asin(v) for v in s.tolist()]


def test_float32_stays_float32_and_rounds_as_atan2f():
    """atan2f and asinf work in single precision: within 1 ulp of the double result rounded,
    which they may differ from (glibc's float functions are not that rounding)."""
    y, x, s = samples(np.float32)
    for out, double in ((libm.arctan2(y, x), np.arctan2(y.astype(float), x.astype(float))),
                        (libm.arcsin(s), np.arcsin(s.astype(float)))):
        assert out.dtype == np.float32
        rounded = double.astype(np.float32)
        assert np.all(np.abs(out - rounded) <= np.spacing(np.abs(rounded))), \
            np.abs(out - rounded).max()


def test_mixed_dtypes_compute_in_float64_and_keep_shapes():
    out = libm.arctan2(np.ones((2, 3), np.float32), np.full((2, 3), 2.0))
    assert out.dtype == np.float64 and out.shape == (2, 3)
    assert out[0, 0] == math.atan2(1.0, 2.0)
    with pytest.warns(RuntimeWarning, match='invalid value'):  # as np.arcsin warns
        assert np.isnan(libm.arcsin(np.array([np.nan, 2.0]))).all()


def test_complex_input_is_refused():
    with pytest.raises(TypeError, match='arctan2: float32 or float64'):
        libm.arctan2(np.ones(2, complex), np.ones(2))
