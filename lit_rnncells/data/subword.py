"""Subword vocabularies for sequence-to-sequence tasks: BPE (Sennrich et al. 2016) with ``tokenizers``.

Two flavours, chosen by ``pretokenized``:

* raw text (Multi30k): **byte-level** BPE (GPT-2 style, a space is part of the next token), so any
  input string is encodable and :meth:`SubwordTokenizer.decode` gives the raw sentence back;
* pre-tokenised text (IWSLT14 and Gigaword, Moses / PTB tokenised): the line is **split on
  whitespace** first and every corpus token is segmented on its own (byte-level within the token,
  ``Ġ`` marking its start, no further punctuation splitting), so merges never cross tokens, a decoded
  sequence is again the whitespace-separated corpus tokens, and any character stays encodable.

Both are byte-level, which also makes training deterministic (the alphabet is fixed, so ties between
equally frequent pairs always break the same way; DDP ranks and rebuilt caches agree).

Special tokens are fixed for every tokenizer: pad 0 ``<pad>``, unk 1 ``<unk>``, bos 2 ``<bos>``,
eos 3 ``<eos>``. A tokenizer is fitted on the training split only, and serialises to one JSON
string (:meth:`to_json`) that goes in the checkpoint and loads with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import html
import json
import re
from functools import cached_property
from typing import Any, Iterable, List, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from .text import VocabularyMismatchError

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
LINE_BREAKS = re.compile(r"[\r\n]+")


class SubwordTokenizer:
    """A BPE tokenizer with fixed special ids and the corpus's (de)tokenisation conventions.

    Args:
        tokenizer: a trained ``tokenizers.Tokenizer`` whose first four ids are ``SPECIALS``.
        pretokenized: whether the corpus is already word-tokenised (whitespace-split BPE) or raw
            text (byte-level BPE).
        language: ISO code of the text (``en``, ``de``, ...) for Moses detokenisation.
    """

    def __init__(self, tokenizer: Tokenizer, pretokenized: bool, language: str = "en") -> None:
        ids = [tokenizer.token_to_id(s) for s in SPECIALS]
        if ids != [PAD_ID, UNK_ID, BOS_ID, EOS_ID]:
            raise ValueError(f"A SubwordTokenizer needs the special tokens {list(SPECIALS)} at ids 0-3, got {ids}; "
                             "build it with SubwordTokenizer.train.")
        self.tokenizer, self.pretokenized, self.language = tokenizer, bool(pretokenized), language

    # --- construction ----------------------------------------------------------------
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, pretokenized: bool, language: str = "en",
              min_frequency: int = 2) -> "SubwordTokenizer":
        """Learn BPE merges on ``texts`` (training lines only) up to ``vocab_size`` symbols in all."""
        smallest = len(SPECIALS) + 256  # the specials and every byte
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < smallest:
            raise ValueError(f"vocab_size must be an integer of at least {smallest} (4 special tokens + 256 bytes), "
                             f"got {vocab_size!r}; raise it.")
        tok = Tokenizer(models.BPE(unk_token=UNK))
        if pretokenized:  # corpus tokens first, then bytes within each token: merges never cross tokens
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.WhitespaceSplit(), pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
        else:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=list(SPECIALS),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(texts, trainer)
        return cls(canonical_ids(tok), pretokenized, language)

    def to_json(self) -> str:
        """The whole tokenizer as one plain string (safe for ``torch.load(weights_only=True)``)."""
        return json.dumps({"tokenizer": self.tokenizer.to_str(), "pretokenized": self.pretokenized,
                           "language": self.language})

    @classmethod
    def from_json(cls, text: str) -> "SubwordTokenizer":
        state = json.loads(text)
        return cls(Tokenizer.from_str(state["tokenizer"]), state["pretokenized"], state["language"])

    # --- ids <-> text ----------------------------------------------------------------
    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubwordTokenizer) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        kind = "whitespace" if self.pretokenized else "byte-level"
        return f"SubwordTokenizer({kind} BPE, {len(self)} symbols, language={self.language!r})"

    def encode(self, text: str) -> List[int]:
        """Subword ids of one line (no ``<bos>``/``<eos>``)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """The line in the corpus's own form (raw, or Moses/PTB-tokenised), special tokens dropped; a line
        break a model may produce (any byte is a symbol) becomes a space, so an output stays one line."""
        ids = [int(i) for i in ids if int(i) >= len(SPECIALS)]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return LINE_BREAKS.sub(" ", text).strip()  # one output per line, whatever bytes a model emits

    def tokens(self, ids: Iterable[int]) -> List[str]:
        """The subword strings of ``ids`` (for inspecting segmentations and attention plots)."""
        return [self.tokenizer.id_to_token(int(i)) for i in ids]

    @cached_property
    def _moses(self) -> Any:
        from sacremoses import MosesDetokenizer

        return MosesDetokenizer(lang=self.language)

    def detokenize(self, text: str) -> str:
        """Natural text for sacreBLEU: raw corpora unchanged; pre-tokenised ones Moses-detokenised
        (``sacremoses``) after unescaping ``&apos;`` / ``&quot;`` / ``&amp;`` (Post 2018, sacreBLEU scores
        detokenised output)."""
        if not self.pretokenized:
            return text
        return self._moses.detokenize(html.unescape(text).split(), unescape=False)


