"""The onnxruntime backend takes every input the model declares, even one that
torch.onnx.export drops because the graph never reads it."""
import numpy as np
import torch

import minic


class UsesOne(torch.nn.Module):
    def forward(self, x, unused):
        return x * 2


def test_unused_input_is_accepted_and_ignored():
    x, u = torch.ones(2, 3), torch.zeros(4)
    run = minic.compile(UsesOne(), (x, u), backend="onnxruntime")
    np.testing.assert_array_equal(run(x.numpy(), u.numpy()), 2 * x.numpy())
