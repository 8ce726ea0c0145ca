"""Language-modelling corpora as contiguous streams for truncated BPTT.

Datasets: PTB character level (Mikolov's ``ptb.char.*.txt``), PTB word level
(``ptb.*.txt``; hub ``ptb-text-only/ptb_text_only``, column ``sentence``), text8
(local ``text8``, hub ``afmck/text8``), enwik8 (local ``enwik8`` bytes, hub
``LTCB/enwik8`` config ``enwik8-raw``), each with the standard 90M/5M/5M split when it
comes as one file, and plain ``{train,valid,test}.txt`` files of your own (``dataset: text``).
Hub ids are read from their Parquet export (:mod:`lit_rnncells.data.hub`). Hub and local
inputs go through the same processing (:func:`corpus_texts` →
:func:`lit_rnncells.data.text.build_corpus`), cached on disk keyed by the inputs.

Batching (Zaremba et al. 2014; Merity et al. 2018): the training split is cut into
``batch_size × world_size`` contiguous streams and rank ``r`` owns streams
``[r·B, (r+1)·B)``; each step yields the next ``bptt`` tokens of every stream (AWD-LSTM's
variable length optionally). Evaluation splits cover every target token exactly once:
streams of lengths differing by at most one, the last window padded and masked.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Literal, Optional, Tuple, Union

import torch
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset

from . import hub
from .batching import batch_loader
from .check import SplitCheckMixin
from .known import variant
from ..utils.paths import read_predict_lines
from .split_check import language_model_files
from .text import (Vocabulary, VocabularyMismatchError, build_corpus, cached, default_cache_dir, file_fingerprint,
                   is_hub_id, local_or_hub)

DatasetName = Literal["ptb_char", "ptb_word", "text8", "enwik8", "text"]
SPLITS = ("train", "valid", "test")
_NAMES = ("ptb_char", "ptb_word", "text8", "enwik8")  # each a variant of a record in lit_rnncells.data.known
HUB_IDS = {name: variant(name)[0].hub_id for name in _NAMES}
"""Where each corpus is on the hub, from its record."""
LOCAL_FILES = {**{name: {("valid" if split == "dev" else split): files[0]
                         for split, files in variant(name)[1].files.items()} for name in _NAMES},
               "text": {s: f"{s}.txt" for s in SPLITS}}
"""The file of each split in a corpus's folder (``all``: one file, split when read), from its record's layout."""
ENV_FOLDERS = {name: variant(name)[0].name for name in _NAMES}
"""The folder under ``$LIT_RNNCELLS_DATA`` (the record's name)."""
STANDARD_SPLIT = (90_000_000, 5_000_000, 5_000_000)
CACHE_VERSION = 2  # 2: hub corpora read from the Parquet export (enwik8 from its raw bytes)


def default_data_dir(dataset: str) -> Optional[str]:
    """``$LIT_RNNCELLS_DATA/<folder>`` when ``LIT_RNNCELLS_DATA`` is set, else the hub id (``None`` for ``text``)."""
    return local_or_hub(ENV_FOLDERS.get(dataset), HUB_IDS.get(dataset))


def _ptb_char_text(lines: List[str]) -> str:
    """Mikolov's char format (``a e r _ b a n k``) to text: one character per token, ``\\n`` ends a line."""
    return "".join("".join(line.split()) + "\n" for line in lines if line.strip())


def normalise(dataset: str, raw: Dict[str, str], split_sizes: Tuple[int, int, int]) -> Dict[str, str]:
    """The single processing step after reading, shared by local files and the hub."""
    if "all" in raw:  # one file: the standard contiguous split by characters (text8) or bytes (enwik8)
        text, (n_train, n_valid, n_test) = raw["all"], split_sizes
        if len(text) < n_train + n_valid + n_test:
            raise ValueError(f"{dataset} has {len(text):,} symbols but split_sizes need "
                             f"{n_train + n_valid + n_test:,}; pass split_sizes that fit the file.")
        raw = {"train": text[:n_train], "valid": text[n_train:n_train + n_valid],
               "test": text[n_train + n_valid:n_train + n_valid + n_test]}
    if dataset == "ptb_char":
        return {s: _ptb_char_text(t.split("\n")) for s, t in raw.items()}
    return dict(raw)


def read_local(dataset: str, folder: Path) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
    """Raw split texts from a local folder (or the ``text8`` / ``enwik8`` file itself) and their fingerprints."""
    expected = sorted(LOCAL_FILES[dataset].values())
    if not folder.exists():
        raise FileNotFoundError(f"Corpus folder {str(folder)!r} does not exist{hub.owner_hint(str(folder))}; set "
                                "data.init_args.data_dir (or "
                                f"LIT_RNNCELLS_DATA, which holds {ENV_FOLDERS.get(dataset, dataset)}/) to the folder "
                                f"holding {expected}.")
    if folder.is_file() and "all" not in LOCAL_FILES[dataset]:
        raise NotADirectoryError(f"data_dir {str(folder)!r} is a file, but {dataset} is distributed as separate "
                                 f"train/valid/test files; set data_dir to the folder holding {expected}.")
    raw, prints = {}, []
    for split, name in LOCAL_FILES[dataset].items():
        path = folder if folder.is_file() else folder / name
        if not path.is_file():
            raise FileNotFoundError(f"Missing corpus file {str(path)!r} for dataset {dataset!r}; "
                                    f"data_dir must hold {sorted(LOCAL_FILES[dataset].values())}.")
        if path.stat().st_size == 0:
            raise ValueError(f"Corpus file {str(path)!r} is empty; the {split} split needs text.")
        data = path.read_bytes()
        try:
            raw[split] = data.decode("latin-1") if dataset == "enwik8" else data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"Corpus file {str(path)!r} is not UTF-8 text (byte {error.start}: {error.reason}); "
                             "convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8 (its encoding in place "
                             "of latin1).") from None
        prints.append(file_fingerprint(path))
    return raw, prints


