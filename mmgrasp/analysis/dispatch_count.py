"""The launch counter: kernel launches, host syncs and live bytes of one training iteration and
one inference pass of a config, per model part, counted on the CPU with ``torch.profiler``.

``tools/analysis/benchmark_dispatch.py`` is its command line; tests count the ops of a piece of
model code with :func:`count_events` on ``prof.events()``. It sits above ``models`` (it
builds a config's model, loader and optimizer wrapper and profiles them): nothing in the
package below it imports it.

:func:`profile_path` runs one batch of the config's training loader (its real batch size and
cloud) through the config's model and optimizer wrapper as ``BaseModel.train_step`` runs it
(after one unmeasured warm-up iteration and one timed one), then through ``predict`` under
``no_grad``. Each is recorded with ``torch.profiler`` and every recorded op is charged to a
part: the detector's own parts (``PartTimer`` ranges: backbone, seed_selection, view,
assigner, grouper, head, losses), the ranges opened around them (preprocess, losses —
``parse_losses`` —, backward, optimizer: :func:`stage`) and ``other`` for forward ops outside
every part.

Two code paths, each in its own process (Triton's interpreter must be chosen before import:
:func:`child_env`, :func:`child_flags`):

- ``cuda_path``: what a CUDA device runs, on the CUDA device where there is one. On the CPU
  every point op takes its CUDA branch: it opens the ``kernel_scope`` its Triton kernel runs
  in, and inside it runs the op's torch reference in the kernel's place
  (:class:`ScopedReferences`). The scope fixes what is charged (one launch; ops recorded
  inside are ignored, their syncs are not: the references make none), and the references
  return what the kernels return (tests/unit/models/test_point_kernels.py), so the rest of the
  iteration runs on the same values. Running the kernels themselves under Triton's
  interpreter (``--interpret``: ``TRITON_INTERPRET=1``, ``model.point_ops='triton'``) gives
  the same counts but costs about 1.3 s a sampling step at paper size (four frames of 15 000
  points), half an hour for GSNet's 1 024 seeds: use it at demo sizes. The sparse U-Net runs
  the config's backend: by default the torch one, with the chunked im2col it runs on CUDA
  (:func:`path_config` sets ``model.backbone.conv_algorithm='chunked_im2col'``; the CPU default is the
  ``pairs`` algorithm, see :mod:`mmgrasp.ops.sparse_conv`);
  ``--cfg-options model.backbone.backend=spconv`` counts spconv's, on CUDA only (spconv's CPU
  wheel cannot train, and its kernels are no ``aten::`` ops: the real kernel count has them).
- ``torch_reference``: the CPU reference (``model.point_ops='torch'``: no Triton; the sparse
  U-Net's ``backend='torch'`` whatever the config says, with its CPU algorithm), on the CPU.

The choices are the config's keys (``model.point_ops``, ``model.backbone.conv_algorithm``),
set by :func:`path_config`, so each path's process builds the model as a user's config would.

What counts (the same on both paths):

- A **launch** is an ``aten::`` op that reaches a kernel: an op counts as the launches of the
  ``aten::`` ops it calls, or as one launch when none of those launches. Ops that only make
  views or metadata, allocate (``empty*``), or are no-op conversions (``to``, ``contiguous``
  without a copy) launch nothing (``NO_LAUNCH``).
- A region opened by ``kernel_scope(name, n)`` (``mmgrasp/ops/kernel_scope.py``) is
  charged ``n`` launches for its kernels, plus one for each copy or fill recorded inside it
  (``COPY_ROOTS``: a ``.contiguous()`` of a strided input, an upload, a memset), outside the
  stand-in range (``STANDIN_PREFIX``) that :class:`ScopedReferences` opens around the torch
  reference it runs in a kernel's place; every other op inside is ignored. That is how a
  CUDA-only kernel (Triton, spconv), whose CPU stand-in records other ops or none, is counted
  on the CPU. The stand-ins make their inputs contiguous first, as the kernels' wrappers do.
- A multi-tensor op (``_foreach_*``, ``_fused_*``: Adam with ``foreach`` or ``fused``) runs
  on CUDA as ``multi_tensor_apply`` kernels and on the CPU as one op per tensor. It is
  charged the launches of torch's chunking (:func:`multi_tensor_launches`: chunks of 65 536
  elements, a launch whenever a list's tensors or blocks fill up, with the limits of CUDA
  12.1's 32 KiB kernel arguments), over the optimiser's parameter sizes for ``_fused_*`` ops
  (depth 4: parameters, gradients, two moments) and over the list's tensors for
  ``_foreach_*`` ops (depth 1 in place, as the step counters' ``_foreach_add_`` and a clip by
  value's ``_foreach_clamp_min_`` / ``_foreach_clamp_max_``; else 2), their sizes read from
  the CPU implementation's per-tensor ops (with ``record_shapes=True``; one-element tensors
  without). Its inner ops (their syncs too: the CPU implementation's reads of each step
  count) are ignored.
- A **host sync** is an op whose result the host must wait for (``SYNCS``): ``nonzero``,
  ``unique``, ``item``/``bool()``/``int()`` (``_local_scalar_dense``), ``masked_select``,
  ``bincount``, ``equal``, and ``repeat_interleave`` without ``output_size``; an op inside a
  sync op is not counted again. Reads of a tensor's data by the host, ``.tolist()`` and
  ``.numpy()``, count as one sync each: outside any op they record the pair ``resolve_conj``,
  ``resolve_neg`` (a CPU tensor read on the CUDA path would be counted too, so the count errs
  high). Syncs inside a kernel scope are still counted. A bare ``.cpu()`` records only a
  ``to`` that a no-op records too, so the CPU count misses it; on CUDA the profiler's own
  synchronising runtime calls are reported next to the count (``cuda_syncs``).

On CUDA, ``cuda_path`` also reports the profiler's real figures: ``kernels`` (device kernels,
memcpys and memsets; :func:`kernel_excess` compares them with the prediction), and per part
``cuda_launches`` (CUDA runtime launch and copy calls), ``cuda_syncs`` and ``ms`` (the part's
wall time; the device is synchronised around each part).
"""
import copy
import math
import os
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional

