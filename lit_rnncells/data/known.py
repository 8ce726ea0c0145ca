"""What the library knows about each dataset's official release: where it comes from, what
``prepare`` writes, and the figures ``check`` compares a local folder with.

One table, :data:`KNOWN`, keyed by the folder name under ``$LIT_RNNCELLS_DATA`` (the name
``python -m lit_rnncells.data prepare|check`` takes). Every checksum says where it comes from
(``provenance``): a figure published with the release or by a widely used loader, or computed
on a copy of the release whose published figures (MD5, counts) it matches. Nothing here has
been fetched from the network by this project's tests (their machine is offline); the download
code is tested against a local HTTP server.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import builders, duc


@dataclass(frozen=True)
class Source:
    """One file to download: its URL, expected size and checksums (``None`` where not known)."""
    url: str
    filename: str
    size: Optional[int] = None
    sha256: Optional[str] = None
    md5: Optional[str] = None
    provenance: str = ""


@dataclass(frozen=True)
class Layout:
    """One group of files of a dataset folder and what ``check`` expects of it.

    ``kind`` says how examples are read: ``lines`` (one per non-blank line), ``pairs`` (line ``i`` of
    two aligned files), ``semeval`` (aspect terms of the XML; overlap by sentence text), ``sst`` (one
    tree per line), ``imdb`` (reviews of ``aclImdb_v1.tar.gz``), ``bytes`` (one file, counted in bytes).
    ``files`` maps a split (``train``, ``dev``, ``test``) to its file names. ``overlap`` is the number of
    examples of the second split that also occur in the first, measured on the official release (a
    natural amount of repeated short sentences; ``check`` reports more than that). A pair missing from
    ``overlap`` is 0; ``None`` means not measured (no full copy was at hand): more than 1% is reported.
    """
    name: str
    kind: str
    files: Dict[str, Tuple[str, ...]]
    counts: Dict[str, int]
    overlap: Dict[Tuple[str, str], Optional[int]] = field(default_factory=dict)
    sha256: Dict[str, str] = field(default_factory=dict)
    optional: bool = False


Builder = Callable[[List[Path], Path, Callable[[str], None]], None]
"""``prepare``'s step from the downloaded (or ``--source``) release files to the folder's layout:
``builder(archives, folder, log)``."""


@dataclass(frozen=True)
class Dataset:
    """Everything the library knows about one dataset, in the folder ``name`` under ``$LIT_RNNCELLS_DATA``.

    ``prepare`` reads ``sources`` and ``builder`` (or, without sources, copies the layouts' files from
    ``--source``); ``check`` reads ``layouts``. A translation dataset (``languages`` set) is also what
    ``TranslationDataModule(dataset=name)`` reads: ``files`` maps its splits (``train``, ``valid``, ``test``) to
    a file name pattern whose ``{}`` is a language; ``languages`` lists the languages, the default direction
    first (source → target); ``one_way`` allows that direction only (summaries); ``hub_id`` / ``hub_config`` /
    ``hub_columns`` / ``hub_rows`` say where the hub copy is, which column holds each language, and its row
    count per hub split (checked when read); ``pretokenized`` is the default of the DataModule's option;
    ``test_only_for`` names the dataset a test-only set's models train on; ``rouge_max_bytes`` is the
    standard ROUGE truncation and ``rouge_multiref`` the standard multi-reference ROUGE (``pooled``: ROUGE-1.5.5
    ``-f A``). A dataset with ``languages`` but no ``hub_id`` is read from local files only.
    ``variants`` maps the names ``LanguageModelDataModule(dataset=...)`` takes to the file group each reads
    (``ptb_word`` → ``word``); those read ``hub_id`` too. ``members`` says where each split is inside the release
    archive (and the folder it extracts to), a path whose ``{}`` is one of ``classes``: SST's ``trees/dev.txt``,
    IMDB's ``aclImdb/train/{}`` with ``classes`` ``("neg", "pos")`` (label 0, 1).
    Add one with :func:`register` (docs/data.md, "Adding a dataset").
    """
    name: str
    title: str
    datamodule: str
    sources: Tuple[Source, ...] = ()
    layouts: Tuple[Layout, ...] = ()
    steps: str = ""
    manual: str = ""
    builder: Optional[Builder] = None
    languages: Tuple[str, ...] = ()
    one_way: bool = False
    files: Dict[str, str] = field(default_factory=dict)
    hub_id: Optional[str] = None
    hub_config: Optional[str] = None
    hub_columns: Dict[str, str] = field(default_factory=dict)
    hub_rows: Dict[str, int] = field(default_factory=dict)
    pretokenized: bool = False
    test_only_for: Optional[str] = None
    rouge_max_bytes: Optional[int] = None
    rouge_multiref: Optional[str] = None
    variants: Dict[str, str] = field(default_factory=dict)
    members: Dict[str, str] = field(default_factory=dict)
    classes: Tuple[str, ...] = ()

    @property
    def direction(self) -> Tuple[str, str]:
        """The default (source, target) languages of a translation dataset."""
        return self.languages[0], self.languages[1]


def pair_layout(name: str, files: Dict[str, str], languages: Sequence[str], counts: Dict[str, int],
                overlap: Optional[Dict[Tuple[str, str], Optional[int]]] = None,
                sha256: Optional[Dict[str, str]] = None) -> Layout:
    """``check``'s file group of a translation dataset, from its split patterns (``valid`` is ``dev`` there)."""
    return Layout(name, "pairs", {("dev" if split == "valid" else split): tuple(p.format(lang) for lang in languages)
                                  for split, p in files.items()}, counts, overlap or {}, sha256 or {})


