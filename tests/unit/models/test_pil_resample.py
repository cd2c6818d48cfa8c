"""The torch bicubic resize against Pillow itself: equal bit for bit, mode 'F' (float32 depth in
mm) and 'RGB', at HGGD's size (1280 x 720 -> 640 x 360) and at others; mutants of Pillow's
rules (kernel, normalisation, fixed point, pass order) must differ."""
import numpy as np
import pytest
import torch
from PIL import Image

from mmgrasp.models.utils import pil_resample
from mmgrasp.models.utils.pil_resample import resize_float, resize_uint8

pytestmark = pytest.mark.usefixtures('torch_one_thread')


def depth_image(rng, height, width):
    """Millimetres with holes (zeros), steps and noise: a depth frame's kinds of edges."""
    v, u = np.mgrid[0:height, 0:width]
    depth = 600. + 300. * v / height + rng.integers(-2, 3, (height, width))
    depth[rng.random((height, width)) < 0.05] = 0
    depth[height // 3:height // 2, width // 4:width // 2] = 450.
    return depth.astype(np.float32)


def colour_image(rng, height, width):
    return rng.integers(0, 256, (height, width, 3)).astype(np.uint8)


def pil_float(image, size):
    return np.array(Image.fromarray(image).resize(size), np.float32)


def pil_rgb(image, size):
    return np.array(Image.fromarray(image).resize(size))


def torch_rgb(image, size):
    return resize_uint8(torch.from_numpy(image).permute(2, 0, 1), size).permute(1, 2, 0).numpy()


@pytest.mark.parametrize('shape, size', [((720, 1280), (640, 360)),  # HGGD: 2x, even windows
                                         ((180, 320), (160, 90)),
                                         ((301, 500), (200, 117)),  # other ratios: gathered
                                         ((40, 50), (73, 61))])  # upsampling
def test_equals_pillow(shape, size):
    rng = np.random.default_rng(sum(shape))
    depth, rgb = depth_image(rng, *shape), colour_image(rng, *shape)
    np.testing.assert_array_equal(resize_float(torch.from_numpy(depth), size).numpy(),
                                  pil_float(depth, size))
    np.testing.assert_array_equal(torch_rgb(rgb, size), pil_rgb(rgb, size))


def test_batched_equals_one_by_one():
    rng = np.random.default_rng(1)
    depth = np.stack([depth_image(rng, 90, 160) for _ in range(3)])
    batch = resize_float(torch.from_numpy(depth), (80, 45)).numpy()
    for image, out in zip(depth, batch):
        np.testing.assert_array_equal(out, pil_float(image, (80, 45)))


def test_rejects_other_dtypes():
    with pytest.raises(TypeError, match='float32'):
        resize_float(torch.zeros(4, 4, dtype=torch.float64), (2, 2))
    with pytest.raises(TypeError, match='uint8'):
        resize_uint8(torch.zeros(4, 4, dtype=torch.int32), (2, 2))


def _clear_caches():
    pil_resample.bicubic_coefficients.cache_clear()
    pil_resample.resample_plan.cache_clear()


@pytest.fixture
def mutate(monkeypatch):
    """Patch a rule of the module for one test, with the coefficient caches cleared around."""
    _clear_caches()
    yield lambda name, value: monkeypatch.setattr(pil_resample, name, value)
    monkeypatch.undo()
    _clear_caches()


def _differs(size=(640, 360)):
    rng = np.random.default_rng(2)
    depth, rgb = depth_image(rng, 720, 1280)[:200], colour_image(rng, 720, 1280)[:200]
    size = (size[0], 100)
    return (not np.array_equal(resize_float(torch.from_numpy(depth), size).numpy(),
                               pil_float(depth, size)),
            not np.array_equal(torch_rgb(rgb, size), pil_rgb(rgb, size)))


def test_mutant_kernel(mutate):
    """a = -0.75 (OpenCV's cubic) instead of Pillow's -0.5."""
    def cubic(x, a=-0.75):
        x = abs(x)
        if x < 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return (((x - 5) * x + 8) * x - 4) * a if x < 2 else 0.
    mutate('bicubic', cubic)
    assert _differs() == (True, True)


def test_mutant_support_not_scaled(mutate):
    """The kernel not stretched when downsampling (support 2 input pixels, not 4)."""
    mutate('BICUBIC_SUPPORT', 1.0)
    assert _differs() == (True, True)


def test_mutant_float_colour(mutate):
    """Colour resized in floating point and rounded per pass, not in Pillow's 22-bit fixed
    point (coefficients rounded half away from zero, sums rounded by the 2^21 bias)."""
    def float_pass(x, size):
        out = pil_resample._resample_float(x.float(), size)
        return torch.round(out).clamp(0, 255).to(torch.uint8)
    mutate('_resample_uint8', float_pass)
    assert _differs()[1]


def test_mutant_vertical_first(monkeypatch):
    """The vertical pass first: the float32 intermediate rounds differently."""
    def vertical_first(image, size):
        tall = pil_resample._resample_float(image.transpose(-1, -2), size[1]).transpose(-1, -2)
        return pil_resample._resample_float(tall, size[0])
    monkeypatch.setattr(pil_resample, 'resize_float', vertical_first)
    rng = np.random.default_rng(3)
    depth = depth_image(rng, 720, 1280)
    assert not np.array_equal(pil_resample.resize_float(torch.from_numpy(depth), (640, 360))
                              .numpy(), pil_float(depth, (640, 360)))