#: Ops that launch no kernel of their own (views, metadata, allocation, no-op conversions).
NO_LAUNCH = frozenset('aten::' + name for name in (
    'view', '_unsafe_view', 'reshape', '_reshape_alias', 'view_as', 'as_strided', 'as_strided_',
    'slice', 'select', 'narrow', 'transpose', 't', 'permute', 'expand', 'expand_as',
    'unsqueeze', 'squeeze', 'unsqueeze_', 'squeeze_', 'flatten', 'unflatten', 'movedim', 'unbind', 'split',
    'split_with_sizes', 'chunk', 'diagonal', 'alias', 'detach', 'detach_', 'lift_fresh',
    'resolve_conj', 'resolve_neg', 'contiguous', 'to', '_to_copy', 'clone', 'empty',
    'empty_strided', 'empty_like', 'new_empty', 'new_empty_strided', 'resize_', 'set_',
    'result_type', 'size', 'stride', 'numel', 'dim', 'is_same_size', 'requires_grad_',
    'broadcast_tensors', 'is_nonzero', 'item', '_local_scalar_dense', '_assert_async',
    'retain_grad', 'lift', '_has_compatible_shallow_copy_type', 'real', 'conj',
    # a query of the build (convolution's algorithm choice, on every device): no kernel
    '_nnpack_available'))
#: Ops whose result the host waits for (the outermost is counted).
SYNCS = frozenset('aten::' + name for name in (
    'nonzero', '_unique', '_unique2', 'unique_dim', 'unique_consecutive',
    'unique_dim_consecutive', '_local_scalar_dense', 'masked_select', 'bincount', 'equal'))
#: CUDA runtime calls that launch device work / that block the host until the device is done.
CUDA_LAUNCH_CALLS = ('cudaLaunchKernel', 'cuLaunchKernel', 'cudaLaunchKernelExC',
                     'cuLaunchKernelEx', 'cudaMemcpyAsync', 'cudaMemsetAsync',
                     'cudaLaunchCooperativeKernel')
CUDA_SYNC_CALLS = ('cudaStreamSynchronize', 'cudaDeviceSynchronize', 'cudaEventSynchronize',
                   'cudaMemcpy', 'cudaStreamWaitEvent')
