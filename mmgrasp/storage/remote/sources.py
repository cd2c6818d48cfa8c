"""Bytes of a remote file by range, with the version they belong to.

Two kinds of source, chosen by the URL's scheme:

- ``http://`` / ``https://``: :class:`HTTPSource`, the standard library's ``http.client`` with
  one kept-alive connection per thread and host. Every ranged answer is checked on its own: status
  206, ``Content-Range`` equal to the range asked for and to the file size the store's manifest
  gives, and the ``ETag`` (sent as ``If-Match`` when strong) equal to the one the first answer
  carried — so a file replaced on the server is noticed in the very answer that would mix two
  versions, without a metadata request per range. (fsspec's HTTP file system needs aiohttp and
  does not show the answer's headers, so it could not make these checks.)
- every other fsspec protocol (``file://``, ``memory://``, ``s3://``, ``gs://``, …):
  :class:`FsspecSource`. A range is read with ``cat_file`` and the file's info (size and
  ETag/mtime) is read after it: a version tag that moved means the bytes may mix two versions.

Errors are :class:`RemoteReadError` naming the URL and the byte range; ``retryable`` says whether
trying again can help (connection resets, timeouts, 5xx, short reads) or not (missing file,
:class:`RemoteFileChanged`).
"""
import http.client
import re
import socket
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Tuple
from urllib.parse import urlsplit

_URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*://')


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(path))


def join_url(root: str, *parts: str) -> str:
    return '/'.join([root.rstrip('/')] + [p.strip('/') for p in parts])


class RemoteReadError(OSError):
    """A remote read that failed; names the URL and the byte range ([start, stop))."""

    def __init__(self, url: str, start: Optional[int], stop: Optional[int], reason: str,
                 retryable: bool = False):
        where = url if start is None else f'{url} bytes {start}-{stop - 1}'
        super().__init__(f'{where}: {reason}')
        self.url, self.start, self.stop, self.reason = url, start, stop, reason
        self.retryable = retryable


class RemoteFileChanged(RemoteReadError):
    """The remote file is not the version this run read so far (size or version tag moved)."""


@dataclass(frozen=True)
class Fetched:
    data: bytes
    tag: str  # ETag / mtime of the version the bytes belong to; '' when the source has none


class HTTPSource:
    """Ranged GETs over kept-alive ``http.client`` connections (one per thread and host)."""

    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self._local = threading.local()

    def _connection(self, url: str) -> Tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        connections: Dict[tuple, http.client.HTTPConnection] = self._local.__dict__.setdefault(
            'connections', {})
        key = (parts.scheme, parts.netloc)
        if key not in connections:
            cls = http.client.HTTPSConnection if parts.scheme == 'https' else \
                http.client.HTTPConnection
            connections[key] = cls(parts.netloc, timeout=self.timeout)
        target = parts.path + (f'?{parts.query}' if parts.query else '')
        return connections[key], target

    def _drop(self, url: str) -> None:
        parts = urlsplit(url)
        connection = self._local.__dict__.get('connections', {}).pop(
            (parts.scheme, parts.netloc), None)
        if connection is not None:
            connection.close()

    def _request(self, url: str, headers: dict, start: Optional[int], stop: Optional[int]):
        """(status, headers, body) of one GET; connection trouble becomes a retryable error."""
        connection, target = self._connection(url)
        try:
            connection.request('GET', target, headers=headers)
            response = connection.getresponse()
            body = response.read()
            return response.status, response, body
        except http.client.IncompleteRead as exc:
            self._drop(url)
            raise RemoteReadError(url, start, stop, f'short read: {len(exc.partial)} bytes '
                                  f'arrived, the answer announced more', retryable=True) from exc
        except (socket.timeout, TimeoutError) as exc:
            self._drop(url)
            raise RemoteReadError(url, start, stop, f'no answer within {self.timeout} s',
                                  retryable=True) from exc
        except (OSError, http.client.HTTPException) as exc:
            self._drop(url)
            raise RemoteReadError(url, start, stop, f'connection failed ({exc!r})',
                                  retryable=True) from exc

    @staticmethod
    def _status_error(url, start, stop, status: int, body: bytes) -> RemoteReadError:
        text = body[:200].decode('utf-8', 'replace').strip()
        if status == 404:
            return RemoteReadError(url, start, stop, 'not found (HTTP 404)')
        if status == 412:
            return RemoteFileChanged(url, start, stop, 'the file was replaced on the server '
                                     '(HTTP 412: its ETag no longer matches)')
        return RemoteReadError(url, start, stop, f'HTTP {status} {text}',
                               retryable=status >= 500 or status in (408, 429))

    def read(self, url: str, start: int, stop: int, size: int, tag: Optional[str]) -> Fetched:
        """Bytes [start, stop) of a file of ``size`` bytes whose version tag is ``tag`` (None
        when not known yet)."""
        headers = {'Range': f'bytes={start}-{stop - 1}'}
        if tag and not tag.startswith('W/'):
            headers['If-Match'] = tag
        status, response, body = self._request(url, headers, start, stop)
        if status not in (200, 206):
            raise self._status_error(url, start, stop, status, body)
        got_tag = response.getheader('ETag') or response.getheader('Last-Modified') or ''
        if tag is not None and got_tag != tag:
            raise RemoteFileChanged(url, start, stop, f'the file was replaced on the server '
                                    f'(version {tag!r} became {got_tag!r})')
        if status == 200:  # the server ignored the range: only a whole-file ask can use it
            if (start, stop) != (0, size) or len(body) != size:
                raise RemoteReadError(url, start, stop, 'the server ignores Range requests '
                                      f'(HTTP 200 with {len(body)} bytes)')
        else:
            match = re.fullmatch(r'bytes (\d+)-(\d+)/(\d+|\*)',
                                 response.getheader('Content-Range') or '')
            if match is None:
                raise RemoteReadError(url, start, stop, 'HTTP 206 without a valid Content-Range',
                                      retryable=True)
            first, last, total = match.groups()
            if total != '*' and int(total) != size:
                raise RemoteFileChanged(url, start, stop, f'the file has {total} bytes on the '
                                        f'server, the store manifest says {size}')
            if (int(first), int(last)) != (start, stop - 1):
                raise RemoteReadError(url, start, stop, f'the server sent bytes {first}-{last}')
        if len(body) != stop - start:
            raise RemoteReadError(url, start, stop, f'short read: {len(body)} of '
                                  f'{stop - start} bytes', retryable=True)
        return Fetched(body, got_tag)

    def read_whole(self, url: str) -> bytes:
        """A whole small file (the store's manifest, CURRENT pointer)."""
        status, _, body = self._request(url, {}, None, None)
        if status != 200:
            raise self._status_error(url, None, None, status, body)
        return body

    def exists(self, url: str) -> bool:
        status, _, _ = self._request(url, {'Range': 'bytes=0-0'}, None, None)
        return status in (200, 206)

    def write(self, url: str, local_path: str) -> None:
        raise RemoteReadError(url, None, None, 'HTTP has no standard upload; publish to a '
                              'protocol fsspec can write (file://, s3://, gs://, memory://) '
                              'and serve that over HTTP')

    write_bytes = write


