"""Pretrained word vectors from a local GloVe or word2vec *text* file, kept only for a vocabulary.

Formats (both one word a line followed by its values, separated by single spaces):
- GloVe (Pennington et al. 2014): no header. Some GloVe files (840B) hold "words" with spaces
  in them, so a line is read as its last ``dim`` fields being the vector and the rest the word.
- word2vec text format (Mikolov et al. 2013, ``save_word2vec_format(binary=False)``): a first
  line ``<count> <dim>``.
``.gz`` files are read in place. The file is streamed: only the vocabulary's rows are parsed
and kept, so a 5 GB file needs memory for the vocabulary alone.
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor


class EmbeddingsFileError(ValueError):
    """An embeddings file that cannot be read as the expected vectors."""


@dataclass
class PretrainedVectors:
    """Rows of a pretrained embedding file for a vocabulary.

    ``vectors`` is ``(len(vocab), dim)`` float32 with zeros where a word has no vector;
    ``found`` (bool, ``(len(vocab),)``) marks the words that have one.
    """

    vectors: Tensor
    found: Tensor
    path: str

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    @property
    def num_found(self) -> int:
        return int(self.found.sum())

    @property
    def coverage(self) -> float:
        """Fraction of the vocabulary's words that have a vector."""
        return self.num_found / max(1, self.found.numel())

    def describe(self) -> str:
        """E.g. ``glove.6B.100d.txt covers 23,512 of 25,002 words (94.0%)``."""
        return (f"{Path(self.path).name} covers {self.num_found:,} of {self.found.numel():,} words "
                f"({100 * self.coverage:.1f}%)")


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")  # type: ignore[return-value]
    return open(path, "r", encoding="utf-8", errors="replace")


def _is_header(fields: List[str]) -> bool:
    return len(fields) == 2 and all(f.isdigit() for f in fields)


def iter_vectors(path: Union[str, Path], dim: int) -> Iterator[Tuple[int, str, List[str]]]:
    """Stream ``(line_number, word, value_fields)`` from an embeddings file whose vectors must have ``dim`` values.

    The file's own dimension is the header's (word2vec) or the first line's field count minus one (GloVe);
    a file whose dimension is not ``dim``, or a line with too few values, fails with one error naming the
    file and the line. Values are left as strings: parse only the rows you keep.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Embeddings file {str(path)!r} does not exist; set pretrained_embeddings to a "
                                "local GloVe or word2vec text file.")
    file_dim: Optional[int] = None
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip().split(" ")
            if fields == [""]:
                continue  # a blank line
            if number == 1 and _is_header(fields):
                file_dim = int(fields[1])
                if file_dim != dim:
                    raise EmbeddingsFileError(
                        f"{path}, line 1: the word2vec header declares {file_dim}-dimensional vectors but "
                        f"embedding_size is {dim}; set embedding_size to {file_dim} or use a {dim}-d file.")
                continue
            if file_dim is None:
                file_dim = len(fields) - 1
                if file_dim != dim:
                    raise EmbeddingsFileError(
                        f"{path}, line {number}: the vectors have {file_dim} values but embedding_size is {dim}; "
                        f"set embedding_size to {file_dim} or use a {dim}-d file.")
            if len(fields) < dim + 1:
                raise EmbeddingsFileError(
                    f"{path}, line {number}: expected a word and {dim} values, found {len(fields) - 1} values; "
                    "the file is truncated or not a GloVe/word2vec text file.")
            yield number, " ".join(fields[:-dim]), fields[-dim:]


def load_pretrained_vectors(path: Union[str, Path], words: Sequence[str], dim: int, *,
                            lowercase_fallback: bool = True) -> PretrainedVectors:
    """The vectors of ``words`` (a vocabulary's symbols, id = position) found in an embeddings file.

    A word missing from the file takes the vector of its lowercase form when ``lowercase_fallback``
    (GloVe 6B/42B are lowercased); an exact match always wins. Words not found keep zeros.
    """
    exact: Dict[str, List[int]] = {}
    lower: Dict[str, List[int]] = {}
    for i, w in enumerate(words):
        exact.setdefault(w, []).append(i)
        if lowercase_fallback and w.lower() != w:
            lower.setdefault(w.lower(), []).append(i)
    vectors = torch.zeros(len(words), dim)
    found = torch.zeros(len(words), dtype=torch.bool)
    by_exact = torch.zeros(len(words), dtype=torch.bool)
    for number, word, values in iter_vectors(path, dim):
        rows = exact.get(word, [])
        fallback = [i for i in lower.get(word, []) if not by_exact[i]]
        if not rows and not fallback:
            continue
        try:
            vec = torch.tensor([float(v) for v in values])
        except ValueError:
            raise EmbeddingsFileError(f"{path}, line {number}: the values of {word!r} are not all numbers; "
                                      "check that the file is a GloVe/word2vec text file.") from None
        if not bool(torch.isfinite(vec).all()):
            raise EmbeddingsFileError(f"{path}, line {number}: the vector of {word!r} holds nan or inf values, "
                                      "which would make every loss nan; fix or remove that line of the file.")
        for i in rows:
            vectors[i], found[i], by_exact[i] = vec, True, True
        for i in fallback:
            vectors[i], found[i] = vec, True
    return PretrainedVectors(vectors, found, str(path))