def _split_files(pattern: str, names: Dict[str, str], *suffixes: str) -> Dict[str, Tuple[str, ...]]:
    return {split: tuple(pattern.format(name, s) for s in suffixes) for split, name in names.items()}


# sha256 of the released files, computed on copies whose MD5 / counts match the published ones.
_PTB_WORD_SHA = {"ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
                 "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
                 "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"}
_PTB_CHAR_SHA = {"ptb.char.train.txt": "e313d91425e06c4f0a8fb6e881dcce0c291f2a0e9f4dda54833069b122f91da9",
                 "ptb.char.valid.txt": "21661f63ec355085879458b6524644d4add5573541b4be14fb52ab2e2e995eb8",
                 "ptb.char.test.txt": "1ef5607ac3c463b16e38bfe7900dd3bfc91de5a96e0f21e7eab5188b465b8ebe"}
_MULTI30K_SHA = {"train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
                 "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
                 "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
                 "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
                 "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
                 "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"}
_IWSLT14_SHA = {"valid.de": "3f051579c9d8c7281a6ea8c72ad4ae09dbaa9bb24dfd41166f2c3a3df7cd940a",
                "valid.en": "e6d7317a9772cd1ed970910c611e9e7dada1f34439269b44a9d801334bff948d",
                "test.de": "e718c783e33160b7d72af8f733756a466e0d0c016eff8ab624c1b0d1d01cbbdf",
                "test.en": "4b127beb9050511a3e6209cd837ff36f623a3a423666b32aba6e208b7330cf4c"}
_GIGAWORD_SHA = {"test.article.txt": "578b33eaffe7bf9cab2d84d6f1399fd6f38c1778d194a9877ba66c15232b183c",
                 "test.title.txt": "15561a71977ee7bd5de4f8f405ea4adcc2f41220b2d9f9db7f71c23c27f8b9d7"}
_SEMEVAL_SHA = {"Restaurants_Train_v2.xml": "223601da1bded6caa4ef9cf91a7007578141ca6d8ed50d5a5c217565f89d2fc5",
                "Restaurants_Test_Gold.xml": "f21509cfa37e16534cd5b2da043be487355b64ef48fe8d6aaacaeca6b49cc0fb"}
_SST_MEMBERS = {"train": "trees/train.txt", "dev": "trees/dev.txt", "test": "trees/test.txt"}
_MULTI30K_FILES = {"train": "train.{}", "valid": "val.{}", "test": "test_2016_flickr.{}"}
_PLAIN_FILES = {"train": "train.{}", "valid": "valid.{}", "test": "test.{}"}
_GIGAWORD_FILES = {"train": "train.{}.txt", "valid": "valid.{}.filter.txt", "test": "test.{}.txt"}
_NOT_MEASURED: Dict[Tuple[str, str], Optional[int]] = {("train", "dev"): None, ("train", "test"): None,
                                                       ("dev", "test"): None}
