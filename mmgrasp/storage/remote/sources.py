"""Bytes of a remote file by range, with the version they belong to — through obstore.

One library for every scheme it knows (``s3://``, ``gs://``, ``az://`` / ``abfs://``,
``http(s)://``, ``file://``): each range is one GET (``Range`` and, once the file's version is
known, ``If-Match`` with its ETag), never a metadata request per range; the answer's ETag and
size (from ``Content-Range``) are compared with the version and size the store's manifest
gives, so a replaced file is noticed in the very answer that would mix two versions.

Timeouts and retries live at one level, obstore's (its client's ``timeout`` and
``connect_timeout``, its ``retry_config``: 5xx, connection errors and timeouts, a dropped body
resumed from where it stopped), set from :class:`~.store.RemoteOptions`; nothing above it
retries. So a request ends within ``timeout × (1 + retries)`` plus the backoffs
(:func:`read_bound`). Credentials come from the environment or the library's credential chain
(``AWS_*``, ``GOOGLE_*``, ``AZURE_*``, instance metadata), never from a config
(:mod:`mmgrasp.storage.secrets`); ``storage_options`` carries the store's other configuration
keys (``endpoint``, ``region``, ``virtual_hosted_style_request``, ``skip_signature``, …; the
names :data:`mmgrasp.storage.secrets.STORE_KEYS` holds for the URL's scheme; none for HTTP and
``file://``, where any is refused).
Plain-HTTP endpoints are allowed (an S3-compatible server on a cluster's own network, MinIO,
moto in the tests); an ``https://`` endpoint stays TLS.

Errors are :class:`RemoteReadError` naming the URL and the byte range;
:class:`RemoteNotFound` and :class:`RemoteFileChanged` are its kinds that say the object is
missing or another version.
"""
import re
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Dict, Optional, Tuple
from urllib.parse import urlsplit

from ..secrets import SCHEME_KEYS, STORE_KEYS, unknown_store_keys

_URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*://')
#: Option names that set what RemoteOptions sets (timeouts and retries at one level only).
_ONE_LEVEL = ('timeout', 'connect_timeout', 'retry_config', 'client_options')


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(path))


def join_url(root: str, *parts: str) -> str:
    return '/'.join([root.rstrip('/')] + [p.strip('/') for p in parts])


class RemoteReadError(OSError):
    """A remote read that failed; names the URL and the byte range ([start, stop)).
    ``elapsed``: the seconds the failed request took, its retries included (None where no
    request was made), measured around the request alone so that it can be held against
    :func:`read_bound` whatever else the process was doing."""

    def __init__(self, url: str, start: Optional[int], stop: Optional[int], reason: str):
        where = url if start is None else f'{url} bytes {start}-{stop - 1}'
        super().__init__(f'{where}: {reason}')
        self.url, self.start, self.stop, self.reason = url, start, stop, reason
        self.elapsed: Optional[float] = None


class RemoteNotFound(RemoteReadError):
    """The server has no object at the URL."""


class RemoteFileChanged(RemoteReadError):
    """The remote file is not the version this run reads (its size or ETag moved)."""


@dataclass(frozen=True)
class Fetched:
    data: object  # bytes-like (obstore's Bytes: the buffer protocol, no copy)
    tag: str  # ETag of the version the bytes belong to; '' when the server sends none


def read_bound(timeout: float, retries: int, backoff: float) -> float:
    """Seconds within which one request ends, retries included: every attempt at most
    ``timeout``, the backoffs between them doubling from ``backoff`` (obstore's jitter keeps
    each below its cap)."""
    return timeout * (1 + retries) + sum(backoff * 2 ** i for i in range(retries))


def _condensed(exc: BaseException) -> str:
    """obstore's message without its debug dump: the first line, and the retry summary."""
    text = str(exc)
    first = text.split('\n', 1)[0].strip()
    retries = re.search(r'retries: (\d+),\s*max_retries: (\d+),\s*elapsed: ([^,]+),', text)
    if retries:
        first += f' (after {retries.group(1)} of at most {retries.group(2)} retries, ' \
                 f'{retries.group(3).strip()})'
    return first[:600]