HUB_BYTES = {"enwik8": 100_000_000, "text8": 100_000_000}  # the whole corpus: bytes (enwik8) or characters


def local_alternative(dataset: str) -> str:
    """The end of a hub error: where a local copy goes instead."""
    return hub.local_alternative(ENV_FOLDERS.get(dataset, dataset),
                                 f"the folder with {', '.join(sorted(LOCAL_FILES[dataset].values()))}")


def read_hub(dataset: str, hub_id: str) -> Dict[str, str]:
    """Raw split texts from the hub's Parquet export (:mod:`lit_rnncells.data.hub`), in the shape
    :func:`read_local` returns: PTB from its stripped lines (``sentence``), text8 and enwik8 as the whole
    corpus (``text``; enwik8 from the ``enwik8-raw`` config's single row, checked to be 100,000,000 bytes),
    then split by :func:`normalise` exactly like the local file."""
    local = local_alternative(dataset)
    if dataset in ("ptb_char", "ptb_word"):
        ds = hub.load_splits(hub_id, ("train", "validation", "test"), local)
        lines = {s: list(ds[h]["sentence"]) for s, h in zip(SPLITS, ("train", "validation", "test"))}
        if dataset == "ptb_char":  # the char files are the word files spelled out, '_' between words
            return {s: "\n".join(" ".join("_".join(x.split())) for x in v) for s, v in lines.items()}
        return {s: "\n".join(v) for s, v in lines.items()}
    if dataset == "enwik8":
        row = hub.load_splits(hub_id, ("train",), local)["train"]["text"]
        data = "".join(row).encode("utf-8")  # the raw config read the file as UTF-8: these are its bytes
        if len(data) != HUB_BYTES["enwik8"]:
            raise hub.HubError(f"Could not load {hub_id!r} from the Hugging Face hub: its enwik8-raw text is "
                               f"{len(data):,} bytes, not enwik8's {HUB_BYTES['enwik8']:,}; {local}.")
        return {"all": data.decode("latin-1")}  # bytes as symbols, like the local file
    ds = hub.load_splits(hub_id, ("train", "validation", "test"), local)  # text8: the splits in order
    text = "".join("".join(ds[h]["text"]) for h in ("train", "validation", "test"))
    if len(text) != HUB_BYTES["text8"]:
        raise hub.HubError(f"Could not load {hub_id!r} from the Hugging Face hub: its splits hold {len(text):,} "
                           f"characters together, not text8's {HUB_BYTES['text8']:,}; {local}.")
    return {"all": text}


