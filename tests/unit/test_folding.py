"""Script folds (hindsight.folding): same length, Traditional to Simplified, Greek accents dropped."""

from __future__ import annotations

import pytest

from hindsight.folding import fold, greek_unaccented, simplified


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我的密碼是什麼", "我的密码是什么"),
        ("請記住：緊急聯絡人已更改", "请记住：紧急联络人已更改"),
        ("简体中文不变", "简体中文不变"),
        ("plain ASCII text", "plain ASCII text"),
        ("認証コードは誰にも教えないでください", "認証コードは誰にも教えないでください"),  # Japanese stays
    ],
)
def test_simplified_folds_traditional_characters(text: str, expected: str) -> None:
    assert simplified(text) == expected


def test_folds_keep_every_offset() -> None:
    text = "帳號 li.wei，密碼 Qx81!kk；ΑΠΟΘΗΚΕΥΣΕ και αποθήκευσε"
    folded = fold(text)
    assert len(folded) == len(text)
    assert folded[folded.index("Qx81!kk") :][:7] == text[text.index("Qx81!kk") :][:7]


def test_greek_accents_are_dropped_so_capitals_match_lower_case() -> None:
    assert greek_unaccented("αποθήκευσε ΐ ώ Ά") == "αποθηκευσε ι ω Α"
    assert fold("ΔΙΑΧΕΙΡΙΣΤΉΣ".lower()) == fold("διαχειριστής")


def test_text_without_cjk_or_greek_is_returned_as_is() -> None:
    text = "Ünïcödé but neither Chinese nor Greek"
    assert fold(text) is text
