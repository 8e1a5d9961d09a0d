import pytest

from textkit import wrap


def test_wrap_fills_lines():
    assert wrap("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("x", 0)