#: Multi-tensor ops (foreach / fused optimizers), charged by :func:`multi_tensor_launches`.
MULTI_TENSOR = ('aten::_foreach_', 'aten::_fused_')
#: torch's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh): elements a block, and
#: per list depth 1..5 the tensors and blocks of one launch (32 KiB kernel arguments: CUDA
#: >= 12.1, driver >= 530, sm >= 70; older setups have 1/7 of them).
MULTI_TENSOR_CHUNK = 65536
MULTI_TENSOR_MAX_TENSORS = (770, 448, 336, 252, 210)
MULTI_TENSOR_MAX_BLOCKS = 2240
#: Ops that a kernel's wrapper calls to copy, upload or fill (``COPY_ROOTS``), charged one
#: launch inside a kernel scope when they record a copy or memset (``COPY_OPS``): a
#: ``.contiguous()`` of a contiguous tensor records none. Only outermost ops count: the CPU's
#: own copies inside other ops (a scalar operand's, a reduction's fill) have none on CUDA.
COPY_ROOTS = frozenset('aten::' + name for name in (
    'contiguous', 'clone', 'to', '_to_copy', 'copy_', 'zeros', 'zeros_like', 'new_zeros',
    'zero_', 'fill_', 'full', 'full_like', 'new_full', 'lift_fresh'))
COPY_OPS = frozenset(('aten::copy_', 'aten::fill_', 'aten::zero_'))
#: The range a stand-in for a kernel runs in (ScopedReferences): its ops are the kernel's.
STANDIN_PREFIX = 'mmgrasp.standin::'
#: The profiler may count this much more device work than the counter predicts (device_check).
KERNEL_TOLERANCE = 0.2
STAGE_PREFIX = 'mmgrasp.stage::'
PATHS = ('cuda_path', 'torch_reference')


class ScopedReferences:
    """Stands in for the Triton kernels module of :mod:`mmgrasp.ops.point_ops` on
    the CPU: each point op takes its kernel branch (its ``kernel_scope``), and the "kernel" it
    calls is the op's own torch reference, run inside that scope."""

    def __init__(self):
        from mmgrasp.ops import point_normals, point_ops
        self._ops, self._normals, self._inside = point_ops, point_normals, False

    def install(self) -> None:
        """From now on every point op of this process dispatches to these references (the
        normals of :func:`mmgrasp.ops.point_normals.batch_normals` too, on any device)."""
        self._ops._kernels_for = lambda tensor: None if self._inside else self
        self._normals.kernels_for = lambda tensor: None if self._inside else self

    @contextmanager
    def _reference(self, name: str) -> Iterator[None]:
        from torch.profiler import record_function
        self._inside = True  # the op called below takes its reference branch
        try:
            with record_function(STANDIN_PREFIX + name):
                yield
        finally:
            self._inside = False

    @staticmethod
    def _contiguous(*tensors):
        """The inputs as the kernels' wrappers pass them: contiguous (a copy if strided)."""
        return [None if t is None else t.contiguous() for t in tensors]

    def furthest_point_sample(self, xyz, num: int, mask=None):
        xyz, mask = self._contiguous(xyz, mask)
        with self._reference('furthest_point_sample'):
            return self._ops.furthest_point_sample(xyz, num, mask)

    def ball_query(self, radius: float, nsample: int, xyz, new_xyz):
        xyz, new_xyz = self._contiguous(xyz, new_xyz)
        with self._reference('ball_query'):
            return self._ops.ball_query(radius, nsample, xyz, new_xyz)

    def cylinder_queries(self, xyz, new_xyz, rot, radii, hmin: float, hmax, nsample: int):
        xyz, new_xyz, rot = self._contiguous(xyz, new_xyz, rot)
        with self._reference('cylinder_queries'):
            return self._ops.cylinder_queries(xyz, new_xyz, rot, radii, hmin, hmax, nsample)

    def knn(self, ref, query, k: int):
        """Squared distances and indices of the k nearest (k > 3)."""
        ref, query = self._contiguous(ref, query)
        with self._reference('knn'):
            return self._ops._knn_reference(ref, query, k)

    def estimate_normals(self, points, radius: float, max_nn: int, orientation: str,
                         scale: float):
        """The normals kernel's stand-in: the worker's rule, frame by frame (the same bits),
        on the cloud read through DLPack, which records no op (``.numpy()`` would be counted
        as a host read; the torch reference records thousands of ops, whose recorded shapes
        grew a paper-size count past 17 GB)."""
        import numpy as np
        import torch
        points, = self._contiguous(points)
        with self._reference('estimate_normals'):
            frames = np.from_dlpack(points.detach())
            return torch.from_numpy(np.stack([self._normals.estimate_normals(
                f, radius, max_nn, orientation, scale) for f in frames]).reshape(frames.shape))

    def three_nn(self, ref, query):
        """Squared distances and indices of the 3 nearest, inf / 0 past the reference points."""
        import torch
        k = min(3, ref.shape[1])
        ref, query = self._contiguous(ref, query)
        with self._reference('three_nn'):
            dist, idx = self._ops.knn(ref, query, k)
        if k < 3:
            pad = (*dist.shape[:-1], 3 - k)
            dist = torch.cat([dist, dist.new_full(pad, float('inf'))], -1)
            idx = torch.cat([idx, idx.new_zeros(pad)], -1)
        return dist.square(), idx