def canonical_ids(tok: Tokenizer) -> Tokenizer:
    """The same BPE model with ids that depend only on the merges: specials, the initial symbols sorted,
    then merged symbols in merge order. (``tokenizers`` numbers the ``x</w>`` initial symbols in hash-map
    order, which differs between runs, so DDP ranks or a rebuilt cache would otherwise disagree.)"""
    state = json.loads(tok.to_str())
    vocab: dict = state["model"]["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in state["model"]["merges"]]
    merged: List[str] = []
    seen = set(SPECIALS)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            merged.append(a + b)
    initial = sorted(t for t in vocab if t not in seen)
    order = list(SPECIALS) + initial + merged
    if sorted(order) != sorted(vocab):
        return tok  # an unexpected layout: keep the trainer's ids
    state["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    return Tokenizer.from_str(json.dumps(state))


def tokenizer_difference(saved: SubwordTokenizer, current: SubwordTokenizer) -> str:
    """What differs between two tokenizers, in words (their ``repr`` may read the same)."""
    if saved.pretokenized != current.pretokenized:
        kind = {True: "whitespace BPE (pretokenized)", False: "byte-level BPE"}
        return f"the checkpoint's is {kind[saved.pretokenized]}, this data's {kind[current.pretokenized]}"
    if len(saved) != len(current):
        return f"the checkpoint's has {len(saved)} symbols, this data's {len(current)}"
    if saved.language != current.language:
        return f"the checkpoint's is for language {saved.language!r}, this data's for {current.language!r}"
    ours, theirs = saved.tokenizer.get_vocab(), current.tokenizer.get_vocab()
    only = sorted(set(ours) - set(theirs))
    if only:
        return (f"both have {len(saved)} symbols but {len(only)} of the checkpoint's are not in this data's (e.g. "
                f"{', '.join(repr(t) for t in only[:3])}): they were fitted on other text")
    return f"both have the same {len(saved)} symbols but other ids or merges: they were fitted on other text"


def check_tokenizer(saved: SubwordTokenizer, current: SubwordTokenizer, side: str) -> None:
    """Raise one clear error if a checkpoint's tokenizer differs from the data's, saying what differs."""
    if saved == current:
        return
    raise VocabularyMismatchError(
        f"The checkpoint's {side} tokenizer differs from this data's: {tokenizer_difference(saved, current)}; train "
        "and test with the same dataset, subword_vocab_size and joint_vocabulary, or pass checkpoint_path so the "
        "data uses the checkpoint's tokenizers.")

