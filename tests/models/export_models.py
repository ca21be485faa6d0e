#!/usr/bin/python3
"""Exports the PyTorch models kiln's model tests run: ResNet-50 (torchvision, random weights)
and a BERT-base-like encoder (12 layers, hidden 768, 12 heads, seq 128). Run with Debian's
/usr/bin/python3 (python3-torch, python3-torchvision). Usage: export_models.py OUT_DIR [names]"""
import math
import os
import sys

import torch
import torch.nn as nn


class BertLikeEncoder(nn.Module):
    """Token + position embeddings, LayerNorm, 12 post-LN encoder layers with GELU, like BERT-base."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.segment = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([EncoderLayer(hidden, heads, ffn) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos) + self.segment(torch.zeros_like(input_ids)))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.qkv = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(3)])
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, ffn)
        self.ff2 = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, bias):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = [lin(x).view(b, s, self.heads, d).transpose(1, 2) for lin in self.qkv]
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + bias, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.out(ctx))
        return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


def calibrate_batchnorm(model, batch):
    """Sets BatchNorm running statistics from data, as training would. Untrained statistics
    (mean 0, var 1) let activations grow layer after layer, so logits reach ~100 and float32
    rounding noise alone exceeds an atol of 1e-5; calibrated ones keep them at a trained
    network's scale."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def export(name, out_dir):
    torch.manual_seed(0)
    path = os.path.join(out_dir, name + ".onnx")
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50()
        calibrate_batchnorm(model, torch.randn(8, 3, 224, 224))
        args = (torch.randn(1, 3, 224, 224),)
        names, outs, dyn = ["input"], ["logits"], {"input": {0: "N"}, "logits": {0: "N"}}
    elif name == "bert_like":
        model = BertLikeEncoder().eval()
        ids = torch.randint(0, 30522, (1, 128))
        mask = torch.ones(1, 128, dtype=torch.int64)
        args = (ids, mask)
        names, outs = ["input_ids", "attention_mask"], ["last_hidden_state", "pooled"]
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
               "last_hidden_state": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}}
    else:
        raise SystemExit(f"unknown model {name}")
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names, output_names=outs,
                          dynamic_axes=dyn, opset_version=14, do_constant_folding=True)
    print(path)


if __name__ == "__main__":
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or ["resnet50", "bert_like"]:
        export(name, out_dir)
