"""DevicePrefetcher: the next batch's inputs travel to the GPU while the current one trains."""
from typing import Iterable, Iterator, Optional

import torch
from mmengine.logging import print_log


class DevicePrefetcher:
    """Wrap a data loader so that, on CUDA, batch k+1's ``inputs`` tensors are copied to the
    device on a side stream while batch k is being trained on (timm's ``PrefetchLoader``, with
    its stream-per-epoch leak, timm#2781, fixed).

    Lifetimes: ONE side stream, created here and reused by every epoch. Before each copy the
    side stream waits for the work queued so far on the compute stream, and every copied tensor
    is marked as used by the compute stream (``record_stream``), so the caching allocator does
    not give memory that batch k-1 released to a later copy while a kernel may still read it;
    the compute stream waits for the copy before the batch is handed out. Sources are pinned
    (a no-op for tensors the loader's ``pin_memory=True`` already pinned). Label tensors inside
    the data samples stay for GraspDataPreprocessor, which moves them in a few stacked
    transfers and skips the inputs already on the device.

    ``data_time`` (IterTimerHook) then measures the wait for this iterator: the loader's
    ``next()`` plus queueing the copy, not the copy itself.

    On the CPU the wrapper is a pass-through and says so once in the log.
    """

    def __init__(self, loader: Iterable, device: Optional[torch.device] = None):
        self.loader = loader
        self.stream = None
        if torch.cuda.is_available():
            self.device = device or torch.device('cuda', torch.cuda.current_device())
            self.stream = torch.cuda.Stream(self.device)
        else:
            print_log('DevicePrefetcher: no CUDA device, batches are not prefetched (the data '
                      'preprocessor moves them)', logger='current')

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator:
        if self.stream is None:
            yield from self.loader
            return
        compute = torch.cuda.current_stream(self.device)
        ready = None
        for batch in self.loader:
            self.stream.wait_stream(compute)
            with torch.cuda.stream(self.stream):
                inputs = {key: [t.pin_memory().to(self.device, non_blocking=True) for t in values]
                          for key, values in batch['inputs'].items()}
            for values in inputs.values():
                for tensor in values:
                    tensor.record_stream(compute)
            if ready is not None:
                yield ready
            compute.wait_stream(self.stream)
            ready = {**batch, 'inputs': inputs}
        if ready is not None:
            yield ready
