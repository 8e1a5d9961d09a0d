"""A small decoder-only transformer: the model the pretraining stage trains on packed samples.

Pre-norm blocks (RMSNorm, causal self-attention with rotary positions, a SwiGLU MLP), tied input and
output embeddings. Attention is causal *within each document* of a packed sample (`document_ids`: the
index of the document each position belongs to), so a trajectory never attends to the one packed before
it. The default config is tiny on purpose: it trains in minutes on two CPU cores.
"""

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    seq_len: int
    layers: int = 2
    width: int = 128
    heads: int = 4
    mlp_ratio: float = 8 / 3

    def __post_init__(self):
        for name in ("vocab_size", "seq_len", "layers", "width", "heads"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"model {name} must be a positive int, got {value!r}")
        if self.width % self.heads or (self.width // self.heads) % 2:
            raise ValueError(f"model width {self.width} must split into {self.heads} heads of an even size")

    def as_dict(self) -> dict:
        return asdict(self)

    def parameters(self) -> int:
        """Parameters of the model this config builds (embeddings counted once: they are tied)."""
        hidden = self.hidden()
        per_layer = 4 * self.width * self.width + 3 * self.width * hidden + 2 * self.width
        return self.vocab_size * self.width + self.layers * per_layer + self.width

    def hidden(self) -> int:
        return 8 * math.ceil(self.width * self.mlp_ratio / 8)


class RMSNorm(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
        return (x.float() * scale).type_as(x) * self.weight


def rotary(position_ids: torch.Tensor, head_width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles at each position, [batch, length, 1, head_width / 2]."""
    inverse = 1.0 / (10_000 ** (torch.arange(0, head_width, 2, device=position_ids.device).float() / head_width))
    angles = position_ids.float()[..., None] * inverse
    return angles.cos()[:, :, None], angles.sin()[:, :, None]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads = config.heads
        self.attention_norm, self.mlp_norm = RMSNorm(config.width), RMSNorm(config.width)
        self.qkv = nn.Linear(config.width, 3 * config.width, bias=False)
        self.out = nn.Linear(config.width, config.width, bias=False)
        self.gate_up = nn.Linear(config.width, 2 * config.hidden(), bias=False)
        self.down = nn.Linear(config.hidden(), config.width, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: list):
        """`cache`: this block's keys and values of earlier positions ([] for none); extended in place."""
        batch, length, width = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).view(batch, length, 3, self.heads, -1).unbind(2)
        q, k, v = rotate(q, cos, sin).transpose(1, 2), rotate(k, cos, sin).transpose(1, 2), v.transpose(1, 2)
        if cache:
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        cache[:] = [k, v]
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class DecoderLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.width)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(
        self,
        input_ids: torch.Tensor,
        document_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [batch, length, vocab] of the next token at every position. With `document_ids` a position
        attends only to earlier positions of its own document; `position_ids` (restarting at each document)
        default to 0..length-1."""
        batch, length = input_ids.shape
        causal = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
        if document_ids is None:
            mask = causal[None, None]
        else:
            same = document_ids[:, :, None] == document_ids[:, None, :]
            mask = (causal[None] & same)[:, None]
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device).expand(batch, length)
        return self._layers(input_ids, mask, position_ids, [[] for _ in self.blocks])

    def extend(self, input_ids: torch.Tensor, cache: "DecodeCache") -> torch.Tensor:
        """Logits of `input_ids` [1, n] appended to one document whose earlier positions are in `cache`
        (which then holds them too): what decoding and prefilling a prompt use."""
        start, length = cache.length, input_ids.shape[1]
        mask = torch.ones(length, start + length, dtype=torch.bool, device=input_ids.device).tril(diagonal=start)
        positions = torch.arange(start, start + length, device=input_ids.device)[None]
        cache.length += length
        return self._layers(input_ids, mask[None, None], positions, cache.layers)

    def _layers(self, input_ids, mask, position_ids, caches) -> torch.Tensor:
        cos, sin = rotary(position_ids, self.config.width // self.config.heads)
        x = self.embed(input_ids)
        for block, cache in zip(self.blocks, caches, strict=True):
            x = block(x, mask, cos, sin, cache)
        return self.norm(x) @ self.embed.weight.T


class DecodeCache:
    """Keys and values of one document's positions so far, per block; `fork()` is a copy that can be extended
    without changing this one (the tensors are shared until extended: extending concatenates new ones)."""

    def __init__(self, layers: int):
        self.length = 0
        self.layers: list[list] = [[] for _ in range(layers)]

    def fork(self) -> "DecodeCache":
        copy = DecodeCache(0)
        copy.length, copy.layers = self.length, [list(layer) for layer in self.layers]
        return copy
