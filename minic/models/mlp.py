"""A two-layer perceptron: the smallest model that still has a matmul, a bias and a relu."""

import torch
from torch import nn

from minic.models.weights import randomize

# size -> (batch, input features, hidden features, classes)
CONFIGS: dict[str, tuple[int, int, int, int]] = {
    "full": (8, 784, 512, 10),
    "small": (2, 64, 32, 10),
}


class MLP(nn.Module):
    """x -> linear -> relu -> linear: [B, in] -> [B, classes]."""

    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def build(size: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The MLP of `size` with weights and a standard-normal input batch drawn from `seed`."""
    batch, features, hidden, classes = CONFIGS[size]
    torch.manual_seed(seed)
    model = MLP(features, hidden, classes)
    randomize(model)
    return model.eval(), (torch.randn(batch, features),)
