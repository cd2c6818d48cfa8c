"""A published label store read by URL: batch windows planned, coalesced, fetched concurrently
and kept in a local block cache.

A gather asks :func:`read_url_rows` for rows of some files of the store. For every file the rows'
byte windows (``.npy`` data offset + row · row bytes) are turned into the cache's fixed-size
blocks; blocks already on local disk are read from there, the missing ones are merged into
ranges wherever two are less than ``gap`` bytes apart (the bytes between are fetched too, and
cached), and all ranges of the batch go out at once on a bounded pool of threads. A read of
several arrays (:meth:`RemoteStore.read_rows_many`: the μ codes, widths and collision bytes of a
stage-two gather) plans the windows of all of them together and fetches them in that one wave,
so a cold gather costs about one round trip (more only when its ranges outnumber the pool),
whatever the number of files and arrays.

Only the process that opened the store (the training process) reads by URL. The small files a
loader worker or a gather reads whole — the manifest, every object's label points, tolerance
radii and μ value tables — are copied once, at open, into a local mirror beside the block cache
(:meth:`RemoteStore.local_copy`);
a forked worker that would fetch raises instead (:class:`RemoteStoreError`).

Versions: publishing records every file's ETag in the manifest (with the URL it was published
to); read at that URL, every range is asked ``If-Match`` that ETag, so a replacement — of the
same size, before the first read, after any listing — is refused by the server (412) or caught
in the answer (:class:`~.sources.RemoteFileChanged`, the file's cached blocks dropped). A store
read at another URL (published to ``file://``, served over HTTP) pins each file's version with
its first answer instead.

Faults: retries and timeouts are obstore's alone (:mod:`.sources`), so each request ends within
:func:`~.sources.read_bound`; the first range of a read that fails stops the ranges still
queued (none of them sends a request: at most ``concurrency × (1 + retries)`` requests in all)
and the read raises at once, naming the URL and the byte range. A block reaches the
cache only from an answer that passed every check, so what is cached stays true whatever
failed.
"""
import contextlib
import hashlib
import json
import os
import re
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .block_cache import BlockCache, file_key, temp_name
from .sources import RemoteFileChanged, RemoteNotFound, is_url, join_url, open_source

MANIFEST = 'manifest.json'
CURRENT = 'CURRENT'
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
_MIRRORED = ('points.npy', 'tolerance_radii.npy', 'score_values.npy')


class RemoteStoreError(RuntimeError):
    """A remote store that cannot be opened or read in this process as it is."""


# A published manifest, CURRENT and store id come from the server: untrusted. They name local
# folders and files (the cache folder, the mirror), so only plain names pass — no absolute path,
# no '.' or '..', no separator other than '/' between a key's parts.
_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9._-]{0,127}')
_ETAG = re.compile(r'[\x20-\x7e]{0,256}')  # sent as If-Match: no line break, no control byte


def check_name(name, what: str, where: str) -> str:
    """``name`` when it is one plain file name (a store id, a version), else a clear error."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise RemoteStoreError(f'{where}: {what} {name!r} is not a plain name (letters, digits, '
                               f'"._-", not starting with "."); refusing a store that would '
                               f'write outside its cache folder')
    return name


def check_manifest(manifest, where: str) -> None:
    """Refuse a manifest whose store id or file keys would leave the local cache folder, or
    whose file entries are not sizes and offsets."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get('files'), dict) \
            or 'store_id' not in manifest:
        raise RemoteStoreError(f'{where} lists no files: publish the store with '
                               f'tools/data/build_label_store.py --upload')
    check_name(manifest['store_id'], 'store_id', where)
    for rel, entry in manifest['files'].items():
        if not isinstance(rel, str) or not all(_NAME.fullmatch(p) for p in rel.split('/')):
            raise RemoteStoreError(f'{where}: file key {rel!r} is not a relative path of plain '
                                   f'names (an absolute path or ".." would leave the mirror)')
        if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), int) and entry[k] >= 0 for k in ('size', 'offset')):
            raise RemoteStoreError(f'{where}: file {rel!r} has no non-negative integer size and '
                                   f'offset ({entry!r})')
        if not isinstance(entry.get('etag', ''), str) or _ETAG.fullmatch(entry.get('etag', '')) \
                is None:
            raise RemoteStoreError(f'{where}: file {rel!r} has an ETag that is not a short '
                                   f'printable string ({entry["etag"]!r}); it is sent as a header')