ENWIK8_SHA256 = "2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8"
ENWIK8_MD5 = "a1fa5ffddb56f4953e226637dabbb36a"  # published in Mahoney's enwik8/enwik9 listing

KNOWN: Dict[str, Dataset] = {d.name: d for d in (
    Dataset(
        "ptb", "Penn Treebank, Mikolov's preprocessing (word and character level)",
        "LanguageModelDataModule (ptb_word, ptb_char)",
        (Source("http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz", "simple-examples.tgz",
                provenance="Mikolov's RNNLM toolkit page; the archive's checksum is not published, so its six "
                           "data/ptb*.txt members are verified instead"),),
        (Layout("word", "lines", _split_files("ptb.{}.txt", {"train": "train", "dev": "valid", "test": "test"}, ""),
                {"train": 42_068, "dev": 3_370, "test": 3_761}, {("train", "dev"): 85, ("train", "test"): 64,
                                                                 ("dev", "test"): 24}, _PTB_WORD_SHA),
         Layout("char", "lines", _split_files("ptb.char.{}.txt", {"train": "train", "dev": "valid", "test": "test"},
                                              ""),
                {"train": 42_068, "dev": 3_370, "test": 3_761}, {("train", "dev"): 85, ("train", "test"): 64,
                                                                 ("dev", "test"): 24}, _PTB_CHAR_SHA)),
        "extracts data/ptb.{train,valid,test}.txt and data/ptb.char.{train,valid,test}.txt; word files' MD5s "
        "are torchtext's published ones (train f26c4b92c5fdc7b3f8c7cdcb991d8420)", builder=builders.ptb,
        hub_id="ptb-text-only/ptb_text_only", variants={"ptb_word": "word", "ptb_char": "char"}),
    Dataset(
        "text8", "text8 (first 10^8 characters of cleaned English Wikipedia, Mahoney)",
        "LanguageModelDataModule (text8)",
        (Source("http://mattmahoney.net/dc/text8.zip", "text8.zip",
                provenance="Mahoney's text8 page; no checksum is published: the member is checked to be 10^8 "
                           "bytes of a-z and space"),),
        (Layout("text8", "bytes", {"all": ("text8",)}, {"all": 100_000_000}),),
        "extracts text8 (the 90M/5M/5M split is made when reading)", builder=builders.single("text8"),
        hub_id="afmck/text8", variants={"text8": "text8"}),
    Dataset(
        "enwik8", "enwik8 (first 10^8 bytes of an English Wikipedia XML dump, Hutter Prize)",
        "LanguageModelDataModule (enwik8)",
        (Source("http://mattmahoney.net/dc/enwik8.zip", "enwik8.zip", 36_445_475,
                "547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
                provenance="size and sha256 as pinned by a public third-party project; the member's MD5 "
                           f"{ENWIK8_MD5} is Mahoney's published figure"),),
        (Layout("enwik8", "bytes", {"all": ("enwik8",)}, {"all": 100_000_000}, sha256={"enwik8": ENWIK8_SHA256}),),
        "extracts the raw 10^8-byte enwik8 (not the hub's one-stripped-line-per-row text)",
        builder=builders.single("enwik8", ENWIK8_MD5), hub_id="LTCB/enwik8", variants={"enwik8": "enwik8"}),
    Dataset(
        "multi30k", "Multi30k task 1 En-De (Elliott et al. 2016), raw text", "TranslationDataModule (multi30k)",
        tuple(Source(f"https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}.gz", f"{name}.gz",
                     provenance="the official multi30k/dataset repository; the decompressed files are verified")
              for name in _MULTI30K_SHA),
        (pair_layout("de-en", _MULTI30K_FILES, ("de", "en"), {"train": 29_000, "dev": 1_014, "test": 1_000}, {},
                     _MULTI30K_SHA),),
        "decompresses {train,val,test_2016_flickr}.{en,de}.gz", builder=builders.gunzip,
        languages=("de", "en"), files=_MULTI30K_FILES, hub_id="bentrevett/multi30k", hub_config="default",
        hub_rows={"train": 29_000, "validation": 1_014, "test": 1_000}),
    Dataset(
        "iwslt14", "IWSLT14 German-English (TED), as fairseq's prepare-iwslt14.sh makes it, before BPE",
        "TranslationDataModule (iwslt14)",
        (Source("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz", "de-en.tgz",
                provenance="fairseq's mirror of the official IWSLT 2014 release (WIT3 2014-01 texts/de/en); no "
                           "checksum is published: the outputs' counts and the valid/test checksums are verified"),),
        (pair_layout("de-en", _PLAIN_FILES, ("de", "en"), {"train": 160_239, "dev": 7_283, "test": 6_750},
                     {("train", "dev"): None, ("train", "test"): None, ("dev", "test"): 52}, _IWSLT14_SHA),),
        "builds train/valid/test from the release as prepare-iwslt14.sh does (lit_rnncells.data.iwslt14): "
        "Moses tokenisation (sacremoses), the length 1-175 / ratio 1.5 clean, lowercasing, every 23rd training "
        "pair as valid, test = dev2010 + TEDX dev2012 + tst2010-2012", builder=builders.iwslt14,
        languages=("de", "en"), files=_PLAIN_FILES, pretokenized=True),
    Dataset(
        "gigaword", "Gigaword headline generation (Rush et al. 2015), harvardnlp sent-summary release",
        "TranslationDataModule (gigaword)",
        (Source("https://drive.google.com/uc?export=download&id=0B6N7tANPyVeBNmlSX19Ld2xDU1E", "summary.tar.gz",
                290_866_023, "ffa257f32de233bfc832e9e5e3910cb72f4023b37a86af8fee87b344baeb8a4a",
                provenance="TensorFlow Datasets' url_checksums/gigaword.txt"),),
        (pair_layout("article-title", _GIGAWORD_FILES, ("article", "title"),
                     {"train": 3_803_957, "dev": 189_651, "test": 1_951}, _NOT_MEASURED, _GIGAWORD_SHA),),
        "extracts train/{train,valid}.*.txt(.gz) and Giga/input.txt, Giga/task1_ref0.txt as test.{article,title}.txt",
        builder=builders.gigaword, languages=("article", "title"), one_way=True, files=_GIGAWORD_FILES,
        hub_id="Harvard/gigaword", hub_config="default", hub_columns={"article": "document", "title": "summary"},
        hub_rows={"train": 3_803_957, "validation": 189_651, "test": 1_951}, pretokenized=True),
    Dataset(
        "iwslt17", "IWSLT 2017 German-English (TED), raw cased text", "TranslationDataModule (iwslt17)",
        languages=("de", "en"), files=_PLAIN_FILES, hub_id="IWSLT/iwslt2017", hub_config="iwslt2017-de-en",
        hub_rows={"train": 206_112, "validation": 888, "test": 8_079}),
    Dataset(
        "duc2004", "DUC-2004 task 1 (a test set for Gigaword-trained models; from NIST on request)",
        "TranslationDataModule (duc2004)", manual=duc.SOURCE, languages=("article", "title"), one_way=True,
        files={"test": duc.INPUT_FILE}, pretokenized=True, test_only_for="gigaword", rouge_max_bytes=75,
        rouge_multiref="pooled"),
    Dataset(
        "semeval14", "SemEval-2014 Task 4 aspect terms (Pontiki et al. 2014)", "AspectSentimentDataModule",
        (),
        (Layout("restaurants", "semeval", {"train": ("Restaurants_Train_v2.xml",),
                                           "test": ("Restaurants_Test_Gold.xml",)},
                {"train": 3_693, "test": 1_134}, {("train", "test"): 1}, _SEMEVAL_SHA),
         Layout("laptops", "semeval", {"train": ("Laptop_Train_v2.xml",), "test": ("Laptops_Test_Gold.xml",)},
                {"train": 2_358, "test": 654}, _NOT_MEASURED, optional=True)),
        "copies the official XML files from --source (the release needs a META-SHARE login)",
        manual="download the Restaurants (and Laptops) train v2 and test gold XML files of SemEval-2014 Task 4 "
               "from the task's page (alt.qcri.org/semeval2014/task4, META-SHARE login), then run "
               "`python -m lit_rnncells.data prepare semeval14 --source FOLDER_WITH_THE_XML`",
        hub_id="alexcadillon/SemEval2014Task4"),
    Dataset(
        "imdb", "Large Movie Review Dataset v1.0 (Maas et al. 2011)", "DocumentSentimentDataModule (imdb)",
        (Source("http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz", "aclImdb_v1.tar.gz", 84_125_825,
                "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
                "7c2ac02c03563afcf9b574c7e56c153a",
                provenance="sha256 and size: TensorFlow Datasets' url_checksums/imdb_reviews.txt; MD5: torchtext"),),
        (Layout("reviews", "imdb", {"train": ("aclImdb_v1.tar.gz",), "test": ("aclImdb_v1.tar.gz",)},
                {"train": 25_000, "test": 25_000}, {("train", "test"): 123}),),
        "keeps aclImdb_v1.tar.gz as it is (the DataModule reads it in place)", builder=builders.keep,
        hub_id="stanfordnlp/imdb", members={"train": "aclImdb/train/{}", "test": "aclImdb/test/{}"},
        classes=("neg", "pos")),
    Dataset(
        "sst", "Stanford Sentiment Treebank (Socher et al. 2013), PTB-style trees", "DocumentSentimentDataModule (sst)",
        (Source("https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip", "trainDevTestTrees_PTB.zip", 789_539,
                "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc",
                provenance="size and sha256 as pinned by a public third-party project (not checked here)"),),
        (Layout("trees", "sst", {split: (Path(member).name,) for split, member in _SST_MEMBERS.items()},
                {"train": 8_544, "dev": 1_101, "test": 2_210}, _NOT_MEASURED),),
        "extracts trees/{train,dev,test}.txt",
        builder=builders.extract({member: Path(member).name for member in _SST_MEMBERS.values()}),
        hub_id="stanfordnlp/sst2", members=_SST_MEMBERS),
)}


