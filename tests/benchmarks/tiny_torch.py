"""A tiny torch module for the end-to-end bench's torch side on the CPU (`--torch-module`): a transformer MLP block
with its norm and residual, weights drawn from a fixed seed, so that every process builds the same one."""

from __future__ import annotations

NAMES = ["x"]
SHAPE = (2, 16, 32)


def make(dtype: str = "fp32", device: str = "cpu", weights=None):
    """(module, input names), as e2e_sides.py's --factory takes them."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(SHAPE[-1])
            self.up = torch.nn.Linear(SHAPE[-1], 4 * SHAPE[-1])
            self.down = torch.nn.Linear(4 * SHAPE[-1], SHAPE[-1])

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)), approximate="tanh"))

    torch.manual_seed(0)
    kind = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    return Block().eval().to(device=device, dtype=kind), NAMES


def export(path, dtype: str = "fp32") -> None:
    """The module exported as users export it (torch.onnx, TorchScript, opset 17)."""
    import torch

    module, names = make(dtype)
    torch.onnx.export(module, (torch.randn(*SHAPE),), str(path), dynamo=False, opset_version=17, input_names=names,
                      output_names=["out"])