class FsspecSource:
    """Any fsspec protocol: ``cat_file`` ranges, the file's info read after each range."""

    def __init__(self, protocol: str, storage_options: Optional[dict] = None):
        try:
            import fsspec
        except ImportError as exc:  # pragma: no cover - fsspec comes with torch
            raise ImportError('remote label stores need fsspec: pip install "mmgrasp[remote]"'
                              ) from exc
        try:
            self.fs = fsspec.filesystem(protocol, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            raise ImportError(f'no fsspec file system for {protocol}:// ({exc}); install its '
                              f'package, e.g. pip install "mmgrasp[s3]" or "mmgrasp[gcs]"'
                              ) from exc

    def _tag(self, url: str, start, stop, size: int) -> str:
        try:
            info = self.fs.info(url)
        except FileNotFoundError as exc:
            raise RemoteReadError(url, start, stop, 'not found') from exc
        except Exception as exc:  # noqa: BLE001 - any transport error of any protocol
            raise RemoteReadError(url, start, stop, f'info failed ({exc!r})',
                                  retryable=True) from exc
        if info.get('size') is not None and int(info['size']) != size:
            raise RemoteFileChanged(url, start, stop, f'the file has {info["size"]} bytes, '
                                    f'the store manifest says {size}')
        for key in ('ETag', 'etag', 'md5Hash', 'mtime', 'LastModified', 'last_modified',
                    'updated', 'created'):
            if info.get(key) is not None:
                return f'{key}={info[key]}'
        return ''

    def read(self, url: str, start: int, stop: int, size: int, tag: Optional[str]) -> Fetched:
        try:
            data = self.fs.cat_file(url, start=start, end=stop)
        except FileNotFoundError as exc:
            raise RemoteReadError(url, start, stop, 'not found') from exc
        except Exception as exc:  # noqa: BLE001
            raise RemoteReadError(url, start, stop, f'read failed ({exc!r})',
                                  retryable=True) from exc
        got_tag = self._tag(url, start, stop, size)
        if tag is not None and got_tag != tag:
            raise RemoteFileChanged(url, start, stop, f'the file was replaced (version {tag!r} '
                                    f'became {got_tag!r})')
        if len(data) != stop - start:
            raise RemoteReadError(url, start, stop, f'short read: {len(data)} of '
                                  f'{stop - start} bytes', retryable=True)
        return Fetched(bytes(data), got_tag)

    def read_whole(self, url: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(url))
        except FileNotFoundError as exc:
            raise RemoteReadError(url, None, None, 'not found') from exc
        except Exception as exc:  # noqa: BLE001
            raise RemoteReadError(url, None, None, f'read failed ({exc!r})',
                                  retryable=True) from exc

    def exists(self, url: str) -> bool:
        return self.fs.exists(url)

    def write(self, url: str, local_path: str) -> None:
        """Upload a local file (the parent folder is made where the protocol has folders)."""
        parent = url.rsplit('/', 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        self.fs.put_file(local_path, url)

    def write_bytes(self, url: str, data: bytes) -> None:
        parent = url.rsplit('/', 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        self.fs.pipe_file(url, data)


def open_source(url: str, timeout: float = 30.0, storage_options: Optional[dict] = None):
    """The source that reads ``url``'s scheme."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ('http', 'https'):
        return HTTPSource(timeout=timeout)
    return FsspecSource(scheme, storage_options)
