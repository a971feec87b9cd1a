"""The real-model corpus: ``transformers`` architectures minic never saw, beside the zoo.

The zoo's five models are minic's own definitions, for benchmarks; these are the
models users actually run, built from small configs with seeded random weights
(nothing is downloaded) and called as users call them: ``model(input_ids)`` with
every default left as it is, so decoders build their KV cache (a ``DynamicCache``
whose first ``cat`` takes an empty ``f32[0]``), masks come from ``arange`` and
comparisons, and attention is ``scaled_dot_product_attention``.

    module, inputs = corpus.get("gpt2")
    module(*inputs)               # the model's first output: logits or hidden states

Token models have dynamic ``B`` and ``T`` and are checked at two sequence lengths
(``SECOND_T``) with one compiled model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from minic.errors import UserError

HIDDEN = 32                 # small everything: hidden 32, 1 layer, 4 heads, vocab 96
# One layer: every layer runs the same code (torch.export's time grows with the layers).
# ALBERT keeps two (one shared layer, used twice) and GPT-Neo two (a global, then a local one).
LAYERS = 1
SECOND_T = 11               # the second sequence length (the first is the example's, 7)


@dataclass(frozen=True)
class CorpusModel:
    name: str
    kind: str                                   # encoder | decoder | vision
    make: Callable[[], Any]                     # -> a transformers PreTrainedModel
    inputs: Callable[[torch.Generator, int], tuple[torch.Tensor, ...]]
    dynamic_axes: tuple[dict[int, str], ...] = field(default=({0: "B", 1: "T"},))
    input_names: tuple[str, ...] = ("input_ids",)


class FirstOutput(torch.nn.Module):
    """The model called with its defaults; its first output (logits, last hidden state).
    A ModelOutput also carries the KV cache and pooled states, which a caller reads
    from the model itself; minic graphs return tensors."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[0]


def _ids(vocab: int = 96, batch: int = 2):
    def make(g: torch.Generator, t: int) -> tuple[torch.Tensor, ...]:
        return (torch.randint(0, vocab, (batch, t), generator=g),)
    return make


def _image(channels: int = 3, size: int = 32):
    def make(g: torch.Generator, t: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, channels, size, size, generator=g),)
    return make


_TEXT = dict(vocab_size=96, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=64)


def _config(cls_name: str, **kw: Any):
    import transformers
    return getattr(transformers, cls_name)(**kw)


def _model(model_cls: str, config_cls: str, **kw: Any) -> Callable[[], Any]:
    def make():
        import transformers
        return getattr(transformers, model_cls)(_config(config_cls, **kw))
    return make


_LLAMA_LIKE = dict(_TEXT, num_key_value_heads=2)

MODELS: list[CorpusModel] = [
    CorpusModel("bert", "encoder", _model("BertModel", "BertConfig", **_TEXT), _ids()),
    CorpusModel("roberta", "encoder", _model("RobertaModel", "RobertaConfig", **_TEXT, pad_token_id=1), _ids()),
    CorpusModel("distilbert", "encoder", _model("DistilBertModel", "DistilBertConfig", vocab_size=96, dim=HIDDEN,
                                                n_layers=LAYERS, n_heads=4, hidden_dim=64,
                                                max_position_embeddings=64), _ids()),
    CorpusModel("albert", "encoder", _model("AlbertModel", "AlbertConfig", **dict(_TEXT, num_hidden_layers=2),
                                            embedding_size=16), _ids()),
    CorpusModel("gpt2", "decoder", _model("GPT2LMHeadModel", "GPT2Config", vocab_size=96, n_embd=HIDDEN, n_layer=LAYERS,
                                          n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0), _ids()),
    CorpusModel("llama", "decoder", _model("LlamaForCausalLM", "LlamaConfig", **_LLAMA_LIKE), _ids()),
    CorpusModel("mistral", "decoder", _model("MistralForCausalLM", "MistralConfig", **_LLAMA_LIKE,
                                             sliding_window=4), _ids()),
    CorpusModel("qwen2", "decoder", _model("Qwen2ForCausalLM", "Qwen2Config", **_LLAMA_LIKE), _ids()),
    CorpusModel("phi", "decoder", _model("PhiForCausalLM", "PhiConfig", **_LLAMA_LIKE), _ids()),
    CorpusModel("opt", "decoder", _model("OPTForCausalLM", "OPTConfig", vocab_size=96, hidden_size=HIDDEN,
                                         num_hidden_layers=LAYERS, num_attention_heads=4, ffn_dim=64,
                                         max_position_embeddings=64, word_embed_proj_dim=HIDDEN), _ids()),
    CorpusModel("gpt-neo", "decoder", _model("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=96, hidden_size=HIDDEN,
                                             num_layers=2, num_heads=4, max_position_embeddings=64,
                                             attention_types=[[["global", "local"], 1]], window_size=4), _ids()),
    CorpusModel("vit", "vision", _model("ViTModel", "ViTConfig", hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                        num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8),
                _image(), dynamic_axes=({0: "B"},), input_names=("pixel_values",)),
    CorpusModel("resnet", "vision", _model("ResNetModel", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
                                           depths=[1, 1], layer_type="basic"),
                _image(), dynamic_axes=({0: "B"},), input_names=("pixel_values",)),
    CorpusModel("convnext", "vision", _model("ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1],
                                             num_stages=2), _image(), dynamic_axes=({0: "B"},),
                input_names=("pixel_values",)),
]
_BY_NAME = {m.name: m for m in MODELS}


def names() -> list[str]:
    return list(_BY_NAME)


def info(name: str) -> CorpusModel:
    if name not in _BY_NAME:
        raise UserError(f"unknown corpus model '{name}'; available: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def get(name: str, seed: int = 0, seq_len: int = 7) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model (eval mode, seeded weights, its first output) and example inputs."""
    m = info(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = FirstOutput(m.make().eval())
    return model, m.inputs(torch.Generator().manual_seed(seed), seq_len)


def inputs(name: str, seed: int, seq_len: int) -> tuple[torch.Tensor, ...]:
    return info(name).inputs(torch.Generator().manual_seed(seed + 1), seq_len)
