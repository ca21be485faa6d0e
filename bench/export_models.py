#!/usr/bin/env python3
"""Exports the `kiln bench` model set as ONNX (opset 14, dynamic batch, random weights) into a
folder. Run with Debian's Python and its python3-torch / python3-torchvision packages:

    /usr/bin/python3 bench/export_models.py OUT_DIR [NAME ...]

Without names it exports every model below; existing files are kept (delete to re-export).
Weights are random (torch.manual_seed(0)); BatchNorm statistics are calibrated on random data
(as tests/models/export_models.py does) so activations stay at a trained network's scale and
float32 rounding does not dominate the output comparison with ONNX Runtime.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from export_models import BertLikeEncoder, calibrate_batchnorm  # noqa: E402

VISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
          "shufflenet_v2_x1_0", "efficientnet_b0", "vit_b_16"]
ALL = VISION + ["bert_like", "mlp"]


class MLP(nn.Module):
    """3 x (Linear 1024 -> 1024 + ReLU) and a 1024 -> 10 head."""

    def __init__(self, width=1024, layers=3, classes=10):
        super().__init__()
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(width, width), nn.ReLU()]
        mods.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


def build(name):
    if name in VISION:
        import torchvision
        model = getattr(torchvision.models, name)()
        calibrate_batchnorm(model, torch.randn(8, 3, 224, 224))
        model.eval()
        return model, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"], \
            {"input": {0: "N"}, "logits": {0: "N"}}
    if name == "bert_like":
        model = BertLikeEncoder().eval()
        args = (torch.randint(0, 30522, (1, 128)), torch.ones(1, 128, dtype=torch.int64))
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
               "last_hidden_state": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}}
        return model, args, ["input_ids", "attention_mask"], ["last_hidden_state", "pooled"], dyn
    if name == "mlp":
        return MLP().eval(), (torch.randn(1, 1024),), ["input"], ["logits"], \
            {"input": {0: "N"}, "logits": {0: "N"}}
    raise SystemExit(f"unknown model {name} (known: {', '.join(ALL)})")


def export(name, out_dir):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        print(f"{path} (exists)")
        return
    torch.manual_seed(0)
    model, args, names, outs, dyn = build(name)
    tmp = path + ".tmp"
    # Under no_grad torch's nn.MultiheadAttention (ViT) takes its fused fast path, which has no
    # ONNX export; with autograd on (weights require grad) it runs the exportable ops.
    grad = torch.enable_grad() if name == "vit_b_16" else torch.no_grad()
    with grad:
        torch.onnx.export(model, args, tmp, input_names=names, output_names=outs,
                          dynamic_axes=dyn, opset_version=14, do_constant_folding=True)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for n in sys.argv[2:] or ALL:
        export(n, out_dir)
