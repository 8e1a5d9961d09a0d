"""The tokenizer of packed datasets (HF `tokenizers`): one code path, two vocabularies.

- `bytes`: the 256 byte-level symbols plus every special token as one id each — nothing to train.
- `bpe`: a byte-level BPE trained on the dataset's texts (`BpeTrainer`), the special tokens again one id each.

Special tokens are the formal language's (`pipeline.debugger.language.SPECIAL_TOKENS`), the Go
documents' (`pipeline.format.go_tokens.GO_TOKENS`) and `<|pad|>`; they are added with
`special=True, normalized=False`, so a payload's escaped `<||...` never becomes one. Decoding gives back the
exact text (byte-level pre-tokenizer without a prefix space; the byte-level decoder). The saved form is
`tokenizer.json`; its fingerprint is the sha256 of that file's bytes.
"""

import hashlib
from collections.abc import Iterable, Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from pipeline.debugger.language import SPECIAL_TOKENS
from pipeline.format.go_tokens import GO_TOKENS

PAD = "<|pad|>"
ALL_SPECIAL_TOKENS: tuple[str, ...] = (*SPECIAL_TOKENS, *GO_TOKENS, PAD)
MODES = ("bytes", "bpe")
TOKENIZER_FILE = "tokenizer.json"


class PackTokenizer:
    """A loaded tokenizer: encode/decode, the special tokens' ids, its fingerprint."""

    def __init__(self, json_text: str):
        self.json = json_text
        self.fingerprint = hashlib.sha256(json_text.encode()).hexdigest()
        self._tokenizer = Tokenizer.from_str(json_text)
        self.special_ids = {token: self._id(token) for token in ALL_SPECIAL_TOKENS}
        self.pad_id = self.special_ids[PAD]
        self.vocab_size = self._tokenizer.get_vocab_size()

    def _id(self, token: str) -> int:
        found = self._tokenizer.token_to_id(token)
        if found is None:
            raise ValueError(f"tokenizer has no id for the special token {token!r}; re-run tracegen pack")
        return found

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)


def _byte_level(tokenizer: Tokenizer, use_regex: bool) -> Tokenizer:
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)  # pyright: ignore[reportAttributeAccessIssue]
    tokenizer.decoder = decoders.ByteLevel()  # pyright: ignore[reportAttributeAccessIssue]
    return tokenizer


def bytes_tokenizer() -> PackTokenizer:
    """256 byte symbols (ids 0..255) then the special tokens."""
    vocab = {symbol: index for index, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = _byte_level(Tokenizer(models.BPE(vocab=vocab, merges=[])), use_regex=False)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in ALL_SPECIAL_TOKENS])
    return PackTokenizer(tokenizer.to_str())


def train_bpe(texts: Iterable[str], vocab_size: int) -> PackTokenizer:
    """A byte-level BPE of `vocab_size` ids (special tokens included) trained on `texts`; deterministic for
    the same texts in the same order."""
    minimum = len(ALL_SPECIAL_TOKENS) + 256
    if type(vocab_size) is not int or vocab_size < minimum:
        raise ValueError(
            f"--vocab-size must be an int >= {minimum} (256 bytes + the special tokens), got {vocab_size!r}"
        )
    trainer = trainers.BpeTrainer(  # pyright: ignore[reportCallIssue]
        vocab_size=vocab_size,
        special_tokens=[AddedToken(token, special=True, normalized=False) for token in ALL_SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer = _byte_level(Tokenizer(models.BPE()), use_regex=True)
    tokenizer.train_from_iterator(texts, trainer)
    return PackTokenizer(tokenizer.to_str())
