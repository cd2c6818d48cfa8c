"""InvalidLossHook: stop a training at the first non-finite loss, naming the batch."""
from typing import Dict, List, Optional

import torch
from mmengine.hooks import Hook

from mmgrasp.registry import HOOKS

#: Sample meta fields quoted for each frame of the failing batch (PackGraspInputs' meta keys).
FRAME_KEYS = ('epoch', 'sample_idx', 'scene', 'frame', 'camera')


class NonFiniteLossError(FloatingPointError):
    """A training iteration produced a non-finite loss or wrote a non-finite weight."""


@HOOKS.register_module()
class InvalidLossHook(Hook):
    """Raise :class:`NonFiniteLossError` at the first iteration whose loss terms are not all
    finite, or (``check_parameters``) after whose optimizer step a weight is not finite.

    Why: a NaN gradient is written into every weight by Adam, and the run then logs
    ``loss: nan`` until its end while saving checkpoints of NaN. mmdet's
    ``CheckInvalidLossHook`` asserts on the summed loss every 50 iterations and says nothing
    else; this one checks every iteration (one ``isfinite`` over the stacked log values; with
    ``check_parameters`` one more over the weights, which catches a finite loss whose gradient
    was not), and its message carries what is needed to replay the batch: the iteration
    (1-based, as logged), every loss term's value, and per frame of the batch its
    ``(epoch, sample_idx)`` (with scene, frame, camera), so that
    ``dataset[(epoch, sample_idx)]`` rebuilds the same frame bit for bit (every random draw of
    a sample comes from (seed, epoch, sample index)).

    Weights are checked, not gradients: under mixed precision a GradScaler legitimately sees
    inf gradients and skips the step, leaving the weights finite. Priority ``VERY_HIGH``: the
    hook runs before the logger and the checkpoint hook of the same iteration, so no
    checkpoint of a non-finite model is written.

    Args:
        interval: check every ``interval`` iterations (1: every one).
        check_parameters: also check that every weight is finite after the step.
    """

    priority = 'VERY_HIGH'

    def __init__(self, interval: int = 1, check_parameters: bool = True) -> None:
        if interval < 1:
            raise ValueError(f'InvalidLossHook: interval must be >= 1, got {interval}')
        self.interval = interval
        self.check_parameters = check_parameters

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs: Optional[Dict[str, torch.Tensor]] = None) -> None:
        if not outputs or not self.every_n_train_iters(runner, self.interval):
            return
        terms = {key: torch.as_tensor(value).detach().float().reshape(-1)
                 for key, value in outputs.items()}
        if bool(torch.isfinite(torch.cat(list(terms.values()))).all()):
            bad_weights = self._non_finite_weights(runner.model) if self.check_parameters else []
            if not bad_weights:
                return
            reason = (f'a non-finite weight after the optimizer step (the gradient was not '
                      f'finite): {", ".join(bad_weights[:5])}'
                      f'{f" and {len(bad_weights) - 5} more" if len(bad_weights) > 5 else ""}')
        else:
            reason = 'a non-finite loss'
        values = ', '.join(f'{key}={self._format(value)}' for key, value in terms.items())
        frames = self._frames(data_batch)
        raise NonFiniteLossError(
            f'InvalidLossHook: {reason} at iteration {runner.iter + 1} (epoch {runner.epoch}, '
            f'batch {batch_idx} of the epoch). Loss terms: {values}. Frames of the batch: '
            f'{frames}. Replay a frame with dataset[(epoch, sample_idx)].')

    @staticmethod
    def _format(value: torch.Tensor) -> str:
        text = ', '.join(f'{float(v):.6g}' for v in value)  # nan and inf print as such
        return text if len(value) == 1 else f'[{text}]'

    @staticmethod
    def _non_finite_weights(model: torch.nn.Module) -> List[str]:
        named = [(name, p) for name, p in model.named_parameters() if p.is_floating_point()]
        if not named:
            return []
        finite = torch.stack([torch.isfinite(p).all() for _, p in named])
        if bool(finite.all()):
            return []
        return [name for (name, _), ok in zip(named, finite.tolist()) if not ok]

    @staticmethod
    def _frames(data_batch) -> str:
        samples = data_batch.get('data_samples') if isinstance(data_batch, dict) else None
        if not samples:
            return 'unknown (the batch carries no data samples)'
        rows = []
        for sample in samples:
            meta = sample.metainfo if hasattr(sample, 'metainfo') else dict(sample)
            rows.append('(' + ', '.join(f'{key}={meta[key]}' for key in FRAME_KEYS
                                        if key in meta) + ')')
        return '; '.join(rows)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(interval={self.interval}, '
                f'check_parameters={self.check_parameters})')
