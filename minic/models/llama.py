"""A tiny LLaMA-style decoder (Touvron et al. 2023): pre-norm RMSNorm, rotary
position embeddings, causal attention and a SwiGLU feed-forward.

It takes token ids [B, T] and returns next-token logits [B, T, vocab]. The
rotary tables and the causal mask are computed once, for `max_seq_len`
positions, and sliced to T in `forward`: exporters see slices, not arange.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minic.models.weights import randomize


@dataclass(frozen=True)
class Config:
    batch: int
    seq_len: int  # length of the example input
    vocab: int
    dim: int
    layers: int
    heads: int
    ffn_dim: int  # about 8/3 * dim rounded up to a multiple of 64, as in LLaMA
    max_seq_len: int
    rope_theta: float = 10000.0


CONFIGS: dict[str, Config] = {
    "full": Config(batch=1, seq_len=64, vocab=1024, dim=256, layers=4, heads=8, ffn_dim=704,
                   max_seq_len=256),
    "small": Config(batch=2, seq_len=16, vocab=256, dim=64, layers=2, heads=4, ffn_dim=192,
                    max_seq_len=64),
}


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight: LayerNorm without centring or bias."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[i], x[i + half]) of the last axis by the angles in cos/sin [T, half]."""
    half = cos.shape[-1]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Attention(nn.Module):
    """Causal multi-head attention with rotary embeddings on queries and keys."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, dim] -> [B, heads, T, head_dim]."""
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        batch, seq_len, dim = x.shape
        q = rotate(self.split_heads(self.wq(x)), cos, sin)
        k = rotate(self.split_heads(self.wk(x)), cos, sin)
        v = self.split_heads(self.wv(x))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim) + mask
        context = scores.softmax(dim=-1) @ v
        return self.wo(context.transpose(1, 2).reshape(batch, seq_len, dim))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """Pre-norm residual block: x + attention(norm(x)), then x + ffn(norm(x))."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim)
        self.attention = Attention(config.dim, config.heads)
        self.ffn_norm = RMSNorm(config.dim)
        self.ffn = FeedForward(config.dim, config.ffn_dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    """Token ids [B, T] -> logits [B, T, vocab]; T may be at most `max_seq_len`."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.max_seq_len = config.max_seq_len
        self.embed = nn.Embedding(config.vocab, config.dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim)
        self.output = nn.Linear(config.dim, config.vocab, bias=False)
        # Rotary angles: position p turns pair i by p * theta^(-2i / head_dim).
        head_dim = config.dim // config.heads
        inverse_freq = config.rope_theta ** (-torch.arange(0, head_dim, 2) / head_dim)
        angles = torch.outer(torch.arange(config.max_seq_len), inverse_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        # Additive causal mask: 0 where key <= query, a large finite negative
        # above the diagonal (finite, so no inf - inf = nan anywhere). It has one
        # row and column to spare: were the [T, T] slice ever the whole table,
        # it would be contiguous only then, and torch.export would guard on
        # T != max_seq_len.
        side = config.max_seq_len + 1
        mask = torch.full((side, side), -1e9).triu(diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        cos, sin = self.cos[:seq_len], self.sin[:seq_len]
        mask = self.mask[:seq_len, :seq_len]
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


def build(size: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The LLaMA of `size` with weights and random token ids drawn from `seed`."""
    config = CONFIGS[size]
    torch.manual_seed(seed)
    model = Llama(config)
    randomize(model)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, RMSNorm):
                module.weight.normal_(1.0, 0.1)
    input_ids = torch.randint(0, config.vocab, (config.batch, config.seq_len))
    return model.eval(), (input_ids,)
