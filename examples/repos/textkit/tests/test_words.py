from textkit import frequencies, tokenize, top_words


def test_tokenize_splits_on_punctuation():
    assert tokenize("Hi, there!") == ["hi", "there"]


def test_frequencies_count_words():
    assert frequencies("a b a") == {"a": 2, "b": 1}


def test_top_words_break_ties_alphabetically():
    assert top_words("b a b a c", n=2) == ["a", "b"]
