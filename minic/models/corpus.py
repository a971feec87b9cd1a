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
(``SECOND_T``) with one compiled model.  wav2vec 2.0 reads raw audio of any length: its
strided convolutions make the frame count a derived dim, ``(T/20 - 1)`` frames for ``T``
samples (minic/ir/types.py).  Whisper's encoder (it checks for its fixed frame count) and
PatchTST (a fixed context window) have a dynamic ``B`` only.

The mixture-of-experts decoders (Mixtral, Qwen2-MoE) run transformers' default experts,
``grouped_mm``: on torch.export the router's top-k experts are sorted, counted with
``histc`` and multiplied by ``transformers::grouped_mm_fallback``.
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
    kind: str                                   # encoder | decoder | vision | audio | time series
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


def _audio(samples_per_step: int = 60):
    """A batch of 2 raw audio signals, ``samples_per_step`` samples for each step of ``t``."""
    def make(g: torch.Generator, t: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, samples_per_step * t, generator=g),)
    return make


def _signal(*shape: int):
    """A batch of 2 signals of a fixed shape: log-mel frames [16, 40] (Whisper),
    a multivariate time series [32, 3] (PatchTST)."""
    def make(g: torch.Generator, t: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, *shape, generator=g),)
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


def _encoder(model_cls: str, config_cls: str, **kw: Any) -> Callable[[], Any]:
    """The encoder of an encoder-decoder model (``model.get_encoder()``), as users run it alone."""
    whole = _model(model_cls, config_cls, **kw)
    return lambda: whole().get_encoder()


_LLAMA_LIKE = dict(_TEXT, num_key_value_heads=2)
_MOE = dict(_LLAMA_LIKE, num_experts_per_tok=2)         # 4 experts, each token to its top 2
_SPEECH = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4, intermediate_size=64,
               conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),   # 400 samples: 19 frames
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
_WHISPER = dict(vocab_size=96, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                num_mel_bins=16, max_source_positions=20,        # the encoder takes exactly 2 x 20 frames
                pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
_PATCHES = dict(num_input_channels=3, context_length=32, patch_length=8, patch_stride=4,  # 7 patches by unfold
                d_model=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4, ffn_dim=64, prediction_length=8)
_BATCH_ONLY = ({0: "B"},)

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
    CorpusModel("mixtral", "decoder", _model("MixtralForCausalLM", "MixtralConfig", **_MOE, num_local_experts=4),
                _ids()),
    CorpusModel("qwen2-moe", "decoder", _model("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **_MOE, num_experts=4,
                                               moe_intermediate_size=32, shared_expert_intermediate_size=32),
                _ids()),
    CorpusModel("vit", "vision", _model("ViTModel", "ViTConfig", hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                        num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8),
                _image(), dynamic_axes=({0: "B"},), input_names=("pixel_values",)),
    CorpusModel("resnet", "vision", _model("ResNetModel", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
                                           depths=[1, 1], layer_type="basic"),
                _image(), dynamic_axes=({0: "B"},), input_names=("pixel_values",)),
    CorpusModel("convnext", "vision", _model("ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1],
                                             num_stages=2), _image(), dynamic_axes=({0: "B"},),
                input_names=("pixel_values",)),
    CorpusModel("wav2vec2", "audio", _model("Wav2Vec2Model", "Wav2Vec2Config", **_SPEECH), _audio(),
                input_names=("input_values",)),
    CorpusModel("whisper-encoder", "audio", _encoder("WhisperModel", "WhisperConfig", **_WHISPER), _signal(16, 40),
                dynamic_axes=_BATCH_ONLY, input_names=("input_features",)),
    CorpusModel("patchtst", "time series", _model("PatchTSTForPrediction", "PatchTSTConfig", **_PATCHES),
                _signal(32, 3), dynamic_axes=_BATCH_ONLY, input_names=("past_values",)),
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
