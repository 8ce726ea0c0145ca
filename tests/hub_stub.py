"""A hub that behaves like the real one, offline: Parquet exports written into a local hub cache.

The hub is out of reach here, so tests publish each repo the way the hub serves it: the dataset viewer's
Parquet export on the revision ``refs/convert/parquet`` (``<config>/<split>/0000.parquet``, written by
``datasets`` with the repo's real features), in the ``huggingface_hub`` cache layout (``refs/<revision>``
holding the commit, ``snapshots/<commit>/<file>``), with ``HF_HUB_OFFLINE`` on. The code under test then
runs its real calls (``HfApi.list_repo_tree`` fails offline, ``hf_hub_download`` answers from the cache,
``datasets.load_dataset("parquet", ...)`` reads the files); nothing of the library is replaced.

Rows are built from the local files by the transformations the real repos apply (the loading scripts
quoted in each builder): PTB lines stripped; Gigaword lines stripped and ``<unk>`` rewritten to ``UNK`` in
train and validation; enwik8-raw one row holding the file read as UTF-8 text; SemEval ``aspectTerms`` a
list of dicts with string offsets.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from lit_rnncells.data import hub

COMMIT = "c0ffee" + "0" * 34
MAIN_COMMIT = "badc0de" + "0" * 33


def reset_sessions() -> None:
    """Older huggingface_hub (< 1.0) caches its HTTP session, offline or not, when first used: start anew."""
    from huggingface_hub import utils

    if hasattr(utils, "reset_sessions"):
        utils.reset_sessions()


class HubStub:
    """A local hub cache the code reads through the real ``huggingface_hub`` / ``datasets`` calls."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import datasets
        from huggingface_hub import constants

        self.cache, self.monkeypatch = root / "hub", monkeypatch
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(self.cache))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets at import
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "datasets")
        reset_sessions()

    def publish(self, repo: str, config: str, splits: Dict[str, "datasets.Dataset"], *, release: bool = False,  # noqa: F821
                script: Optional[str] = None, commit: str = COMMIT) -> Path:
        """Write ``splits`` as ``repo``'s Parquet export of ``config`` at ``commit`` (the branch
        ``refs/convert/parquet`` points to it). ``release``: the rows are the whole release, so the code's
        known row counts must hold; otherwise (a sample) the counts expected are this copy's. ``script``: the
        repo's main revision holds a loading script of that name (what datasets >= 4 refuses to run)."""
        storage = self.cache / f"datasets--{repo.replace('/', '--')}"
        ref = storage / "refs" / hub.PARQUET_REVISION
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
        for split, data in splits.items():
            path = storage / "snapshots" / commit / config / split / "0000.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            data.to_parquet(str(path))
        if script is not None:
            (storage / "refs" / "main").write_text(MAIN_COMMIT)
            main = storage / "snapshots" / MAIN_COMMIT
            main.mkdir(parents=True, exist_ok=True)
            (main / script).write_text("import datasets\n# a loading script: datasets >= 4 raises on it\n")
        if not release:
            self.monkeypatch.setitem(hub.ROWS, (repo, config), {s: len(d) for s, d in splits.items()})
        return storage


def dataset(rows: Dict[str, list], features: "datasets.Features") -> "datasets.Dataset":  # noqa: F821
    import datasets

    return datasets.Dataset.from_dict(rows, features=features)


# --- builders: local files → the rows the real repo serves --------------------------------------------
def ptb_rows(lines: Sequence[str]) -> "datasets.Dataset":  # noqa: F821
    """ptb_text_only.py: ``for line in f: yield {"sentence": line.strip()}`` over ``ptb.<split>.txt``."""
    import datasets

    return dataset({"sentence": [line.strip() for line in lines]}, datasets.Features({"sentence": datasets.Value("string")}))


def text_rows(texts: Sequence[str]) -> "datasets.Dataset":  # noqa: F821
    """One ``text`` column (enwik8-raw: ``{"text": open(path, encoding="utf-8").read()}``; text8: a row a split)."""
    import datasets

    return dataset({"text": list(texts)}, datasets.Features({"text": datasets.Value("string")}))


def gigaword_rows(articles: Sequence[str], titles: Sequence[str], replace_unk: bool) -> "datasets.Dataset":  # noqa: F821
    """gigaword.py: lines stripped; in train and validation ``<unk>`` rewritten to ``UNK``."""
    import datasets

    fix = (lambda t: t.strip().replace("<unk>", "UNK")) if replace_unk else (lambda t: t.strip())
    return dataset({"document": [fix(a) for a in articles], "summary": [fix(t) for t in titles]},
                   datasets.Features({"document": datasets.Value("string"), "summary": datasets.Value("string")}))


def pair_rows(source: Sequence[str], target: Sequence[str], columns: Sequence[str]) -> "datasets.Dataset":  # noqa: F821
    """Multi30k (``en``, ``de`` columns, lines as they are)."""
    import datasets

    return dataset({columns[0]: list(source), columns[1]: list(target)},
                   datasets.Features({c: datasets.Value("string") for c in columns}))


def translation_rows(de: Sequence[str], en: Sequence[str]) -> "datasets.Dataset":  # noqa: F821
    """iwslt2017.py: ``{"translation": {"de": ..., "en": ...}}`` (a ``datasets.Translation`` feature)."""
    import datasets

    return dataset({"translation": [{"de": d, "en": e} for d, e in zip(de, en)]},
                   datasets.Features({"translation": datasets.Translation(languages=["de", "en"])}))