class ObjectSource:
    """Ranged GETs through obstore, one client per scheme and host (bucket)."""

    def __init__(self, timeout: float = 30.0, retries: int = 4, backoff: float = 0.1,
                 storage_options: Optional[dict] = None):
        options = dict(storage_options or {})
        clash = sorted(set(options) & set(_ONE_LEVEL))
        if clash:
            raise ValueError(f'storage_options {clash}: timeouts and retries are set once, by '
                             f'the remote options timeout / retries / backoff')
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.storage_options = options
        self._stores: Dict[str, object] = {}
        self._lock = threading.Lock()  # the pool's threads open clients

    def _client_options(self) -> dict:
        limit = timedelta(seconds=self.timeout)
        return dict(timeout=limit, connect_timeout=limit, allow_http=True)

    def _retry_config(self) -> dict:
        backoff = timedelta(seconds=self.backoff)
        return dict(max_retries=self.retries,
                    backoff=dict(init_backoff=backoff, base=2,
                                 max_backoff=timedelta(seconds=self.backoff * 2 ** self.retries)),
                    retry_timeout=timedelta(seconds=read_bound(self.timeout, self.retries,
                                                               self.backoff)))

    def _locate(self, url: str) -> Tuple[object, str]:
        """(the obstore client of ``url``'s scheme and host, the path within it)."""
        parts = urlsplit(url)
        base = f'{parts.scheme}://{parts.netloc}' + ('/' if parts.scheme == 'file' else '')
        with self._lock:
            return self._client(url, base), parts.path.lstrip('/')

    def _client(self, url: str, base: str):
        """The client of ``base`` (opened once; under the lock)."""
        if base not in self._stores:
            try:
                from obstore.store import from_url
            except ImportError as exc:
                raise ImportError('remote label stores read through obstore: pip install '
                                  '"mmgrasp[remote]"') from exc
            scheme = urlsplit(base).scheme
            unknown = unknown_store_keys(scheme, self.storage_options)
            if unknown:  # obstore would refuse them, panic on them, or (file://) ignore them
                takes_none = not STORE_KEYS.get(SCHEME_KEYS.get(scheme.lower(), ''), True)
                raise RemoteReadError(url, None, None, f'cannot open a client for {base}: '
                                      f'storage_options {unknown} are no obstore configuration '
                                      f'keys of {scheme}:// ' + (
                                          '(it takes none: drop them)' if takes_none
                                          else '(see mmgrasp.storage.secrets)'))
            options = dict(client_options=self._client_options(),
                           retry_config=self._retry_config())
            if not base.startswith(('http://', 'https://', 'file://')):
                options.update(self.storage_options)  # the store's configuration keys
            try:
                self._stores[base] = from_url(base, **options)
            except Exception as exc:  # noqa: BLE001 - unknown scheme, bad configuration key
                raise RemoteReadError(url, None, None, f'cannot open a client for {base} '
                                      f'({_condensed(exc)})') from exc
        return self._stores[base]

    def _error(self, url, start, stop, exc: BaseException) -> RemoteReadError:
        from obstore import exceptions as obx
        text = _condensed(exc)
        if isinstance(exc, FileNotFoundError) or isinstance(exc, obx.NotFoundError):
            return RemoteNotFound(url, start, stop, f'not found ({text})')
        if isinstance(exc, obx.PreconditionError):
            return RemoteFileChanged(url, start, stop, f'the file was replaced on the server '
                                     f'(its ETag no longer matches the one this store was read '
                                     f'with: {text})')
        if isinstance(exc, (obx.PermissionDeniedError, obx.UnauthenticatedError)):
            return RemoteReadError(url, start, stop, f'access refused: the credentials from the '
                                   f'environment / the library\'s credential chain are wrong or '
                                   f'lack read access ({text})')
        return RemoteReadError(url, start, stop, f'{text} [timeout {self.timeout:g} s, '
                               f'{self.retries} retries]')

    def read(self, url: str, start: int, stop: int, size: int, tag: Optional[str]) -> Fetched:
        """Bytes [start, stop) of a file of ``size`` bytes whose version is ``tag`` (None when
        not known yet): one GET."""
        import obstore
        store, path = self._locate(url)
        options = dict(range=(start, stop))
        if tag:
            options['if_match'] = tag
        begin = time.monotonic()
        try:
            result = obstore.get(store, path, options=options)
            data = result.bytes()
        except Exception as exc:  # noqa: BLE001 - every transport error of every scheme
            error = self._error(url, start, stop, exc)
            error.elapsed = time.monotonic() - begin
            raise error from exc
        meta = result.meta
        got_tag = meta.get('e_tag') or ''
        if tag and got_tag != tag:  # a server that ignores If-Match
            raise RemoteFileChanged(url, start, stop, f'the file was replaced on the server '
                                    f'(version {tag!r} became {got_tag!r})')
        if meta.get('size') is not None and int(meta['size']) != size:
            raise RemoteFileChanged(url, start, stop, f'the file has {meta["size"]} bytes on '
                                    f'the server, the store manifest says {size}')
        if tuple(result.range) != (start, stop) or len(data) != stop - start:
            raise RemoteReadError(url, start, stop, f'the server sent bytes {result.range} '
                                  f'({len(data)} bytes)')
        return Fetched(data, got_tag)

    def read_whole(self, url: str) -> bytes:
        """A whole small file (the store's manifest, CURRENT pointer)."""
        import obstore
        store, path = self._locate(url)
        try:
            return bytes(obstore.get(store, path).bytes())
        except Exception as exc:  # noqa: BLE001
            raise self._error(url, None, None, exc) from exc

    def write(self, url: str, data) -> str:
        """Upload ``data`` (bytes, or a local file's path) to ``url``; returns the ETag the
        store gave the new object."""
        import pathlib

        import obstore
        if urlsplit(url).scheme in ('http', 'https'):
            raise RemoteReadError(url, None, None, 'HTTP has no standard upload; publish to an '
                                  'object store (s3://, gs://, az://) or file:// and serve that '
                                  'over HTTP')
        store, path = self._locate(url)
        body = pathlib.Path(data) if isinstance(data, str) else data
        try:
            return obstore.put(store, path, body)['e_tag'] or ''
        except Exception as exc:  # noqa: BLE001
            raise self._error(url, None, None, exc) from exc


def open_source(url: str, timeout: float = 30.0, retries: int = 4, backoff: float = 0.1,
                storage_options: Optional[dict] = None) -> ObjectSource:
    """The source that reads ``url`` (any scheme obstore knows)."""
    return ObjectSource(timeout, retries, backoff, storage_options)
