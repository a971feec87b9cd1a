"""Seeded random weights for the zoo: scales that keep activations O(1).

There are no downloads: every weight is drawn from torch's global generator,
which the builder seeds first. Norm layers get non-trivial values (random
scales, shifts and running statistics) so that a compiler which drops or
mis-folds one of them produces visibly wrong numbers.
"""

import math

import torch
from torch import nn


@torch.no_grad()
def randomize(model: nn.Module) -> None:
    """Re-draw the parameters and buffers of every standard layer in `model`."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            # He (kaiming) init: keeps the variance steady through conv + relu.
            fan_in = module.in_channels // module.groups * math.prod(module.kernel_size)
            module.weight.normal_(0.0, math.sqrt(2.0 / fan_in))
        elif isinstance(module, nn.Linear):
            # LeCun init: unit-variance inputs give unit-variance outputs, so
            # attention scores are O(1) and softmax is far from uniform.
            module.weight.normal_(0.0, 1.0 / math.sqrt(module.in_features))
        elif isinstance(module, nn.Embedding):
            module.weight.normal_(0.0, 1.0)
        elif isinstance(module, nn.BatchNorm2d):
            module.weight.uniform_(0.5, 1.5)
            module.running_mean.normal_(0.0, 0.1)
            module.running_var.uniform_(0.5, 1.5)  # positive, as a variance must be
        elif isinstance(module, nn.LayerNorm):
            module.weight.normal_(1.0, 0.1)
        bias = getattr(module, "bias", None)
        if isinstance(bias, torch.Tensor):
            bias.normal_(0.0, 0.1)