def register(record: Dataset) -> Dataset:
    """Add (or replace) a dataset record: the DataModule, ``prepare`` and ``check`` read it from then on."""
    KNOWN[record.name] = record
    return record


def translation_datasets() -> List[str]:
    """The names ``TranslationDataModule(dataset=...)`` takes: every record with languages, and ``parallel``."""
    return sorted([name for name, record in KNOWN.items() if record.languages] + ["parallel"])


def variant(name: str) -> Optional[Tuple[Dataset, Layout]]:
    """The record and file group a language-model dataset name reads (``ptb_char`` → ptb, ``char``)."""
    for record in KNOWN.values():
        if name in record.variants:
            return record, layout(record.name, record.variants[name])
    return None


def checkable(name: str) -> bool:
    """Whether ``prepare`` / ``check`` know the dataset's release (a record with file groups)."""
    return name in KNOWN and bool(KNOWN[name].layouts)


def dataset(name: str) -> Dataset:
    """The known dataset ``name``, or the release a DataModule's dataset name reads (``ptb_char``: ``ptb``, whose
    word and character files come in one archive); one clear error listing the known names otherwise."""
    if not checkable(name):
        name = next((r.name for r in KNOWN.values() if name in r.variants and checkable(r.name)), name)
    if not checkable(name):
        names = sorted(n for n in KNOWN if checkable(n))
        close = difflib.get_close_matches(name, names + [v for n in names for v in KNOWN[n].variants], n=1)
        raise ValueError(f"Unknown dataset {name!r}{f' (did you mean {close[0]!r}?)' if close else ''}; choose one of "
                         f"{names} (python -m lit_rnncells.data list).")
    return KNOWN[name]


def layout(name: str, group: str) -> Layout:
    """One file group of a known dataset (e.g. ``layout("ptb", "char")``)."""
    for item in dataset(name).layouts:
        if item.name == group:
            return item
    raise KeyError(f"{name} has no file group {group!r}")