def corpus_texts(dataset: str, data_dir: str, split_sizes: Tuple[int, int, int]
                 ) -> Tuple[Callable[[], Dict[str, str]], Dict[str, Any]]:
    """A loader of the normalised split texts and the cache key describing its inputs."""
    if is_hub_id(data_dir) and dataset != "text":
        key: Dict[str, Any] = {"hub": data_dir}
        return (lambda: normalise(dataset, read_hub(dataset, data_dir), split_sizes)), key
    raw, prints = read_local(dataset, Path(data_dir).expanduser())
    return (lambda: normalise(dataset, raw, split_sizes)), {"files": prints}


# --- streams -------------------------------------------------------------------------
class TrainStreams(IterableDataset):
    """This rank's ``batch_size`` training streams, yielded ``bptt`` tokens at a time.

    ``start_window`` (a callable given the epoch) lets a resumed run continue mid-epoch.
    With ``variable_bptt`` the window lengths follow AWD-LSTM (``bptt`` with p = 0.95 else
    ``bptt/2``, then ``N(·, 5)``, at least ``min_bptt``), drawn from ``(seed, epoch)``.
    """

    def __init__(self, data: Tensor, batch_size: int, bptt: int, rank: int = 0, world_size: int = 1,
                 variable_bptt: bool = False, min_bptt: int = 5, seed: int = 0,
                 epoch: Callable[[], int] = lambda: 0,
                 start_window: Callable[[int], int] = lambda epoch: 0) -> None:
        total = batch_size * world_size
        self.length = (len(data) - 1) // total
        if bptt > self.length:
            raise ValueError(f"bptt={bptt} is longer than each training stream ({self.length} tokens with "
                             f"{total} streams = batch_size × devices over {len(data):,} tokens); "
                             "lower bptt or batch_size.")
        n = total * self.length
        rows = slice(rank * batch_size, (rank + 1) * batch_size)
        self.inputs = data[:n].view(total, self.length)[rows]
        self.targets = data[1:n + 1].view(total, self.length)[rows]
        self.bptt, self.variable, self.min_bptt, self.seed = bptt, variable_bptt, min_bptt, seed
        self.epoch, self.start_window = epoch, start_window

    def windows(self, epoch: int) -> List[Tuple[int, int]]:
        """``(offset, length)`` of every window of an epoch."""
        if not self.variable:
            return [(o, min(self.bptt, self.length - o)) for o in range(0, self.length, self.bptt)]
        rng, out, offset = random.Random(f"{self.seed}-{epoch}"), [], 0
        while offset < self.length:
            base = self.bptt if rng.random() < 0.95 else self.bptt / 2
            size = min(max(self.min_bptt, int(rng.gauss(base, 5))), self.length - offset)
            out.append((offset, size))
            offset += size
        return out

    def __len__(self) -> int:
        if self.variable:
            raise TypeError("variable-length BPTT has no fixed number of windows")
        return len(self.windows(0))

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        epoch = self.epoch()
        start = self.start_window(epoch)
        for i, (offset, size) in enumerate(self.windows(epoch)):
            if i < start:
                continue
            yield {"inputs": self.inputs[:, offset:offset + size].long(),
                   "targets": self.targets[:, offset:offset + size].long(),
                   "epoch": epoch, "window": i, "seq_len": size, "bptt": self.bptt}


