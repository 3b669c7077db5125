"""Lexical (BM25) sparse vectors for the Qdrant engine (DESIGN.md section 5, "keyword/BM25").

Documents and queries become sparse term vectors with Qdrant's own BM25 model (``qdrant_edge.Bm25``:
tokenizer, lower-casing, English stop words and Snowball stemming, hashed term ids); the collection's
sparse vector has the IDF modifier, so the engine computes BM25 inside the filtered search. The same
encoder serves the embedded engine and a Qdrant server, so their term ids agree.

Chinese has no spaces: CJK runs are segmented with ``rjieba`` (jieba-rs) and joined by spaces first,
leaving out Chinese function words (the ``stop-words`` package's Chinese list, plus sentence-final
particles and interjections it lacks). Qdrant's model drops English stop words only; without this a
filler turn such as "好的" matched any question with "的" and, being the only lexical hit, won the
lexical side of recall (bench updates: "用户的饮食习惯是什么？" ranked "好的" first).
"""

from __future__ import annotations

import re
from functools import cache, cached_property

import qdrant_edge as qe

from hindsight.stores.vector import SparseVector

_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
AVG_DOC_WORDS = 32
"""BM25 average document length (words) used for length normalisation; a typical memory turn."""


ZH_PARTICLES = frozenset("吗呢啊呀哦嗯哈呗嘿喔噢")
"""Sentence-final particles and interjections missing from the ``stop-words`` Chinese list."""


@cache
def zh_stop_words() -> frozenset[str]:
    """Chinese words that are never lexical evidence (module doc)."""
    from stop_words import get_stop_words  # noqa: PLC0415

    return frozenset(get_stop_words("zh")) | ZH_PARTICLES


def segment_cjk(text: str) -> str:
    """``text`` with every CJK run split by ``rjieba.cut_for_search`` (words and their sub-words, so
    "故宫" finds "故宫博物院"), Chinese stop words left out (:func:`zh_stop_words`), space-separated."""
    if not _CJK_RUN.search(text):
        return text
    import rjieba  # noqa: PLC0415  (loads its dictionary once, only when CJK text appears)

    stop = zh_stop_words()

    def words(match: re.Match[str]) -> str:
        return " " + " ".join(w for w in rjieba.cut_for_search(match.group(0)) if w not in stop) + " "

    return _CJK_RUN.sub(words, text)


class LexicalEncoder:
    """BM25 term vectors for documents (``k1=1.2``, ``b=0.75``) and queries (term presence)."""

    def __init__(self, avg_doc_words: int = AVG_DOC_WORDS) -> None:
        self._avg = avg_doc_words

    @cached_property
    def _model(self) -> qe.Bm25:
        return qe.Bm25(qe.Bm25Config(avg_len=float(self._avg)))

    @staticmethod
    def _convert(vec: qe.SparseVector) -> SparseVector:
        return SparseVector(tuple(vec.indices), tuple(float(v) for v in vec.values))

    def document(self, text: str) -> SparseVector:
        """Sparse BM25 document vector of ``text`` (empty when it has no indexable term)."""
        return self._convert(self._model.embed_document(segment_cjk(text)))

    def query(self, text: str) -> SparseVector:
        """Sparse query vector of ``text`` (1.0 per distinct term)."""
        return self._convert(self._model.embed_query(segment_cjk(text)))