@dataclass(frozen=True)
class RemoteOptions:
    """How a remote store is read.

    Attributes:
        gap: missing blocks less than this many bytes apart are fetched in one range request.
        block_size: bytes per cache block (the unit fetched, cached and checked).
        cache_bytes: byte budget of the local block cache (least recently used out).
        concurrency: range requests in flight at once.
        read_ahead: also fetch every file touched, whole, in the background, while the files
            read ahead so far fit in half the budget.
        timeout: seconds one attempt of a request (connect, answer and body) may take.
        retries: further attempts of a request that failed in a way retrying may help (5xx,
            connection error, timeout) — obstore's retries, the only ones.
        backoff: seconds before the first retry; doubled for every next one. A read ends within
            timeout × (1 + retries) plus these backoffs (:func:`~.sources.read_bound`).
        max_request_bytes: longest single range request (longer ranges are split).
        link_latency: seconds of one round trip to the store, and
        link_bandwidth: its bytes per second: with both given, every read chooses its own gap
            (at most ``gap``), the one that minimises the modelled read time — per read,
            max(waves of ``concurrency`` requests × latency, latency + bytes / bandwidth) —
            so sparse small rows merge when requests cost more than the bytes between them.
    """
    gap: int = 256 * KIB
    block_size: int = 4 * KIB
    cache_bytes: int = 16 * GIB
    concurrency: int = 64
    read_ahead: bool = False
    timeout: float = 30.0
    retries: int = 4
    backoff: float = 0.1
    max_request_bytes: int = 16 * MIB
    link_latency: Optional[float] = None
    link_bandwidth: Optional[float] = None

    @classmethod
    def from_dict(cls, options: Optional[dict]) -> 'RemoteOptions':
        options = dict(options or {})
        unknown = set(options) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f'remote store options {sorted(unknown)} unknown; expected some of '
                             f'{[f.name for f in fields(cls)]}')
        return cls(**options)


@dataclass
class _File:
    url: str
    size: int
    offset: int  # first data byte (after the .npy header)
    key: str
    tag: Optional[str]  # version tag of every byte used so far (None: nothing fetched yet)
    read_ahead: bool = False  # submitted for a whole-file read (or refused by the budget)


@dataclass
class ReadStats:
    """What the reads of a store cost since the last :meth:`RemoteStore.pop_stats`."""
    requests: int = 0
    bytes_fetched: int = 0
    bytes_used: int = 0
    blocks_from_cache: int = 0
    read_calls: int = 0
    waves: int = 0  # read calls that fetched: each sends all its ranges, then waits for them


def describe_npy(path: str) -> dict:
    """Size, data offset, shape and dtype of a ``.npy`` file (from its header)."""
    with open(path, 'rb') as f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f'{path}: .npy format {version} is not supported')
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f)
        offset = f.tell()
    if fortran:
        raise ValueError(f'{path}: Fortran-ordered arrays cannot be read by rows')
    return dict(size=os.path.getsize(path), offset=offset, shape=list(shape), dtype=dtype.str)


