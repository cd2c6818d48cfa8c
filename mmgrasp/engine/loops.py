"""An epoch-based train loop that resumes mid-epoch without re-loading the consumed batches."""
from mmengine.runner import EpochBasedTrainLoop
from torch import nn

from mmgrasp.registry import LOOPS
from .prefetcher import DevicePrefetcher


@LOOPS.register_module()
class GraspEpochBasedTrainLoop(EpochBasedTrainLoop):
    """mmengine's EpochBasedTrainLoop (same arguments) that continues an epoch where a
    checkpoint saved by iteration (``CheckpointHook(by_epoch=False)``) left it.

    mmengine's loop restarts such an epoch at batch 0 while its iteration counter keeps going:
    batches are seen twice, the epoch runs long and the per-epoch LR steps land late. Here the
    batches the interrupted run finished in its last epoch,
    ``consumed = iter - epoch * len(dataloader)``, are skipped by the sampler
    (``set_start(consumed * batch_size)``: the sampler and batch size are per rank) before the
    loader asks for an index, so they are never loaded; the epoch then yields exactly the
    batches, with the same ``batch_idx``, that the uninterrupted run drew, and ends after
    ``len(dataloader)`` batches in all. ``runner.iter``, ``runner.epoch`` and the by-epoch
    schedulers (restored by the Runner, stepped at epoch ends) follow.

    Mid-epoch resume needs a sampler with ``set_start`` (:class:`EpochAwareSampler`) and no
    ``batch_sampler``; with another one it raises rather than replay or repeat batches: resume
    from an epoch checkpoint instead. Resuming at an epoch boundary works with any sampler.

    The sampler's epoch is set by the loop before each epoch (not only by DistSamplerSeedHook),
    and its shuffle seed is set to ``runner.seed``: after a resume that is the checkpoint's
    seed, whereas the sampler was built before the checkpoint was read (with
    ``randomness.seed=None`` it would otherwise shuffle with a fresh seed). Not under
    ``diff_rank_seed``, where the sampler draws its own seed. Global RNG streams (python,
    numpy, torch: dropout, random ops in a model) are not saved by mmengine and not restored.

    Batches come through a :class:`DevicePrefetcher` (one for the loop's life): on CUDA the next
    batch's inputs are copied to the device while the current one trains.
    """

    _start_batch = 0  # first batch of the next epoch run

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prefetcher = DevicePrefetcher(self.dataloader)

    def run(self) -> nn.Module:
        self._sync_sampler_seed()
        self._start_batch = self._batches_consumed()
        return super().run()

    def run_epoch(self) -> None:
        """Iterate one epoch, from batch ``_start_batch`` when resumed mid-epoch."""
        start, self._start_batch = self._start_batch, 0
        sampler = self.dataloader.sampler
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(self._epoch)
        if start:
            sampler.set_start(min(start * self.dataloader.batch_size, sampler.num_samples))
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        for idx, data_batch in enumerate(self.prefetcher, start):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1

    def _sync_sampler_seed(self) -> None:
        sampler = self.dataloader.sampler
        if (self.runner._randomness_cfg.get('diff_rank_seed', False)
                or getattr(sampler, 'seed', None) in (None, self.runner.seed)):
            return
        self.runner.logger.info(f'train sampler seed {sampler.seed} -> {self.runner.seed} '
                                f'(the run\'s seed)')
        sampler.seed = self.runner.seed

    def _batches_consumed(self) -> int:
        """Batches of the current epoch finished before this run started (0 unless resumed
        from a checkpoint saved mid-epoch)."""
        per_epoch = len(self.dataloader)
        consumed = self._iter - self._epoch * per_epoch
        if consumed == 0:
            return 0
        if not 0 < consumed <= per_epoch:
            raise RuntimeError(
                f'{type(self).__name__}: the checkpoint is at iteration {self._iter} of epoch '
                f'{self._epoch}, which a run of {per_epoch} batches per epoch never reaches; was '
                f'it written with another dataset, batch size or number of processes?')
        if not hasattr(self.dataloader.sampler, 'set_start') or not self.dataloader.batch_size:
            raise RuntimeError(
                f'{type(self).__name__}: resuming mid-epoch ({consumed} of {per_epoch} batches '
                f'of epoch {self._epoch} done) needs a sampler that can skip them without '
                f'loading them (EpochAwareSampler) and no batch_sampler; got '
                f'{type(self.dataloader.sampler).__name__}. Use EpochAwareSampler, or resume '
                f'from a checkpoint saved at the end of an epoch')
        self.runner.logger.info(f'resuming epoch {self._epoch} at batch {consumed} of '
                                f'{per_epoch}: skipping {consumed} batches without loading them')
        return consumed
