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
from typing import Callable, Optional

from .builders import PrepareError  # kept importable from here
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
        raise PrepareError(f"{problem}; delete {path} and run prepare again, or fetch it from another --mirror")


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
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # the part is already whole
            response = None
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
            log(f"{'resuming' if resumed else 'downloading'} {url}" + (f" at byte {offset:,}" if resumed else ""))
            with part.open("ab" if resumed else "wb") as out:
                out.write(head)
                shutil.copyfileobj(response, out, CHUNK)
    problem = mismatch(part, source)
    if problem:
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
    if not path.is_file():
        raise PrepareError(f"{path} does not exist; put {source.filename} ({source.url}) in --source")
    verify(path, source)
    return path
