"""Vocabularies, tokenization and the on-disk cache shared by the text DataModules.

A :class:`Vocabulary` knows its symbols, its level (``"char"`` or ``"word"``), its
unknown symbol and how text is written (PTB char writes a space as ``_``), so a
checkpoint that stores ``Vocabulary.state_dict()`` can tokenize prompts and render
samples on its own. Character corpora are encoded with NumPy (code points, one
``searchsorted``), so text8 and enwik8 (90M training characters) take seconds.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from ..utils.paths import check_output_folder
from . import hub

UNK = "<unk>"
EOS = "<eos>"  # line end of word-level corpora; character corpora keep "\n" as a symbol


class VocabularyMismatchError(ValueError):
    """The data's vocabulary differs from the one a checkpoint was trained with."""


class Vocabulary:
    """An ordered symbol table fitted on the training split only.

    Args:
        symbols: the symbols, id = position.
        level: ``"char"`` (each character is a token) or ``"word"`` (whitespace-separated words,
            ``<eos>`` at each line end).
        unk: the symbol unknown tokens map to, or ``None`` if the vocabulary has none.
        space: how a space is written in the corpus (``"_"`` for PTB char, ``" "`` otherwise).
    """

    def __init__(self, symbols: Sequence[str], level: str = "char", unk: Optional[str] = None,
                 space: str = " ") -> None:
        if level not in ("char", "word"):
            raise ValueError(f"level must be 'char' or 'word', got {level!r}.")
        self.symbols = list(symbols)
        self.stoi = {s: i for i, s in enumerate(self.symbols)}
        if len(self.stoi) != len(self.symbols):
            raise ValueError("Vocabulary symbols must be distinct.")
        if unk is not None and unk not in self.stoi:
            raise ValueError(f"The unknown symbol {unk!r} is not in the vocabulary.")
        self.level, self.unk, self.space = level, unk, space

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.state_dict() == other.state_dict()

    @property
    def unk_id(self) -> Optional[int]:
        return None if self.unk is None else self.stoi[self.unk]

    def state_dict(self) -> Dict[str, Any]:
        return {"symbols": list(self.symbols), "level": self.level, "unk": self.unk, "space": self.space}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> "Vocabulary":
        return cls(state["symbols"], state["level"], state.get("unk"), state.get("space", " "))

    def with_unk(self) -> "Vocabulary":
        """This vocabulary, with ``<unk>`` appended if it has no unknown symbol yet."""
        if self.unk is not None:
            return self
        if UNK in self.stoi:
            return Vocabulary(self.symbols, self.level, UNK, self.space)
        return Vocabulary(self.symbols + [UNK], self.level, UNK, self.space)

    # --- text <-> tokens -------------------------------------------------------------
    def tokenize(self, text: str) -> List[str]:
        """Split user text (a prompt) into this vocabulary's tokens."""
        if self.level == "char":
            return list(text.replace(" ", self.space) if self.space != " " else text)
        tokens: List[str] = []
        for i, line in enumerate(text.split("\n")):
            if i:
                tokens.append(EOS)
            tokens.extend(line.split())
        return tokens

    def detokenize(self, tokens: Iterable[str]) -> str:
        """Render tokens as readable text (PTB char ``_`` → space, ``<eos>`` → newline)."""
        if self.level == "char":
            text = "".join(tokens)
            return text.replace(self.space, " ") if self.space != " " else text
        return " ".join(tokens).replace(f" {EOS} ", "\n").replace(EOS, "\n")

    def encode(self, tokens: Sequence[str]) -> Tensor:
        """Token ids; unknown tokens map to ``unk`` or raise one clear error if there is none."""
        unk = self.unk_id
        missing = sorted({t for t in tokens if t not in self.stoi})
        if missing and unk is None:
            raise ValueError(f"Symbols not in the vocabulary and no {UNK} to map them to: {missing[:10]}; "
                             "use only symbols of the training corpus.")
        return torch.tensor([self.stoi.get(t, unk) for t in tokens], dtype=torch.long)

    def decode(self, ids: Iterable[int]) -> List[str]:
        return [self.symbols[int(i)] for i in ids]


