"""A sampler whose indices carry the epoch, so a sample's random stream is (seed, epoch, index)."""
from typing import Iterator, List, Optional, Sized, Tuple

from mmengine.dataset import DefaultSampler

from mmgrasp.registry import DATA_SAMPLERS


@DATA_SAMPLERS.register_module()
class EpochAwareSampler(DefaultSampler):
    """mmengine's DefaultSampler (shuffle seeded ``seed + epoch``, ``round_up``, rank sharding,
    ``set_epoch``) yielding ``(epoch, index)`` pairs for :class:`GraspNetDataset`.

    Worker seeding then plays no part in what a sample looks like: it is the same with any number
    of workers, persistent or not, and after a resume.

    ``skip`` (set with :meth:`set_start`) drops the first ``skip`` indices of this rank's next
    epoch without loading them, for resuming mid-epoch; the next ``__iter__`` consumes it, and
    ``__len__`` counts what that iteration will yield — so between ``set_start`` and the first
    batch, ``len(dataloader)`` is the shortened length (GraspEpochBasedTrainLoop reads the full
    length before it calls ``set_start``).

    Args:
        dataset: the dataset.
        shuffle: shuffle each epoch.
        seed: shuffling seed, identical on every rank; None draws one and broadcasts it from
            rank 0 (``sync_random_seed``).
        round_up: pad with repeated indices so every rank gets the same count.
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: Optional[int] = None,
                 round_up: bool = True) -> None:
        super().__init__(dataset, shuffle=shuffle, seed=seed, round_up=round_up)
        self.skip = 0

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of this rank in the next epoch iterated
        (samples already consumed: finished batches x batch size per rank)."""
        if not 0 <= start <= self.num_samples:
            raise ValueError(f'start={start} outside 0..{self.num_samples} (samples per rank)')
        self.skip = int(start)

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        indices: List[int] = list(super().__iter__())[self.skip:]
        self.skip = 0
        return iter([(self.epoch, index) for index in indices])

    def __len__(self) -> int:
        return self.num_samples - self.skip