def semeval_rows(sentences: Sequence["semeval.Sentence"]) -> "datasets.Dataset":  # noqa: F821
    """SemEval2014Task4: ``aspectTerms`` a list of {term, polarity, from, to} (offsets as strings)."""
    import datasets

    term = {k: datasets.Value("string") for k in ("term", "polarity", "from", "to")}
    features = datasets.Features({"sentenceId": datasets.Value("string"), "text": datasets.Value("string"),
                                  "aspectTerms": [term], "aspectCategories": [
                                      {"category": datasets.Value("string"), "polarity": datasets.Value("string")}]})
    return dataset({"sentenceId": [s.id for s in sentences], "text": [s.text for s in sentences],
                    "aspectTerms": [[{"term": a.term, "polarity": a.polarity, "from": str(a.start), "to": str(a.end)}
                                     for a in s.aspects] for s in sentences],
                    "aspectCategories": [[] for _ in sentences]}, features)


def imdb_rows(reviews: Sequence[tuple]) -> "datasets.Dataset":  # noqa: F821
    """stanfordnlp/imdb: ``text``, ``label`` (ClassLabel neg / pos)."""
    import datasets

    return dataset({"text": [t for _, t in reviews], "label": [label for label, _ in reviews]},
                   datasets.Features({"text": datasets.Value("string"),
                                      "label": datasets.ClassLabel(names=["neg", "pos"])}))


def sst2_rows(pairs: Sequence[tuple]) -> "datasets.Dataset":  # noqa: F821
    """stanfordnlp/sst2 (GLUE SST-2): ``idx``, ``sentence``, ``label`` (test labels hidden as -1)."""
    import datasets

    return dataset({"idx": list(range(len(pairs))), "sentence": [s for s, _ in pairs], "label": [l for _, l in pairs]},
                   datasets.Features({"idx": datasets.Value("int32"), "sentence": datasets.Value("string"),
                                      "label": datasets.ClassLabel(names=["negative", "positive"])}))


class LoadDatasetSpy:
    """Wraps (does not replace) ``datasets.load_dataset``: records the first argument of every call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import datasets

        self.calls: List[str] = []
        real = datasets.load_dataset

        def spy(path, *args, **kwargs):
            self.calls.append(path)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(datasets, "load_dataset", spy)


class LiveHub:
    """A hub over HTTP on localhost (``HF_ENDPOINT``), for the online path: the tree API
    (``/api/datasets/<repo>/tree/<revision>/<path>``) and file resolution (``/datasets/<repo>/resolve/
    <revision>/<file>``, HEAD and GET with the ``X-Repo-Commit`` / ``ETag`` headers), answering missing
    repos, revisions and paths with the hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``,
    ``EntryNotFound``) so ``huggingface_hub`` raises what it raises against the real hub."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import datasets
        from huggingface_hub import constants

        self.repos: Dict[str, Dict[str, Dict[str, bytes]]] = {}  # repo → revision → path → bytes
        self.listed_size: Dict[str, int] = {}  # path → a size the tree API states instead of the real one
        hub_self = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _answer(self, body: bytes, code: int = 200, headers: Optional[Dict[str, str]] = None) -> None:
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, code: str) -> None:
                self._answer(b"{}", 404, {"X-Error-Code": code, "Content-Type": "application/json"})

            def _route(self) -> None:
                import hashlib
                import json
                from urllib.parse import unquote, urlparse

                parts = urlparse(self.path).path.strip("/").split("/")
                api = parts[0] == "api"
                parts = parts[2:] if api else parts[1:]  # drop "api/datasets" or "datasets"
                repo, verb, revision, rest = "/".join(parts[:2]), parts[2], unquote(parts[3]), "/".join(parts[4:])
                rest = unquote(rest)
                if repo not in hub_self.repos:
                    return self._error("RepoNotFound")
                if revision not in hub_self.repos[repo]:
                    return self._error("RevisionNotFound")
                files = hub_self.repos[repo][revision]
                commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
                if api and verb == "tree":
                    inside = sorted(p for p in files if p.startswith(rest + "/"))
                    if not inside:
                        return self._error("EntryNotFound")
                    listing = [{"type": "file", "oid": hashlib.sha1(files[p]).hexdigest(), "path": p,
                                "size": hub_self.listed_size.get(p, len(files[p]))} for p in inside]
                    return self._answer(json.dumps(listing).encode(), headers={"Content-Type": "application/json"})
                if verb == "resolve" and rest in files:
                    return self._answer(files[rest], headers={"X-Repo-Commit": commit,
                                                              "ETag": f'"{hashlib.sha1(files[rest]).hexdigest()}"'})
                return self._error("EntryNotFound")

            do_GET = do_HEAD = _route

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{self.server.server_address[1]}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "datasets")
        reset_sessions()
        self.monkeypatch = monkeypatch

    def publish(self, repo: str, config: str, splits: Dict[str, "datasets.Dataset"],  # noqa: F821
                revision: str = hub.PARQUET_REVISION) -> None:
        """``splits`` as ``repo``'s Parquet export of ``config`` on ``revision``; the counts expected are
        this copy's."""
        import io

        files = self.repos.setdefault(repo, {}).setdefault(revision, {})
        for split, data in splits.items():
            buffer = io.BytesIO()
            data.to_parquet(buffer)
            files[f"{config}/{split}/0000.parquet"] = buffer.getvalue()
        self.monkeypatch.setitem(hub.ROWS, (repo, config), {s: len(d) for s, d in splits.items()})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        reset_sessions()
