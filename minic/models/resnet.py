"""ResNet-50 v1.5 (He et al. 2016; the torchvision variant that strides the 3x3 conv).

Layer names follow torchvision (conv1, bn1, layer1.0.downsample.0, fc, ...),
so its state_dict keys line up with torchvision's `resnet50`.
"""

from dataclasses import dataclass

import torch
from torch import nn

from minic.models.weights import randomize


@dataclass(frozen=True)
class Config:
    batch: int
    image_side: int
    blocks: tuple[int, int, int, int]  # bottleneck blocks in each of the four stages
    width: int  # inner width of the first stage; doubles at every stage
    classes: int


CONFIGS: dict[str, Config] = {
    "full": Config(batch=1, image_side=224, blocks=(3, 4, 6, 3), width=64, classes=1000),
    "small": Config(batch=2, image_side=32, blocks=(1, 1, 1, 1), width=8, classes=10),
}


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand, plus a shortcut; relu after the add."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        # The shortcut needs a projection when the shape changes; Identity keeps
        # forward free of `if`s and adds nothing to the state_dict.
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + self.downsample(x))


class ResNet(nn.Module):
    """[B, 3, H, W] images -> [B, classes] logits; H and W shrink 32x before the pool."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, config.width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(config.width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        channels = config.width
        stages = []
        for index, blocks in enumerate(config.blocks):
            width = config.width * 2**index
            stride = 1 if index == 0 else 2
            stage = []
            for block in range(blocks):
                stage.append(Bottleneck(channels, width, stride if block == 0 else 1))
                channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, config.classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(image))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@torch.no_grad()
def tame_residuals(model: ResNet) -> None:
    """Shrink the batchnorm scales that feed each residual add.

    Random running statistics do not normalise the real activations, so with
    unit scales every stage would double the residual stream. Small scales on
    the last batchnorm of a block (as trained ResNets have) keep it O(1).
    """
    for block in model.modules():
        if isinstance(block, Bottleneck):
            block.bn3.weight.uniform_(0.1, 0.3)
            if isinstance(block.downsample, nn.Sequential):
                block.downsample[1].weight.uniform_(0.4, 0.8)


def build(size: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-50 (or its small cousin) with weights and standard-normal images drawn from `seed`."""
    config = CONFIGS[size]
    torch.manual_seed(seed)
    model = ResNet(config)
    randomize(model)
    tame_residuals(model)
    image = torch.randn(config.batch, 3, config.image_side, config.image_side)
    return model.eval(), (image,)