# ------------------------------------------------------------------------------- counting
def _is_sync(event) -> bool:
    if event.name in SYNCS:
        return True
    if event.name == 'aten::repeat_interleave':  # output_size is the last argument
        inputs = getattr(event, 'concrete_inputs', None) or [None]
        return inputs[-1] is None
    return False


def multi_tensor_launches(numels: List[int], depth: int) -> int:
    """Kernel launches of torch's ``multi_tensor_apply`` over tensors of ``numels`` elements
    in ``depth`` lists: each tensor is cut into chunks of ``MULTI_TENSOR_CHUNK`` (one block
    each; empty tensors are skipped), and a launch goes out when the tensors of a launch (a
    tensor counting once all its chunks are in) or its blocks reach the depth's limits, and at
    the end if blocks are left; a tensor cut by a full launch continues in the next one."""
    max_tensors = MULTI_TENSOR_MAX_TENSORS[depth - 1]
    launches = blocks = tensors = 0
    for numel in numels:
        if numel == 0:
            continue
        tensors += 1
        chunks = -(-numel // MULTI_TENSOR_CHUNK)
        for chunk in range(chunks):
            blocks += 1
            last = chunk == chunks - 1
            if (tensors == max_tensors and last) or blocks == MULTI_TENSOR_MAX_BLOCKS:
                launches += 1
                blocks, tensors = 0, 0 if last else 1
    return launches + (blocks > 0)


def count_events(events, stages: Optional[List[tuple]] = None,
                 param_numels: Optional[Dict[int, List[int]]] = None
                 ) -> Dict[str, Dict[str, int]]:
    """Launches and syncs per part of profiler ``events`` (``prof.events()``), as the module
    docstring says. ``stages`` [(name, start_us, end_us)] charges root events of other threads
    (the autograd engine's on CUDA) to the stage whose time span holds their start.
    ``param_numels``: per parameter group size, the sizes of its parameters (what a fused
    optimiser op over that many tensors works on; one chunk each where not given)."""
    from mmgrasp.ops.kernel_scope import parse_kernel_scope
    from mmgrasp.models.utils.part_timer import PART_PREFIX
    parts: Dict[str, Dict[str, int]] = defaultdict(lambda: dict(launches=0, syncs=0))

    def part_of(name: str, part: str) -> str:
        for prefix in (PART_PREFIX, STAGE_PREFIX):
            if name.startswith(prefix):
                return name[len(prefix):]
        return part

    def multi_tensor(event) -> int:
        tensors = max(1, len(event.cpu_children))
        if event.name.startswith('aten::_fused_'):  # params, grads, exp_avgs, exp_avg_sqs
            return multi_tensor_launches((param_numels or {}).get(tensors, [1] * tensors), 4)
        numels = [math.prod(child.input_shapes[0]) if child.input_shapes else 1
                  for child in event.cpu_children]
        return multi_tensor_launches(numels or [1], 1 if event.name.endswith('_') else 2)

    def walk(event, part: str, in_scope: bool, in_sync: bool, standin: bool = False) -> int:
        part = part_of(event.name, part)
        scope = parse_kernel_scope(event.name)
        if scope is None and event.name.startswith(MULTI_TENSOR):
            scope = event.name, multi_tensor(event)
            in_sync = True  # the CPU implementation's per-tensor reads; none on CUDA
        standin = standin or event.name.startswith(STANDIN_PREFIX)
        charged = 0
        if scope is not None and not in_scope:
            parts[part]['launches'] += scope[1]
            charged, in_scope = scope[1], True
        elif (in_scope and not standin and event.name in COPY_ROOTS
              and not (event.cpu_parent and event.cpu_parent.name.startswith('aten::'))):
            standin = True  # the ops inside are its own
            if _records(event, COPY_OPS):  # a copy or memset the kernel's wrapper launches
                parts[part]['launches'] += 1
                charged = 1
        if _is_sync(event) and not in_sync:
            parts[part]['syncs'] += 1
            in_sync = True
        children = sorted(event.cpu_children, key=lambda e: e.time_range.start)
        if not event.name.startswith('aten::'):
            parts[part]['syncs'] += host_reads(children)
        below = sum(walk(child, part, in_scope, in_sync, standin) for child in children)
        if (event.name.startswith('aten::') and not in_scope and below == 0
                and event.name not in NO_LAUNCH):
            parts[part]['launches'] += 1
            return 1
        return below + charged

    def stage_of(event) -> str:
        start = event.time_range.start
        return next((name for name, lo, hi in stages or () if lo <= start <= hi), 'other')

    roots = sorted((e for e in events if e.cpu_parent is None and e.device_type.name == 'CPU'),
                   key=lambda e: (e.thread, e.time_range.start))
    for a, b in zip(roots, roots[1:]):
        if a.thread == b.thread and host_reads([a, b]):
            parts[stage_of(a)]['syncs'] += 1
    for event in roots:
        walk(event, stage_of(event), False, False)
    return dict(parts)


def _records(event, names: frozenset) -> bool:
    """Whether ``event`` or an op below it is one of ``names``."""
    return event.name in names or any(_records(child, names) for child in event.cpu_children)


def host_reads(siblings: list) -> int:
    """``.tolist()`` / ``.numpy()`` calls among time-ordered sibling events: each records the
    pair ``resolve_conj``, ``resolve_neg`` outside any op."""
    return sum(a.name == 'aten::resolve_conj' and b.name == 'aten::resolve_neg'
               for a, b in zip(siblings, siblings[1:]))


def cuda_figures(events) -> Dict[str, Dict[str, float]]:
    """Per part (innermost part or stage range): CUDA runtime launches, syncs and the range's
    milliseconds; under ``'kernels'`` the device-side events (kernels, memcpys, memsets)."""
    from mmgrasp.models.utils.part_timer import PART_PREFIX
    figures: Dict[str, Dict[str, float]] = defaultdict(
        lambda: dict(cuda_launches=0, cuda_syncs=0, ms=0.0))
    kernels = 0

    def walk(event, part: str) -> None:
        for prefix in (PART_PREFIX, STAGE_PREFIX):
            if event.name.startswith(prefix):
                part = event.name[len(prefix):]
                figures[part]['ms'] += event.time_range.elapsed_us() / 1e3
        if event.name in CUDA_LAUNCH_CALLS:
            figures[part]['cuda_launches'] += 1
        if event.name in CUDA_SYNC_CALLS:
            figures[part]['cuda_syncs'] += 1
        for child in event.cpu_children:
            walk(child, part)

    for event in events:
        if event.device_type.name != 'CPU':
            kernels += 1
        elif event.cpu_parent is None:
            walk(event, 'other')
    return dict(figures, kernels=kernels)


def kernel_excess(results: dict, tolerance: float = KERNEL_TOLERANCE) -> List[str]:
    """Where the profiler's device work (``kernels``: kernels, memcpys, memsets; on CUDA
    only) exceeds the predicted launches by more than ``tolerance``: one line each, for
    ``results`` as ``--json`` writes them. ``tools/analysis/device_check.sh`` fails on any."""
    lines = []
    for path, run in results.items():
        for mode in ('train', 'inference'):
            figures = run.get(mode, {})
            if 'kernels' in figures and figures['kernels'] > figures['launches'] * (1 + tolerance):
                lines.append(f"{path} {mode}: {figures['kernels']} device kernels on "
                             f"{run.get('device', '?')} against {figures['launches']} predicted "
                             f"launches (more than {tolerance:.0%} over)")
    return lines


def summarise(parts: Dict[str, Dict[str, int]]) -> dict:
    return dict(launches=sum(p['launches'] for p in parts.values()),
                syncs=sum(p['syncs'] for p in parts.values()),
                parts={name: parts[name] for name in sorted(parts)})


# ------------------------------------------------------------------------------- one path
@contextmanager
def stage(name: str, spans: List[tuple]) -> Iterator[None]:
    from torch.profiler import record_function
    start = time.perf_counter_ns() // 1000
    with record_function(STAGE_PREFIX + name):
        yield
    spans.append((name, start, time.perf_counter_ns() // 1000))


def profile_path(config: str, path: str, cfg_options: Optional[dict] = None,
                 scoped_references: bool = False, small_data: bool = False,
                 log: Callable[[str], None] = lambda message: None) -> dict:
    """Counts of ``config`` on ``path`` (one of :data:`PATHS`) in this process, as the
    ``--json`` of ``tools/analysis/benchmark_dispatch.py`` holds them per path; on CUDA where
    there is one and ``path`` is ``cuda_path``. ``scoped_references``: the point ops' CUDA
    branches with :class:`ScopedReferences` in the kernels' place (``cuda_path`` on the CPU);
    ``small_data``: a few frames (:func:`prepare_model`); ``log``: progress messages."""
    import torch
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner
    from torch.profiler import ProfilerActivity, profile

    from mmgrasp.registry import MODELS

    cfg = path_config(Config.fromfile(config), dict(cfg_options or {}), path,
                      scoped_references)
    init_default_scope(cfg.get('default_scope', 'mmgrasp'))
    device = torch.device('cuda' if torch.cuda.is_available() and path == 'cuda_path'
                          else 'cpu')
    if scoped_references:
        ScopedReferences().install()
    loader_cfg = copy.deepcopy(cfg.train_dataloader)
    loader_cfg.update(num_workers=0, persistent_workers=False)
    seed = cfg.get('randomness', {}).get('seed', 0) or 0
    loader = Runner.build_dataloader(loader_cfg, seed=seed)
    batch = next(iter(loader))
    torch.manual_seed(seed)
    model = MODELS.build(cfg.model).to(device)
    prepare_model(cfg, model, loader.dataset, small_data)
    model.timer.synchronize = device.type == 'cuda'
    # the collision filter of predict works on the cloud the batch carries
    model.test_cfg['collision_cloud'] = 'input'
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    param_numels = {len(group['params']): [p.numel() for p in group['params']]
                    for group in optim.optimizer.param_groups}
    spans: List[tuple] = []
    backward, step = optim.backward, optim.step
    optim.backward = lambda loss, **kw: _in_stage('backward', spans, backward, loss, **kw)
    optim.step = lambda **kw: _in_stage('optimizer', spans, step, **kw)

    def train_iteration() -> None:
        model.train()
        with optim.optim_context(model):
            with stage('preprocess', spans):
                data = model.data_preprocessor(copy.copy(batch), True)
            with stage('forward', spans):
                losses = model._run_forward(data, mode='loss')
        with stage('losses', spans):
            loss, _ = model.parse_losses(losses)
        optim.update_params(loss)

    def inference() -> None:
        model.eval()
        with torch.no_grad():
            with stage('preprocess', spans):
                data = model.data_preprocessor(copy.copy(batch), False)
            with stage('forward', spans):
                model._run_forward(data, mode='predict')

    def sync() -> None:
        if device.type == 'cuda':
            torch.cuda.synchronize()

    log(f'{path}: warm-up iteration on {device} ...')
    train_iteration()
    sync()
    start = time.perf_counter()
    train_iteration()
    sync()
    seconds = time.perf_counter() - start
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda'
                                           else [])
    out = {}
    for mode, run in (('train', train_iteration), ('inference', inference)):
        log(f'{path}: profiling {mode} ...')
        spans.clear()
        with profile(activities=activities, record_shapes=True) as prof:
            run()
            sync()
        events = prof.events()
        # the forward stage is a container: ops outside every part in it are 'other'
        stages = [s for s in spans if s[0] != 'forward']
        parts = count_events(events, stages, param_numels)
        if 'forward' in parts:
            other = parts.pop('forward')
            parts.setdefault('other', dict(launches=0, syncs=0))
            for key in ('launches', 'syncs'):
                parts['other'][key] += other[key]
        out[mode] = summarise(parts)
        if device.type == 'cuda':
            figures = cuda_figures(events)
            out[mode]['kernels'] = figures.pop('kernels')
            for name, values in figures.items():
                out[mode]['parts'].setdefault(name, dict(launches=0, syncs=0)).update(values)
    out['train']['seconds'] = seconds
    log(f'{path}: counting the live bytes of a training iteration ...')
    spans.clear()
    out['train']['peak_bytes'] = peak_bytes(train_iteration, device,
                                            [model.state_dict(keep_vars=True),
                                             [p.grad for p in model.parameters()],
                                             optim.optimizer.state, batch])
    out['device'] = str(device)
    out['point_ops'] = ('torch references in the kernels\' scopes' if scoped_references
                        else cfg.model.get('point_ops', 'auto')
                        + (' (interpreted)' if os.environ.get('TRITON_INTERPRET') else ''))
    out['conv_algorithm'] = cfg.model.get('backbone', {}).get('conv_algorithm')
    return out


def peak_bytes(run, device, alive: list) -> dict:
    """Peak live tensor bytes of ``run()`` on ``device``, in all and per part
    (:class:`~mmgrasp.models.utils.live_bytes.LiveBytes`); ``alive``: what lives before it.
    The forward stage is a container: its own peak (ops outside every part) is ``other``'s."""
    from mmgrasp.models.utils.live_bytes import LiveBytes
    with LiveBytes(device) as counter:
        counter.adopt(alive)
        start = counter.live
        run()
    parts = dict(counter.peaks)
    if 'forward' in parts:
        parts['other'] = max(parts.pop('forward'), parts.get('other', 0))
    return dict(peak=counter.peak, start=start, parts={k: parts[k] for k in sorted(parts)})


def path_config(cfg, options: dict, path: str, scoped_references: bool = False):
    """``cfg`` with ``options`` merged and the path's numerics: on ``cuda_path`` the point
    ops' kernels (``triton``; the references when the kernels' scopes stand in for them) and
    the sparse U-Net's chunked im2col and the visible-label test's brute-force pass
    (``GraspDataPreprocessor(visible_kd_tree=False)``); on ``torch_reference`` the references,
    the sparse U-Net's torch backend and the CPU's algorithm (``auto``)."""
    cfg.merge_from_dict(options)
    reference = path == 'torch_reference'
    cfg.model.point_ops = 'torch' if reference or scoped_references else 'triton'
    backbone = cfg.model.get('backbone', {})
    if reference and 'backend' in backbone:
        backbone.backend = 'torch'
    if 'conv_algorithm' in backbone:
        backbone.conv_algorithm = 'auto' if reference else 'chunked_im2col'
    preprocessor = cfg.model.get('data_preprocessor', {})
    if preprocessor.get('type') == 'GraspDataPreprocessor':
        preprocessor.visible_kd_tree = None if reference else False
    return cfg


def prepare_model(cfg, model, dataset, small_data: bool) -> None:
    """Run the config's hooks that prepare the model before training (the scale statistic of
    Scale-Balanced-Grasp). On a dataset given with ``--synthetic`` or ``--data-root``, a few
    frames, an empty width bin is raised to one count (the hook's ``min_count``)."""
    from types import SimpleNamespace

    from mmgrasp.registry import HOOKS
    for hook_cfg in cfg.get('custom_hooks', []):
        if hook_cfg['type'] == 'ScaleStatisticHook':
            hook_cfg = dict(hook_cfg, **(dict(min_count=1) if small_data else {}))
            hook = HOOKS.build(hook_cfg)
            hook.before_train(SimpleNamespace(
                model=model, train_dataloader=SimpleNamespace(dataset=dataset)))


def _in_stage(name: str, spans: List[tuple], fn, *args, **kwargs):
    with stage(name, spans):
        return fn(*args, **kwargs)


# ---------------------------------------------------------------- a path's own process
def child_env(path: str, interpret: bool) -> Dict[str, str]:
    """The environment of a path's process: Triton's interpreter for ``cuda_path`` on the
    CPU with ``--interpret`` (it must be chosen before Triton is imported)."""
    env = dict(os.environ)
    env.pop('TRITON_INTERPRET', None)
    if path == 'cuda_path' and interpret and not _has_cuda():
        env['TRITON_INTERPRET'] = '1'
    return env


def child_flags(path: str, interpret: bool) -> List[str]:
    """The flags of a path's process: ``cuda_path`` on the CPU without the interpreter runs
    the torch references in the kernels' scopes (``--scoped-references``)."""
    return ['--scoped-references'] if path == 'cuda_path' and not (
        _has_cuda() or interpret) else []


def _has_cuda() -> bool:
    import torch
    return torch.cuda.is_available()