# --- fitting and encoding whole corpora ---------------------------------------------
def word_tokens(text: str) -> List[str]:
    """Words of every non-blank line, each line followed by ``<eos>`` (Mikolov / AWD-LSTM style)."""
    out: List[str] = []
    for line in text.split("\n"):
        words = line.split()
        if words:
            out.extend(words)
            out.append(EOS)
    return out


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def fit_vocabulary(train_text: str, level: str, space: str = " ") -> Vocabulary:
    """The vocabulary of the training text: characters sorted by code point, or words by
    decreasing frequency (ties alphabetical). A word corpus that already contains ``<unk>``
    (PTB) uses it as its unknown symbol."""
    if level == "char":
        symbols = [chr(int(c)) for c in np.unique(_codes(train_text))]
        return Vocabulary(symbols, "char", None, space)
    counts = Counter(word_tokens(train_text))
    symbols = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return Vocabulary(symbols, "word", UNK if UNK in counts else None, space)


def count_unknown(text: str, vocab: Vocabulary) -> int:
    """How many tokens of ``text`` are not in ``vocab``."""
    if vocab.level == "char":
        known = np.array(sorted(ord(s) for s in vocab.symbols if len(s) == 1), dtype=np.uint32)
        codes = _codes(text)
        return int((~np.isin(codes, known)).sum())
    return sum(1 for t in word_tokens(text) if t not in vocab.stoi)


def encode_text(text: str, vocab: Vocabulary) -> Tensor:
    """A whole split as a 1-D ``int32`` tensor of ids (unknown tokens → ``vocab.unk``)."""
    if vocab.level == "word":
        return vocab.encode(word_tokens(text)).to(torch.int32)
    chars = [(ord(s), i) for i, s in enumerate(vocab.symbols) if len(s) == 1]
    table = np.array(sorted(chars), dtype=np.int64).reshape(-1, 2)
    codes = _codes(text).astype(np.int64)
    pos = np.searchsorted(table[:, 0], codes).clip(max=len(table) - 1)
    ids = table[pos, 1]
    unknown = table[pos, 0] != codes
    if unknown.any():
        if vocab.unk_id is None:
            raise ValueError(f"{int(unknown.sum())} characters are not in the vocabulary and it has no {UNK}.")
        ids = np.where(unknown, vocab.unk_id, ids)
    return torch.from_numpy(ids.astype(np.int32))


def build_corpus(texts: Mapping[str, str], level: str, space: str = " ") -> Dict[str, Any]:
    """Fit the vocabulary on ``texts["train"]`` and encode every split.

    Unknown symbols in the other splits are counted; if there are any, the
    vocabulary gains an explicit ``<unk>`` (unless it has one, like PTB word) and
    they map to it, with a warning naming the count. Empty splits fail here.
    """
    for split, text in texts.items():
        if not text.strip():
            raise ValueError(f"The {split} split is empty; check the corpus file or hub dataset for that split.")
    vocab = fit_vocabulary(texts["train"], level, space)
    unknown = {s: count_unknown(t, vocab) for s, t in texts.items() if s != "train"}
    if any(unknown.values()):
        if vocab.unk is None:
            warnings.warn(f"Symbols unseen in training map to an added {UNK}: {unknown} tokens per split.",
                          stacklevel=2)
        vocab = vocab.with_unk()
    return {"vocab": vocab.state_dict(), "unknown": unknown,
            **{split: encode_text(text, vocab) for split, text in texts.items()}}


# --- where data comes from ------------------------------------------------------------
DATA_ENV = "LIT_RNNCELLS_DATA"


