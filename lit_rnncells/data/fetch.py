"""Downloading one release file: resumable, verified, and never an HTML page saved as data.

* The file is written to ``<name>.part`` and renamed when complete and verified; a later run sends
  ``Range: bytes=<size of the .part>-`` and appends (a server that ignores ranges sends the whole file,
  which then replaces the part).
* ``mirror``: a base URL (``http://``, ``https://`` or ``file://``) that holds the file under its own
  name, used instead of the official URL (clusters often have an internal mirror).
* A response that is an HTML page (``Content-Type: text/html`` or a body starting with ``<!doctype html``
  / ``<html``) is refused: Google Drive's "can't scan for viruses" page and most error pages are HTML.
* Size, sha256 and MD5 are checked where :mod:`.known` has them.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

from .builders import DOWNLOADS, PrepareError, redo  # PrepareError kept importable from here
from .known import Source

CHUNK = 1 << 20
USER_AGENT = "lit_rnncells-prepare (python urllib)"


def source_url(source: Source, mirror: Optional[str]) -> str:
    return f"{mirror.rstrip('/')}/{source.filename}" if mirror else source.url


def _looks_like_html(head: bytes) -> bool:
    start = head.lstrip()[:15].lower()
    return start.startswith(b"<!doctype html") or start.startswith(b"<html")


def mismatch(path: Path, source: Source) -> Optional[str]:
    """How ``path`` differs from the size / checksums known for ``source`` (``None``: it does not)."""
    size = path.stat().st_size
    if source.size is not None and size != source.size:
        return f"{source.filename} has {size:,} bytes, the release {source.size:,} ({source.provenance})"
    if source.sha256 is None and source.md5 is None:
        return None
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            sha.update(block)
            md5.update(block)
    for name, expected, got in (("sha256", source.sha256, sha.hexdigest()), ("md5", source.md5, md5.hexdigest())):
        if expected is not None and got != expected:
            return f"{source.filename} has {name} {got}, the release {expected} ({source.provenance})"
    return None


def verify(path: Path, source: Source) -> None:
    """Raise :class:`PrepareError` if ``path`` differs from what is known of ``source``."""
    problem = mismatch(path, source)
    if problem:
        raise PrepareError(f"{problem}; {redo(path)}")


def _served_size(headers: Any, resumed: bool) -> Optional[int]:
    """The whole size of the server's copy, from ``Content-Range: bytes a-b/<size>`` (a resumed download) or
    ``Content-Length`` (a whole one); ``None`` when the server does not say."""
    try:
        if resumed:
            total = (headers.get("Content-Range") or "").rpartition("/")[2]
            return int(total) if total.isdigit() else None
        length = headers.get("Content-Length") if headers else None
        return int(length) if length is not None else None
    except (TypeError, ValueError):
        return None


def _short_copy(part: Path, source: Source, served: Optional[int]) -> Optional[str]:
    """``the copy of <file> has N bytes, the release M``, when the part holds all the server has and that is less
    than the release (a truncated copy on a mirror: resuming cannot complete it)."""
    size = part.stat().st_size
    if source.size is None or served is None or size < served or served >= source.size:
        return None
    return f"the copy of {source.filename} has {served:,} bytes, the release {source.size:,} ({source.provenance})"


def download(source: Source, folder: Path, mirror: Optional[str] = None,
             log: Callable[[str], None] = print, timeout: float = 60.0) -> Path:
    """``folder/<source.filename>``, downloaded (resuming a ``.part``) and verified."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.filename
    if target.is_file():
        verify(target, source)
        return target
    url = source_url(source, mirror)
    part = folder / (source.filename + ".part")
    offset = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    served: Optional[int] = None  # the size of the server's copy, where it says
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # the server has no bytes past the part: it is as long as the server's copy
            response, served = None, offset
        else:
            raise PrepareError(f"{url} answered HTTP {err.code} ({err.reason}); check the URL or --mirror, or "
                               f"download {source.filename} yourself and pass its folder as --source") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise PrepareError(f"could not reach {url} ({reason}); run prepare where there is internet (a login "
                           f"node), pass --mirror, or download {source.filename} and pass its folder as "
                           "--source") from None
    if response is not None:
        with response:
            status = getattr(response, "status", 200) or 200
            kind = response.headers.get("Content-Type", "") if response.headers else ""
            head = response.read(CHUNK)
            if ("text/html" in kind.lower() or _looks_like_html(head)) and not source.filename.endswith(".html"):
                raise PrepareError(f"{url} returned an HTML page, not {source.filename} (an error page, or Google "
                                   "Drive's download-confirmation page); download the file in a browser and pass "
                                   "its folder as --source, or use --mirror")
            resumed = offset and status == 206
            served = _served_size(response.headers, resumed)
            log(f"{'resuming' if resumed else 'downloading'} {url}" + (f" at byte {offset:,}" if resumed else ""))
            with part.open("ab" if resumed else "wb") as out:
                out.write(head)
                shutil.copyfileobj(response, out, CHUNK)
    problem = mismatch(part, source)
    if problem:
        short = _short_copy(part, source, served)
        if short:
            part.unlink()  # resuming cannot help: the server has no more bytes
            raise PrepareError(f"{short} at {url}; that copy is short (truncated): replace it on the mirror, or "
                               "fetch it from another --mirror (or without --mirror, from the official URL)")
        if source.size is None or part.stat().st_size >= source.size:
            part.unlink()  # complete but wrong: start afresh next time
            raise PrepareError(f"{problem}; the download from {url} was removed: run prepare again, or fetch it "
                               "from another --mirror")
        raise PrepareError(f"{problem}; the download from {url} stopped early: run prepare again to resume it")
    os.replace(part, target)
    return target


def from_source(source: Source, folder: Path) -> Path:
    """A release file the user downloaded: ``folder/<source.filename>``, verified."""
    path = folder / source.filename
    if folder.is_file():
        raise PrepareError(f"--source {folder} is a file; --source takes the folder that holds the release files: "
                           f"pass --source {folder.parent}")
    if not path.is_file():
        raise PrepareError(f"{path} does not exist; put {source.filename} ({source.url}) in --source")
    verify(path, source)
    return path
