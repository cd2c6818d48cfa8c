"""Small synthetic HGGD batches (mmgrasp/analysis/hggd_synthetic.py at 64×40) and an HGGD
sized for them."""
from mmgrasp.analysis.hggd_synthetic import make_batch  # noqa: F401  (the tests' batches)


def small_hggd(**overrides):
    """An HGGD for the small images: regions of 32 points, a 5-px width anchor (about 5 cm
    balls at 0.6 m), a few centres."""
    from mmgrasp.models.detectors import HGGD
    cfg = dict(train_centers=16, test_centers=8, group_points=32, min_points=4,
               anchor_width=5.0, heat_threshold=0.0, data_preprocessor=dict(
                   type='GraspDataPreprocessor'))
    cfg.update(overrides)
    return HGGD(**cfg)
