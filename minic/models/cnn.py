"""A small convolutional network: conv + batchnorm + relu + maxpool stages, then a classifier."""

import torch
from torch import nn

from minic.models.weights import randomize

# size -> (batch, image side, channels of each stage, classes)
CONFIGS: dict[str, tuple[int, int, tuple[int, ...], int]] = {
    "full": (8, 32, (32, 64, 128), 10),
    "small": (2, 16, (8, 16), 10),
}


def stage(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 conv (same padding) -> batchnorm -> relu -> 2x2 maxpool: halves the image side."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class CNN(nn.Module):
    """[B, 3, H, W] images -> [B, classes] logits."""

    def __init__(self, channels: tuple[int, ...], classes: int) -> None:
        super().__init__()
        widths = (3, *channels)
        self.features = nn.Sequential(*(stage(a, b) for a, b in zip(widths, widths[1:])))
        self.pool = nn.AdaptiveAvgPool2d(1)  # global average pool: any H, W -> 1x1
        self.fc = nn.Linear(channels[-1], classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(image)), 1))


def build(size: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The CNN of `size` with weights and standard-normal images drawn from `seed`."""
    batch, side, channels, classes = CONFIGS[size]
    torch.manual_seed(seed)
    model = CNN(channels, classes)
    randomize(model)
    return model.eval(), (torch.randn(batch, 3, side, side),)