def local_or_hub(folder: Optional[str], hub_id: Optional[str]) -> Optional[str]:
    """The default ``data_dir`` of a dataset: ``$LIT_RNNCELLS_DATA/<folder>`` when ``LIT_RNNCELLS_DATA`` is
    set, else the hub id (``None`` if the dataset has neither).

    A set ``LIT_RNNCELLS_DATA`` means "use local files": a folder missing there is reported at once, naming
    the path and what it should hold, rather than falling back to a hub download that fails offline after
    half a minute. To use the hub anyway, pass its id as ``data_dir``."""
    root = os.environ.get(DATA_ENV)
    if root and folder is not None:
        return str(Path(root).expanduser() / folder)
    return hub_id


def split_files(folder: Path, names: Mapping[str, str], corpus: str, files: str) -> Dict[str, Path]:
    """``{split: folder / name}`` for a corpus distributed as one file per split (``names``: split to file
    name), each file checked to exist; one clear error naming ``corpus`` and the ``files`` it needs (e.g.
    ``"official XML files"``) where ``folder`` is a file, is missing, or lacks one of them."""
    expected = sorted(names.values())
    if folder.is_file():
        raise NotADirectoryError(f"data_dir {str(folder)!r} is a file; for {corpus} it must be the folder holding "
                                 f"the {files} {expected}.")
    if not folder.is_dir():
        raise FileNotFoundError(f"{corpus} folder {str(folder)!r} does not exist{hub.owner_hint(str(folder))}; set "
                                f"data.init_args.data_dir to the folder holding the {files} {expected}.")
    paths = {split: folder / name for split, name in names.items()}
    for path in paths.values():
        if not path.is_file():
            raise FileNotFoundError(f"Missing {corpus} file {str(path)!r}; data_dir must hold the {files} "
                                    f"{expected}.")
    return paths


def is_hub_id(data_dir: str) -> bool:
    """``owner/name`` (or ``owner/name@revision``, a pinned hub revision) that is not a local path: nothing of
    that name exists, and neither does its first part (so a mistyped ``data/ptbb`` next to an existing
    ``data/`` is a missing local folder, not a hub id)."""
    path = Path(data_dir).expanduser()
    repo = data_dir.split("@", 1)[0]
    return (not path.exists() and repo.count("/") == 1 and not repo.startswith((".", "/", "~"))
            and not Path(repo.split("/")[0]).exists())


# --- cache ---------------------------------------------------------------------------
CACHE_ENV = "LIT_RNNCELLS_CACHE"
CACHE_FIX = f"set {CACHE_ENV} to a folder you can write to, or turn the cache off with --data.init_args.cache_dir ''"


def default_cache_dir() -> Path:
    """``$LIT_RNNCELLS_CACHE``, else ``~/.cache/lit_rnncells``; one that is (or is under) a file is one sentence."""
    given = os.environ.get(CACHE_ENV)
    if not given:
        return Path.home() / ".cache" / "lit_rnncells"
    try:
        return check_output_folder(given, CACHE_ENV)
    except NotADirectoryError as error:
        raise NotADirectoryError(f"{str(error).rpartition(';')[0]}; {CACHE_FIX}.") from None


def file_fingerprint(path: Path) -> Dict[str, Any]:
    """What identifies a local input file for the cache key: its path, size and mtime."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def cached(cache_dir: Optional[Path], key: Mapping[str, Any], build: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """``build()``'s result, stored under ``cache_dir`` by a hash of ``key`` (JSON-able).

    Writes go to a temporary file renamed into place, so DDP ranks building the same
    entry at once never read a half-written file. ``cache_dir=None`` disables the cache.
    """
    if cache_dir is None:
        return build()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    path = Path(cache_dir) / f"{key.get('name', 'corpus')}-{digest}.pt"
    if path.is_file():
        try:
            return torch.load(path, weights_only=True)  # plain tensors and containers: never runs code
        except Exception:  # a corrupt or unsafe entry is rebuilt
            pass
    result = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError as error:  # read-only, not a folder, a full disk: say which folder, not a traceback
        raise NotADirectoryError(f"Cannot write the cache folder {cache_dir} ({error.strerror or error}); "
                                 f"{CACHE_FIX}.") from None
    os.close(fd)
    torch.save(result, tmp)
    os.replace(tmp, path)
    return result
