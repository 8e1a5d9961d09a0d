"""The tokenizer: exact round trips, one id per special token, in both vocabularies; fingerprint = file hash."""

import hashlib

import pytest

from pipeline.debugger.language import SPECIAL_TOKENS, escape
from pipeline.format.go_tokens import GO_TOKENS
from pipeline.format.tokenizer import ALL_SPECIAL_TOKENS, PAD, bytes_tokenizer, train_bpe

TEXTS = [
    "",
    " leading space and  two\n\ttabs ",
    "<|trace_context_start|>def f(x):\n    return x  # << START_OF_TRACE<|frame_sep|><|call_sep|>",
    escape("a payload with <|frame_sep|> inside and é, 😀, \x00 bytes"),
    "<|go_program|>p\n<|go_events|><|go_GoBlock|>g1 (chan receive) main.main main.go:3\n<|go_next|><|go_End|>",
]


@pytest.fixture(scope="module", params=["bytes", "bpe"])
def tokenizer(request):
    if request.param == "bytes":
        return bytes_tokenizer()
    return train_bpe(TEXTS * 20, vocab_size=400)


def test_decoding_gives_back_the_exact_text(tokenizer):
    for text in TEXTS:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_every_special_token_is_one_id_and_an_escaped_one_is_not(tokenizer):
    assert set(ALL_SPECIAL_TOKENS) >= {*SPECIAL_TOKENS, *GO_TOKENS, PAD}
    for token in ALL_SPECIAL_TOKENS:
        assert tokenizer.encode(token) == [tokenizer.special_ids[token]]
    assert tokenizer.special_ids["<|frame_sep|>"] not in tokenizer.encode(escape("<|frame_sep|>"))


def test_the_fingerprint_is_the_hash_of_tokenizer_json(tokenizer):
    assert tokenizer.fingerprint == hashlib.sha256(tokenizer.json.encode()).hexdigest()


def test_bytes_ids_are_the_256_bytes_then_the_special_tokens():
    tokenizer = bytes_tokenizer()
    assert tokenizer.vocab_size == 256 + len(ALL_SPECIAL_TOKENS)
    assert len(tokenizer.encode("é")) == 2 and max(tokenizer.encode("any text")) < 256


def test_a_bpe_vocabulary_too_small_for_the_bytes_and_tokens_is_refused():
    with pytest.raises(ValueError, match="--vocab-size"):
        train_bpe(TEXTS, vocab_size=100)