class EvalStreams(IterableDataset):
    """A whole evaluation split as this rank's streams: every target token once, carried state.

    The ``len(data) − 1`` targets are cut into ``batch_size × world_size`` streams whose lengths
    differ by at most one; ``lengths`` in each batch counts the real tokens per stream.
    """

    def __init__(self, data: Tensor, batch_size: int, bptt: int, rank: int = 0, world_size: int = 1) -> None:
        total, n = batch_size * world_size, len(data) - 1
        if n < total:
            raise ValueError(f"An evaluation split of {len(data)} tokens is too short for {total} streams; "
                             "lower eval_batch_size.")
        base, extra = divmod(n, total)
        sizes = [base + (1 if s < extra else 0) for s in range(total)]
        starts = [sum(sizes[:s]) for s in range(total)]
        width = base + (1 if extra else 0)
        self.inputs = torch.zeros(batch_size, width, dtype=torch.long)
        self.targets = torch.zeros(batch_size, width, dtype=torch.long)
        self.sizes = torch.tensor(sizes[rank * batch_size:(rank + 1) * batch_size])
        for row, s in enumerate(range(rank * batch_size, (rank + 1) * batch_size)):
            self.inputs[row, :sizes[s]] = data[starts[s]:starts[s] + sizes[s]]
            self.targets[row, :sizes[s]] = data[starts[s] + 1:starts[s] + sizes[s] + 1]
        self.width, self.bptt = width, bptt

    def __len__(self) -> int:
        return -(-self.width // self.bptt)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for i, offset in enumerate(range(0, self.width, self.bptt)):
            size = min(self.bptt, self.width - offset)
            yield {"inputs": self.inputs[:, offset:offset + size], "targets": self.targets[:, offset:offset + size],
                   "lengths": (self.sizes - offset).clamp(0, size), "window": i}


class LanguageModelDataModule(SplitCheckMixin, LightningDataModule):
    """A language-modelling corpus for truncated BPTT, from a local folder or the hub.

    Args:
        dataset: ``ptb_char``, ``ptb_word``, ``text8``, ``enwik8`` or ``text`` (your own
            ``train.txt``/``valid.txt``/``test.txt``; pick ``level``).
        data_dir: local folder (or the ``text8``/``enwik8`` file) in the official format, or a
            hub id (``owner/name``, or ``owner/name@commit`` to pin the export's revision). Default: ``$LIT_RNNCELLS_DATA/ptb`` (``text8``, ``enwik8``) when that folder
            exists, else the hub id (jsonargparse does not expand environment variables in configs).
        level: ``char`` or ``word`` for ``dataset: text`` (others are fixed: PTB word is word level).
        batch_size: training streams per device; eval_batch_size: evaluation streams per device.
        bptt: tokens per training / evaluation window; variable_bptt: AWD-LSTM's random lengths.
        split_sizes: train/valid/test sizes for single-file corpora (default 90M/5M/5M).
        cache_dir: where tokenized tensors are cached (default ``$LIT_RNNCELLS_CACHE`` or
            ``~/.cache/lit_rnncells``); ``""`` disables the cache.
        prompts, predict_length, temperature: what ``predict`` samples (temperature 0: greedy).
        predict_file: a file of prompts, one per line (``-``: standard input), in place of ``prompts``.
        seed: seeds the variable BPTT lengths.

    The vocabulary is fitted on the training split when the module is built (so ``vocab_size`` is
    known for the CLI's links) and saved in checkpoints with the training position.
    """

    resumes_mid_epoch = True  # a checkpoint saved mid-epoch resumes at its next window (lit_rnncells.utils.quiet)

    def __init__(self, dataset: DatasetName = "ptb_char", data_dir: Optional[str] = None,
                 level: Optional[Literal["char", "word"]] = None, batch_size: int = 64, eval_batch_size: int = 10,
                 bptt: int = 150, variable_bptt: bool = False, min_bptt: int = 5,
                 split_sizes: Tuple[int, int, int] = STANDARD_SPLIT, cache_dir: Optional[str] = None,
                 prompts: Union[List[str], str] = ["the "], predict_length: int = 200, temperature: float = 1.0,
                 seed: int = 1234, predict_file: Optional[str] = None) -> None:
        super().__init__()
        if dataset not in LOCAL_FILES:
            raise ValueError(f"Unknown dataset {dataset!r}; choose one of {sorted(LOCAL_FILES)}.")
        for name, value in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size), ("bptt", bptt),
                            ("predict_length", predict_length), ("min_bptt", min_bptt)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if temperature < 0:
            raise ValueError(f"temperature must be 0 (greedy) or positive, got {temperature}.")
        if isinstance(prompts, str) or not list(prompts):  # predict returned nothing, with Lightning's warnings
            raise ValueError(f"prompts must be a list of texts to continue, got {prompts!r}; give e.g. "
                             "--data.init_args.prompts '[\"the \"]' (an empty text starts from nothing), or a "
                             "file of prompts, one per line, as --data.init_args.predict_file <file>.")
        self.save_hyperparameters(logger=False)  # the task logs them as data/...
        self.dataset = dataset
        self.data_dir = data_dir if data_dir is not None else default_data_dir(dataset)
        if self.data_dir is None:
            raise ValueError("dataset 'text' needs data_dir: a folder with train.txt, valid.txt and test.txt.")
        if dataset == "text" and level is None:
            raise ValueError("dataset 'text' needs level: 'char' or 'word'.")
        self.level = "word" if dataset == "ptb_word" else "char" if dataset != "text" else level
        self.batch_size, self.eval_batch_size, self.bptt = batch_size, eval_batch_size, bptt
        self.variable_bptt, self.min_bptt, self.seed = variable_bptt, min_bptt, seed
        self.prompts, self.predict_length, self.temperature = list(prompts), predict_length, temperature
        self.predict_file = predict_file
        self.cache = cache = default_cache_dir() if cache_dir is None else (Path(cache_dir) if cache_dir else None)
        load, source = corpus_texts(dataset, self.data_dir, tuple(split_sizes))
        space = "_" if dataset == "ptb_char" else " "
        key = {"name": dataset, "version": CACHE_VERSION, "level": self.level, "split_sizes": list(split_sizes),
               **source}
        corpus = cached(cache, key, lambda: build_corpus(load(), self.level, space))
        self.vocab = Vocabulary.from_state_dict(corpus["vocab"])
        self.splits: Dict[str, Tensor] = {s: corpus[s] for s in SPLITS}
        TrainStreams(self.splits["train"], batch_size, bptt)  # fail now, not at the first step
        self._position: Dict[str, int] = {}
        self._resume: Optional[Dict[str, int]] = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def split_files(self):
        """The files the fit-time split check reads (:func:`lit_rnncells.data.split_check.language_model_files`)."""
        return language_model_files(self)

    def setup(self, stage: str) -> None:
        self.check_splits(stage)

    def _rank_world(self) -> Tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _epoch(self) -> int:
        trainer = getattr(self, "trainer", None)
        return trainer.current_epoch if trainer is not None else 0

    def _start_window(self, epoch: int) -> int:
        resume, self._resume = self._resume, None
        return resume["window"] if resume is not None and resume["epoch"] == epoch else 0

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        if self._resume is not None and (self._resume["world_size"], self._resume["batch_size"]) != (
                world, self.batch_size):
            rank_zero_warn(f"The checkpoint was trained with batch_size={self._resume['batch_size']} on "
                           f"{self._resume['world_size']} device(s), this run uses batch_size={self.batch_size} on "
                           f"{world}: the training streams differ, so epoch {self._resume['epoch']} restarts from "
                           "its first window.")
            self._resume = None  # streams differ: restart the epoch (the model also drops its carried state)
        streams = TrainStreams(self.splits["train"], self.batch_size, self.bptt, rank, world, self.variable_bptt,
                               self.min_bptt, self.seed, self._epoch, self._start_window)
        return batch_loader(streams)

    def _eval_loader(self, split: str) -> DataLoader:
        rank, world = self._rank_world()
        return batch_loader(EvalStreams(self.splits[split], self.eval_batch_size, self.bptt, rank, world))

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("valid")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def predict_prompts(self) -> List[str]:
        """What ``predict`` continues: the lines of ``predict_file`` when it is given (as every task's predict reads
        it: a blank line is an error naming it), else ``prompts``."""
        if self.predict_file is None:
            return self.prompts
        return read_predict_lines(self.predict_file, "prompt")

    def predict_dataloader(self) -> DataLoader:
        items = [{"index": i, "prompt": p, "length": self.predict_length, "temperature": self.temperature}
                 for i, p in enumerate(self.predict_prompts())]
        return batch_loader(items)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Remember the training position of the batch about to be trained on (for resuming)."""
        trainer = getattr(self, "trainer", None)
        if trainer is not None and trainer.training and isinstance(batch, dict) and "epoch" in batch:
            rank, world = self._rank_world()
            self._position = {"epoch": int(batch["epoch"]), "window": int(batch["window"]) + 1,
                              "world_size": world, "batch_size": self.batch_size}
        return batch

    def state_dict(self) -> Dict[str, Any]:
        return {"vocab": self.vocab.state_dict(), "position": dict(self._position)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        check_vocabulary(Vocabulary.from_state_dict(state["vocab"]), self.vocab)
        self._resume = dict(state["position"]) if state.get("position") else None


def check_vocabulary(saved: Vocabulary, current: Vocabulary) -> None:
    """Raise :class:`VocabularyMismatchError` with one sentence naming the fix if they differ."""
    if saved == current:
        return
    diff = sorted(set(saved.symbols) ^ set(current.symbols))[:5]
    raise VocabularyMismatchError(
        f"The checkpoint's vocabulary ({len(saved)} {saved.level} symbols) differs from this data's "
        f"({len(current)} {current.level} symbols; e.g. {diff or 'same symbols, other order'}): "
        "use the dataset and level the checkpoint was trained on, or train a new model.")