class RemoteStore:
    """One opened remote store version (see :func:`open_remote_store`)."""

    def __init__(self, url: str, manifest: dict, cache_folder: str, options: RemoteOptions,
                 source, offline: bool = False):
        self.url, self.manifest, self.options = url, manifest, options
        self.source, self.offline = source, offline
        self.cache = None if offline else BlockCache(os.path.join(cache_folder, 'blocks'),
                                                     options.cache_bytes, options.block_size)
        self.mirror = os.path.join(cache_folder, 'mirror')
        self.stats = ReadStats()
        self._store_id = manifest['store_id']
        self._files: Dict[str, _File] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._read_ahead: Optional[ThreadPoolExecutor] = None
        self._read_ahead_bytes = 0
        self._read_ahead_jobs: List = []

    # ------------------------------------------------------------------------ files
    def _file(self, url: str) -> _File:
        with self._lock:
            if url in self._files:
                return self._files[url]
            rel = url[len(self.url) + 1:]
            entry = self.manifest['files'].get(rel)
            if not url.startswith(self.url + '/') or entry is None:
                raise RemoteStoreError(f'{url} is not a file of remote label store {self.url} '
                                       f'(its manifest lists no {rel})')
            key = file_key(url, self._store_id, entry['size'])
            tag = self.cache.version_tag(key)
            if self.manifest.get('published_url') == self.url and entry.get('etag'):
                if tag is not None and tag != entry['etag']:
                    self.cache.discard_file(key)  # blocks of a version the manifest does not name
                tag = entry['etag']
            self._files[url] = f = _File(url, entry['size'], entry['offset'], key, tag)
            return f

    def _check_process(self, what: str) -> None:
        if self.offline or os.getpid() != self._pid:
            raise RemoteStoreError(
                f'{what}: remote label store {self.url} is read by the process that opened it '
                f'(the training process); a loader worker never touches the network — it reads '
                f'the local mirror {self.mirror}')

    def local_copy(self, url: str) -> str:
        """The local mirror path of one of the small files copied at open."""
        rel = url[len(self.url) + 1:]
        path = os.path.join(self.mirror, rel)
        if not url.startswith(self.url + '/') or not os.path.isfile(path):
            raise RemoteStoreError(f'{url}: no local copy in {self.mirror} (only '
                                   f'{", ".join(_MIRRORED)} and the manifest are mirrored)')
        return path

    def _mirror_files(self) -> None:
        """Copy the manifest and the small files workers read, once (temp name + rename)."""
        todo = [rel for rel, entry in sorted(self.manifest['files'].items())
                if rel.rsplit('/', 1)[-1] in _MIRRORED
                and not _has_size(os.path.join(self.mirror, rel), entry['size'])]
        _run_all(self._pool_submit, [(self._fetch_whole, rel) for rel in todo])
        path = os.path.join(self.mirror, MANIFEST)
        _write_atomic(path, json.dumps(self.manifest, indent=1).encode())

    def _fetch_whole(self, rel: str) -> None:
        f = self._file(join_url(self.url, rel))
        data = self._fetch(f, 0, f.size) if f.size else b''
        _write_atomic(os.path.join(self.mirror, rel), data)

    # ------------------------------------------------------------------------ fetching
    def _pool_submit(self, fn, *args):
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.options.concurrency,
                                                thread_name_prefix='mmgrasp-remote')
        return self._pool.submit(fn, *args)

    def _fetch(self, f: _File, start: int, stop: int):
        """Bytes [start, stop) of ``f``: one request (the library retries it)."""
        try:
            fetched = self.source.read(f.url, start, stop, f.size, f.tag)
        except RemoteFileChanged:
            self.cache.discard_file(f.key)
            raise
        with self._lock:
            self.stats.requests += 1
            self.stats.bytes_fetched += stop - start
            if f.tag is None:
                f.tag = fetched.tag
            agreed = f.tag == fetched.tag  # else two first answers raced and disagree
        if not agreed:
            self.cache.discard_file(f.key)
            raise RemoteFileChanged(f.url, start, stop, f'the file was replaced on the server '
                                    f'(two answers carry versions {f.tag!r} and {fetched.tag!r})')
        self.cache.record_version(f.key, f.url, fetched.tag)  # before any block is stored
        return fetched.data

    def _fetch_blocks(self, f: _File, first: int, stop_block: int) -> None:
        """Fetch blocks [first, stop_block) of ``f`` in one range into the block cache."""
        bs = self.options.block_size
        data = self._fetch(f, first * bs, min(stop_block * bs, f.size))
        self.cache.write(f.key, self.cache.file(f.key, f.size), first, data)

    def _ranges(self, missing: np.ndarray, gap: Optional[int] = None) -> List[Tuple[int, int]]:
        """Missing block indices (sorted) -> [first, stop) block ranges: blocks fewer than
        ``gap`` bytes apart merge, no range longer than ``max_request_bytes``."""
        if not len(missing):
            return []
        bs = self.options.block_size
        gap_blocks = (self.options.gap if gap is None else gap) // bs
        longest = max(1, self.options.max_request_bytes // bs)
        breaks = np.flatnonzero(np.diff(missing) - 1 > gap_blocks) + 1
        ranges = []
        for run in np.split(missing, breaks):
            first, stop = int(run[0]), int(run[-1]) + 1
            for begin in range(first, stop, longest):
                ranges.append((begin, min(begin + longest, stop)))
        return ranges

    def _read_gap(self, missing: List[np.ndarray]) -> int:
        """The gap of one read: ``gap``, or with link hints the one (at most ``gap``) whose
        merges of the smallest holes between missing blocks minimise the modelled time."""
        opts = self.options
        if opts.link_latency is None or opts.link_bandwidth is None:
            return opts.gap
        bs = opts.block_size
        holes = [np.diff(m)[np.diff(m) > 1] - 1 for m in missing if len(m)]
        if not holes:
            return opts.gap
        runs = sum(len(h) + 1 for h in holes)
        nbytes = sum(len(m) for m in missing) * bs
        holes = np.sort(np.concatenate(holes))
        holes = holes[holes * bs <= opts.gap]
        merged = np.arange(len(holes) + 1)
        extra = np.r_[0, np.cumsum(holes)] * bs
        waves = np.ceil((runs - merged) / opts.concurrency)
        cost = np.maximum(waves * opts.link_latency,
                          opts.link_latency + (nbytes + extra) / opts.link_bandwidth)
        best = int(np.argmin(cost))
        return int(holes[best - 1]) * bs if best else 0

    # ------------------------------------------------------------------------ rows
    def read_rows(self, paths: Sequence[str], file_ids: np.ndarray, keys: np.ndarray,
                  row_shape: tuple, out: np.ndarray) -> None:
        """``read_rows`` of the deferred reader for URLs of this store: rows ``keys`` (sorted
        by file, then key) of files ``paths[file_ids]``, viewed as ``(rows, *row_shape)``."""
        self.read_rows_many([(paths, file_ids, keys, row_shape, out)])

    def read_rows_many(self, requests: Sequence[tuple]) -> None:
        """Several :meth:`read_rows` in one wave: ``requests`` are (paths, file_ids, keys,
        row_shape, out) tuples; the blocks every request needs are planned together (per file,
        over all requests), coalesced, and all ranges are fetched before any row is copied."""
        requests = [r for r in requests if len(r[1])]
        if not requests:
            return
        self._check_process(requests[0][0][requests[0][1][0]])
        plans, used = [], 0
        with contextlib.ExitStack() as pins:
            for paths, file_ids, keys, row_shape, out in requests:
                row_bytes = int(np.prod(row_shape)) * out.dtype.itemsize
                out_bytes = out.reshape(len(out), -1).view(np.uint8)
                bounds = np.flatnonzero(np.diff(file_ids)) + 1
                for start, stop in zip(np.r_[0, bounds], np.r_[bounds, len(file_ids)]):
                    if start < stop:
                        plan = self._plan(paths[file_ids[start]], keys[start:stop], row_shape,
                                          out.dtype, row_bytes, (start, stop))
                        pins.enter_context(self.cache.pinned(plan.cached))
                        plans.append((plan, out_bytes))
                used += len(file_ids) * row_bytes
            missing: Dict[str, Tuple[_File, np.ndarray]] = {}  # a file read by two requests
            for plan, _ in plans:
                f, before = missing.get(plan.file.key, (plan.file, plan.missing[:0]))
                missing[f.key] = (f, np.union1d(before, plan.missing))
            gap = self._read_gap([blocks for _, blocks in missing.values()])
            jobs = _run_all(self._pool_submit, [
                (self._fetch_blocks, f, first, stop)
                for f, blocks in missing.values() for first, stop in self._ranges(blocks, gap)])
            for plan, out_bytes in plans:
                plan.extract(out_bytes)
        with self._lock:
            self.stats.read_calls += 1
            self.stats.waves += bool(jobs)
            self.stats.bytes_used += used
            self.stats.blocks_from_cache += sum(plan.from_cache for plan, _ in plans)

    def _plan(self, path: str, keys: np.ndarray, row_shape: tuple, dtype, row_bytes: int,
              where: Tuple[int, int]) -> '_FilePlan':
        f = self._file(path)
        entry = self.manifest['files'][path[len(self.url) + 1:]]
        cells, per_row = int(np.prod(entry['shape'])), int(np.prod(row_shape))
        if np.dtype(entry['dtype']) != np.dtype(dtype) or (per_row and cells % per_row):
            raise ValueError(f'{f.url}: a {entry["dtype"]} array of shape {entry["shape"]} '
                             f'cannot be read as rows of {row_shape} {np.dtype(dtype).str}')
        rows = cells // per_row if per_row else 0
        keys = keys.astype(np.int64)
        if keys[-1] >= rows:
            raise IndexError(f'{f.url}: row {keys[-1]} requested but the file has {rows} '
                             f'rows of {row_shape}; the label store does not match this record')
        self._maybe_read_ahead(f)
        plan = _FilePlan(self, f, self.cache.file(f.key, f.size), keys, row_bytes, where)
        return plan

    def pop_stats(self) -> ReadStats:
        with self._lock:
            stats, self.stats = self.stats, ReadStats()
        return stats

    # ------------------------------------------------------------------------ read-ahead
    def _maybe_read_ahead(self, f: _File) -> None:
        if not self.options.read_ahead:
            return
        with self._lock:
            if f.read_ahead:
                return
            f.read_ahead = True
            if self._read_ahead_bytes + f.size > self.options.cache_bytes // 2:
                return
            self._read_ahead_bytes += f.size
            if self._read_ahead is None:
                self._read_ahead = ThreadPoolExecutor(2, thread_name_prefix='mmgrasp-remote-ahead')
            self._read_ahead_jobs.append(self._read_ahead.submit(self._read_whole_file, f))

    def _read_whole_file(self, f: _File) -> None:
        missing = np.flatnonzero(~self.cache.file(f.key, f.size).present)
        for first, stop in self._ranges(missing, gap=f.size):
            self._fetch_blocks(f, first, stop)

    def wait_read_ahead(self) -> None:
        """Block until the background whole-file reads end; raise the first one's error."""
        with self._lock:
            jobs, self._read_ahead_jobs = self._read_ahead_jobs, []
        for job in jobs:
            job.result()


class _FilePlan:
    """One file's part of a read: the blocks its rows need, checked where cached, and the
    coalesced ranges to fetch for the rest; the rows are then copied out of the cache's map."""

    def __init__(self, store: RemoteStore, f: _File, cached, keys: np.ndarray, row_bytes: int,
                 where: Tuple[int, int]):
        bs = store.options.block_size
        self.file, self.cached, self.keys, self.row_bytes, self.where = \
            f, cached, keys, row_bytes, where
        first_byte = f.offset + keys * row_bytes
        first = first_byte // bs
        counts = (first_byte + row_bytes - 1) // bs - first + 1
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        self.blocks = np.unique(np.repeat(first, counts) + within)
        store.cache.verify(f.key, cached, self.blocks)
        self.missing = self.blocks[~cached.present[self.blocks]]
        self.from_cache = len(self.blocks) - len(self.missing)

    def extract(self, out_bytes: np.ndarray) -> None:
        """Rows out of the cache's map of the file into ``out_bytes`` (this file's slice)."""
        if not self.cached.present[self.blocks].all():  # a block could not be stored
            raise RemoteStoreError(f'{self.file.url}: fetched blocks did not reach the block '
                                   f'cache (it was dropped or cannot be written)')
        f, rb = self.file, self.row_bytes
        table = self.cached.array[f.offset:f.offset + (f.size - f.offset) // rb * rb]
        start, stop = self.where
        np.take(table.reshape(-1, rb), self.keys, axis=0, out=out_bytes[start:stop])


def _run_all(submit, calls: List[tuple]) -> List:
    """Run ``calls`` ((fn, *args) each) through ``submit`` and wait for all; the first failure
    raises at once and no queued call sends a request after it. The failing call stops the
    others itself, before its pool thread is free to start the next one (cancelling from the
    waiting thread comes too late for that); the calls in flight end within their own bound
    and only ever store checked blocks. Returns the jobs."""
    stop = threading.Event()

    def guarded(fn, *args):
        if stop.is_set():
            return None  # the read has failed: this range is never asked for
        try:
            return fn(*args)
        except BaseException:
            stop.set()
            raise

    jobs = [submit(guarded, *call) for call in calls]
    done, pending = wait(jobs, return_when=FIRST_EXCEPTION)
    failed = [job for job in done if job.exception() is not None]
    if failed:
        stop.set()
        for job in pending:
            job.cancel()
        failed[0].result()
    return jobs


def _has_size(path: str, size: int) -> bool:
    try:
        return os.path.getsize(path) == size
    except FileNotFoundError:
        return False


def _write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = temp_name(path)
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- opening
_opened: Dict[Tuple[str, str], RemoteStore] = {}
_opened_lock = threading.Lock()


def resolve_version(url: str, source) -> str:
    """The version folder a published root points at (``CURRENT``), or ``url`` itself when it
    is a version folder (it has no ``CURRENT``)."""
    url = url.rstrip('/')
    try:
        name = source.read_whole(join_url(url, CURRENT))
    except RemoteNotFound:
        return url
    return join_url(url, check_name(name.decode(errors='replace').strip(), 'version',
                                    join_url(url, CURRENT)))


def _opened_index(url: str, cache_dir: str) -> str:
    digest = hashlib.sha1(url.rstrip('/').encode()).hexdigest()[:16]
    return os.path.join(cache_dir, 'remote-opened', f'{digest}.json')


def _open_offline(url: str, cache_dir: str, opts: RemoteOptions) -> RemoteStore:
    """The store as the training process last opened it, from the local mirror alone."""
    index = _opened_index(url, cache_dir)
    try:
        with open(index) as f:
            opened = json.load(f)
        with open(os.path.join(opened['folder'], 'mirror', MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError, KeyError) as exc:
        raise RemoteStoreError(f'{url}: a loader worker opens a remote store from the local '
                               f'mirror the training process made ({index}: {exc}); open the '
                               f'store in the training process before workers start') from exc
    return RemoteStore(opened['version'], manifest, opened['folder'], opts, None, offline=True)


def open_remote_store(url: str, cache_dir: str, options: Optional[dict] = None,
                      storage_options: Optional[dict] = None,
                      offline: bool = False) -> RemoteStore:
    """Open (once a process) the store published at ``url``: read its manifest, copy the small
    files workers read into the local mirror, and return the reader whose block cache lives
    under ``cache_dir``. ``offline`` (a loader worker) opens what the training process opened,
    from the mirror, without any request; such a store refuses to fetch."""
    opts = RemoteOptions.from_dict(options)
    if offline:
        store = _open_offline(url, cache_dir, opts)
        with _opened_lock:
            _opened[(store.url, os.path.abspath(cache_dir))] = store
        return store
    source = open_source(url, opts.timeout, opts.retries, opts.backoff, storage_options)
    version = resolve_version(url, source)
    key = (version, os.path.abspath(cache_dir))
    with _opened_lock:
        if key in _opened and _opened[key].options == opts:
            return _opened[key]
    try:
        raw = source.read_whole(join_url(version, MANIFEST))
    except RemoteNotFound as exc:
        raise RemoteStoreError(f'{join_url(version, MANIFEST)}: {exc.reason}; {url} is not a '
                               f'published label store, or its upload has not finished (the '
                               f'manifest is written last)') from exc
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise RemoteStoreError(f'{join_url(version, MANIFEST)}: unreadable ({exc})') from exc
    check_manifest(manifest, join_url(version, MANIFEST))
    digest = hashlib.sha1(version.encode()).hexdigest()[:12]
    folder = os.path.join(cache_dir, f'remote-{digest}-{manifest["store_id"]}')
    store = RemoteStore(version, manifest, folder, opts, source)
    store._mirror_files()
    _write_atomic(_opened_index(url, cache_dir),
                  json.dumps(dict(url=url, version=version, folder=folder)).encode())
    with _opened_lock:
        _opened[key] = store
    return store


def opened_store_for(path: str) -> RemoteStore:
    """The opened remote store that ``path`` (a URL) belongs to."""
    with _opened_lock:
        for store in _opened.values():
            if path.startswith(store.url + '/'):
                return store
    raise RemoteStoreError(f'{path}: no remote label store holding it is open in this process '
                           f'(pid {os.getpid()}); open it first (SampleGraspLabels opens it '
                           f'in the training process before loader workers start)')


def read_url_rows(paths: Sequence[str], file_ids: np.ndarray, keys: np.ndarray,
                  row_shape: tuple, out: np.ndarray) -> None:
    """The deferred reader's ``read_rows`` for files addressed by URL (one remote store)."""
    read_url_rows_many([(paths, file_ids, keys, row_shape, out)])


def read_url_rows_many(requests: Sequence[tuple]) -> None:
    """The deferred reader's ``read_rows_many`` for files addressed by URL: every request of
    one remote store, fetched in one wave (:meth:`RemoteStore.read_rows_many`)."""
    paths = [p for r in requests for p in r[0]]
    stores = {id(store): store for store in map(opened_store_for, paths)}
    local = [p for p in paths if not is_url(p)]
    if local or len(stores) != 1:
        raise RemoteStoreError(f'one gather reads one remote label store, not {paths}')
    next(iter(stores.values())).read_rows_many(requests)


def url_local_copy(path: str) -> str:
    """Local mirror path of a small store file addressed by URL."""
    return opened_store_for(path).local_copy(path)


def _forget_in_child() -> None:
    """A forked worker keeps the parent's stores (to name them in errors), never their pools."""
    for store in _opened.values():
        store._pool = store._read_ahead = None
        store._read_ahead_jobs = []


os.register_at_fork(after_in_child=_forget_in_child)


# ---------------------------------------------------------------------------- publishing
def publish_store(version_dir: str, url: str, storage_options: Optional[dict] = None,
                  progress=None) -> str:
    """Upload a built store version to ``url``/<version name>/ — every file, then its manifest
    (with each file's size, ``.npy`` geometry and the ETag the store gave it, and the URL it was
    published to), then ``url``/CURRENT — so a reader never sees a version whose upload has not
    finished (timeouts and retries: :class:`RemoteOptions`' defaults). Returns the version's
    URL."""
    opts = RemoteOptions()
    source = open_source(url, opts.timeout, opts.retries, opts.backoff, storage_options)
    name = os.path.basename(version_dir.rstrip('/'))
    target = join_url(url, name)
    with open(os.path.join(version_dir, MANIFEST)) as f:
        manifest = json.load(f)
    files = {}
    for folder, _, names in sorted(os.walk(version_dir)):
        for file_name in sorted(names):
            path = os.path.join(folder, file_name)
            rel = os.path.relpath(path, version_dir).replace(os.sep, '/')
            if rel == MANIFEST or not rel.endswith('.npy'):
                continue
            files[rel] = describe_npy(path)
    t0 = time.time()
    for i, rel in enumerate(sorted(files)):
        files[rel]['etag'] = source.write(join_url(target, rel), os.path.join(version_dir, rel))
        if progress is not None:
            progress(f'uploaded {rel} ({i + 1}/{len(files)}, {time.time() - t0:.1f}s)')
    manifest = dict(manifest, files=files, store_id=name, published_url=target)
    source.write(join_url(target, MANIFEST), json.dumps(manifest, indent=1).encode())
    source.write(join_url(url, CURRENT), f'{name}\n'.encode())
    return target
