"""The cases of the ONNX node suite that minic refuses, by name pattern, each with its reason.

Every case *not* matched here must pass on both paths; every case matched must
be refused with a ``UserError`` (a case that starts to pass shows up as a
failure, so the entry is deleted).  Patterns are regular expressions searched
in the case name; ``paths`` limits an entry to the compiler or the interpreter.
An entry with ``outcome="wrong"`` records a known numerical disagreement with
the expected data, and why (the counts still show it as wrong).
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Denied:
    pattern: str
    reason: str
    paths: tuple[str, ...] = ("minic", "interp")
    outcome: str = "refused"


_F32_FFT_NOISE = (
    "the expected imaginary parts that are exactly 0 hold 1.9e-7, the round-off of numpy's single-precision "
    "FFT (numpy >= 2 keeps complex64 in single precision), past the case's atol of 1e-7; ONNX does not say in "
    "what precision a DFT computes, and minic's (in f64) gives |im| < 1e-14 there")

DENYLIST: list[Denied] = [
    Denied(r"^test_dft_inverse(_opset19)?$", _F32_FFT_NOISE, outcome="wrong"),
    # --- refused ---
    Denied(r"^test_(flexattention$|flexattention_causal_mask$|flexattention_diff_head_sizes$|flexattention_double$|flexattention_fp16$|flexattention_gqa$|flexattention_prob_mod$|flexattention_relative_positional$|flexattention_scaled$|flexattention_score_mod$|flexattention_soft_cap$)", 'ONNX has no FlexAttention at opset 26'),
    Denied(r"^test_cast_e8m0(_|$)", 'element type FLOAT8E8M0'),
    Denied(r"^test_(ai_onnx_ml_label(_|$)|equal_string(_|$)|regex(_|$)|string(_|$)|strnormalizer(_|$))", 'element type STRING'),
    Denied(r"^test_image(_|$)", 'op ImageDecoder: not in minic'),
    Denied(r"^test_bernoulli(_|$)", 'op RandomUniformLike: not in minic'),
    Denied(r"^test_tfidfvectorizer(_|$)", 'op TfIdfVectorizer: not in minic'),
    Denied(r"^test_ai_onnx_ml_tree(_|$)", 'op ai.onnx.ml.TreeEnsemble: not in minic'),
    Denied(r"^test_(batchnorm_epsilon_training(_|$)|batchnorm_example_training(_|$))", 'training-mode batch normalization is not supported'),

    Denied(r"^test_training_dropout(_default)?(_mask)?$", 'training-mode dropout with a ratio above 0 is random (its mask cannot be reproduced)'),
    # --- end ---
]


def denied(name: str, path: str) -> Denied | None:
    """The entry that denies case ``name`` on ``path``, if any."""
    return next((d for d in DENYLIST if path in d.paths and re.search(d.pattern, name)), None)
