"""A BERT encoder (Devlin et al. 2019): post-norm transformer layers with exact (erf) GELU.

It takes token ids [B, T] and returns the last hidden states [B, T, hidden].
Every sequence is one segment without padding, so the token-type embedding is
row 0 and no attention mask is needed.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from minic.models.weights import randomize


@dataclass(frozen=True)
class Config:
    batch: int
    seq_len: int  # length of the example input
    vocab: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int = 512  # longest sequence the position table covers


CONFIGS: dict[str, Config] = {
    "full": Config(batch=1, seq_len=128, vocab=30522, hidden=768, layers=12, heads=12,
                   intermediate=3072),
    "small": Config(batch=2, seq_len=16, vocab=1000, hidden=64, layers=2, heads=4,
                    intermediate=256),
}


class Embeddings(nn.Module):
    """word + position + token-type embeddings, then LayerNorm."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab, config.hidden)
        self.position = nn.Embedding(config.max_positions, config.hidden)
        self.token_type = nn.Embedding(2, config.hidden)
        self.norm = nn.LayerNorm(config.hidden, eps=1e-12)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        # Positions 0..T-1 are the first T rows of the table: a slice, no arange.
        positions = self.position.weight[:seq_len]
        return self.norm(self.word(input_ids) + positions + self.token_type.weight[0])


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the whole sequence."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden] -> [B, heads, T, head_dim]."""
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, hidden = x.shape
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        context = scores.softmax(dim=-1) @ v
        return context.transpose(1, 2).reshape(batch, seq_len, hidden)


class Layer(nn.Module):
    """Attention and feed-forward sub-layers, each followed by add + LayerNorm (post-norm)."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.attention = SelfAttention(config.hidden, config.heads)
        self.attention_output = nn.Linear(config.hidden, config.hidden)
        self.attention_norm = nn.LayerNorm(config.hidden, eps=1e-12)
        self.intermediate = nn.Linear(config.hidden, config.intermediate)
        self.gelu = nn.GELU()  # the exact form: x * Phi(x), with erf
        self.output = nn.Linear(config.intermediate, config.hidden)
        self.output_norm = nn.LayerNorm(config.hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention_output(self.attention(x)))
        return self.output_norm(x + self.output(self.gelu(self.intermediate(x))))


class Bert(nn.Module):
    """Token ids [B, T] -> hidden states [B, T, hidden]; T may be at most `max_seq_len`."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.max_seq_len = config.max_positions
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.layers))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids)
        for layer in self.layers:
            x = layer(x)
        return x


def build(size: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The BERT of `size` with weights and random token ids drawn from `seed`."""
    config = CONFIGS[size]
    torch.manual_seed(seed)
    model = Bert(config)
    randomize(model)
    input_ids = torch.randint(0, config.vocab, (config.batch, config.seq_len))
    return model.eval(), (input_ids,)
