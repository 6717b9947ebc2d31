"""The sentence encoder on onnxruntime, with int8 weights: Recall's faster engine (issue #26).

:class:`~cairn.memory.store.encoder.BertEncoder` (numpy) reads all 42 MB of float32 layer
weights for every query: a query has a dozen tokens, so each product is close to a
matrix-vector one, bound by memory traffic, and numpy has no fast int8 product. This module
builds the same network as an ONNX graph, in memory, from the weights of the installed model
package (nothing is downloaded, nothing is written to disk), with every weight matrix quantized
to int8 per output row (symmetric, ``scale = max |row| / 127``) and run by onnxruntime's
dynamically quantized products (``DynamicQuantizeMatMul``: the activations are quantized to
uint8 per call). A quarter of the bytes to read: a query costs about a quarter of the numpy
encoder's CPU (benchmarks/README.md, issue #26's fifth part). Each text runs alone, so the
activations' scale, and the vector, never depend on the texts batched with it.

The vectors are not bit-identical to the numpy encoder's: they agree to a cosine of at least
0.985 (tests/memory/store/test_onnx_encoder.py; 0.993-0.994 on average over the paraphrase
set's queries and memories), and the paraphrase sets' candidate-list recall is the same within
one pair, so vectors saved by either engine stay valid for the other. The embedding (a gather,
a sum and a LayerNorm) and the mean pooling stay in numpy; the six layers run in the graph.

The ONNX protobuf is written by hand (below: the few messages and fields a graph needs, from
onnx/onnx.proto), so the ``onnx`` package is not needed. onnxruntime is imported only when
:func:`build_onnx_encoder` runs, on the refined and background paths.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from cairn.memory.store.encoder import BertEncoder

__all__ = ["OnnxEncoder", "build_onnx_encoder", "model_bytes"]

_Array = npt.NDArray[np.float32]
_OPSET = 17  # LayerNormalization
_IR_VERSION = 8
_FLOAT, _UINT8, _INT8, _INT64 = 1, 2, 3, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType
_MS = "com.microsoft"


# --- protobuf, the wire format: varints, and length-delimited fields -------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s take ten bytes (two's complement)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _attribute(name: str, value: float | int | Iterable[int]) -> bytes:
    body = _field(1, name)
    if isinstance(value, float):
        body += _varint(2 << 3 | 5) + struct.pack("<f", value) + _int_field(20, _ATTR_FLOAT)
    elif isinstance(value, int):
        body += _int_field(3, value) + _int_field(20, _ATTR_INT)
    else:
        body += b"".join(_int_field(8, item) for item in value) + _int_field(20, _ATTR_INTS)
    return body


def _node(op: str, inputs: Iterable[str], outputs: Iterable[str], domain: str = "",
          **attributes: Any) -> bytes:  # fmt: skip
    body = b"".join(_field(1, name) for name in inputs)
    body += b"".join(_field(2, name) for name in outputs)
    body += _field(4, op)
    if domain:
        body += _field(7, domain)
    body += b"".join(_field(5, _attribute(key, value)) for key, value in attributes.items())
    return _field(1, body)  # GraphProto.node


_TYPES = {np.dtype(np.float32): _FLOAT, np.dtype(np.uint8): _UINT8,
          np.dtype(np.int8): _INT8, np.dtype(np.int64): _INT64}  # fmt: skip


def _initializer(name: str, array: np.ndarray) -> bytes:
    data = np.ascontiguousarray(array)
    body = b"".join(_int_field(1, size) for size in data.shape)
    body += _int_field(2, _TYPES[data.dtype]) + _field(8, name) + _field(9, data.tobytes())
    return _field(5, body)  # GraphProto.initializer


def _value_info(name: str, elem_type: int, dims: Iterable[str | int]) -> bytes:
    shape = b"".join(
        _field(1, _field(2, dim) if isinstance(dim, str) else _int_field(1, dim)) for dim in dims
    )
    tensor = _int_field(1, elem_type) + _field(2, shape)
    return _field(1, name) + _field(2, _field(1, tensor))


# --- the graph ----------------------------------------------------------------------------


def _quantized(weight: _Array) -> tuple[npt.NDArray[np.int8], _Array]:
    """int8 of ``weight`` (out × in) transposed to in × out, and the scale of each column."""
    scale = np.abs(weight).max(axis=1) / np.float32(127)
    scale = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    quantized = np.rint(weight / scale[:, None]).clip(-127, 127).astype(np.int8)
    return np.ascontiguousarray(quantized.T), scale


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []
        self._count = 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def constant(self, stem: str, array: np.ndarray) -> str:
        name = self.name(stem)
        self.initializers.append(_initializer(name, array))
        return name

    def op(self, op: str, *inputs: str, domain: str = "", **attributes: Any) -> str:
        out = self.name(op.lower())
        self.nodes.append(_node(op, inputs, [out], domain, **attributes))
        return out

    def linear(self, x: str, weight: _Array, bias: _Array) -> str:
        """``x @ weight.T + bias`` with int8 weights."""
        quantized, scale = _quantized(weight)
        return self.op("DynamicQuantizeMatMul", x, self.constant("w", quantized),
                       self.constant("s", scale), "", self.constant("b", bias),
                       domain=_MS)  # fmt: skip

    def norm(self, x: str, norm: tuple[_Array, _Array], eps: float) -> str:
        weight, bias = norm
        return self.op("LayerNormalization", x, self.constant("g", weight.reshape(-1)),
                       self.constant("n", bias.reshape(-1)), axis=-1, epsilon=eps)  # fmt: skip


def model_bytes(encoder: BertEncoder) -> bytes:
    """The serialized ONNX model of ``encoder``'s layers: input ``x`` (batch × length × dim, the
    normalised embeddings of sequences without padding), output ``y`` (the last layer, of the
    same shape)."""
    dim, heads = encoder.dim, encoder.heads
    width = dim // heads
    g = _Graph()
    split_heads = g.constant("shape", np.array([0, 0, heads, width], dtype=np.int64))
    merge_heads = g.constant("shape", np.array([0, 0, dim], dtype=np.int64))
    scale = g.constant("scale", np.array(1 / math.sqrt(width), dtype=np.float32))
    half = g.constant("half", np.array(0.5, dtype=np.float32))
    one = g.constant("one", np.array(1.0, dtype=np.float32))
    root2 = g.constant("root2", np.array(math.sqrt(2.0), dtype=np.float32))
    x = "x"
    for layer in encoder.layers:
        qkv = []
        for part in range(3):
            rows = slice(part * dim, (part + 1) * dim)
            projected = g.linear(x, layer.qkv[rows], layer.qkv_bias[rows, 0])
            qkv.append(g.op("Reshape", projected, split_heads))  # batch, length, heads, width
        query = g.op("Transpose", qkv[0], perm=[0, 2, 1, 3])
        key = g.op("Transpose", qkv[1], perm=[0, 2, 3, 1])
        value = g.op("Transpose", qkv[2], perm=[0, 2, 1, 3])
        scores = g.op("Mul", g.op("MatMul", query, key), scale)  # one sequence: no padding
        attended = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        merged = g.op("Reshape", g.op("Transpose", attended, perm=[0, 2, 1, 3]), merge_heads)
        out = g.linear(merged, layer.attention_out, layer.attention_out_bias[:, 0])
        x = g.norm(g.op("Add", out, x), layer.attention_norm, encoder.eps)
        hidden = g.linear(x, layer.up, layer.up_bias[:, 0])
        erf = g.op("Erf", g.op("Div", hidden, root2))
        gelu = g.op("Mul", g.op("Mul", hidden, half), g.op("Add", erf, one))
        out = g.linear(gelu, layer.down, layer.down_bias[:, 0])
        x = g.norm(g.op("Add", out, x), layer.output_norm, encoder.eps)
    g.nodes.append(_node("Identity", [x], ["y"]))
    graph = b"".join(g.nodes) + _field(2, "cairn-minilm") + b"".join(g.initializers)
    graph += _field(11, _value_info("x", _FLOAT, ["batch", "length", dim]))
    graph += _field(12, _value_info("y", _FLOAT, ["batch", "length", dim]))
    opsets = _field(8, _int_field(2, _OPSET)) + _field(8, _field(1, _MS) + _int_field(2, 1))
    return _int_field(1, _IR_VERSION) + opsets + _field(2, "cairn") + _field(7, graph)


class OnnxEncoder:
    """:meth:`BertEncoder.encode` on an onnxruntime session of :func:`model_bytes`."""

    def __init__(self, encoder: BertEncoder, session: Any) -> None:
        self.dim = encoder.dim
        self.heads = encoder.heads
        self.max_tokens = encoder.max_tokens
        self.vocabulary = encoder.vocabulary
        self._embedding = encoder
        self._session = session

    def encode(self, ids: npt.NDArray[np.int64], mask: _Array) -> _Array:
        """One unit-length row per sequence, as :meth:`BertEncoder.encode`. Each sequence runs
        alone, without its padding: the activations' int8 scale is that of its own tokens, so
        a text's vector never depends on the texts batched with it (and no padding is run)."""
        rows = np.zeros((len(ids), self.dim), dtype=np.float32)
        for row, (sequence, real) in enumerate(zip(ids, mask, strict=True)):
            length = int(real.sum())
            if length == 0:
                continue
            tokens = sequence[None, :length]
            x = self._embedding.embed(tokens).T.reshape(1, length, self.dim)
            (y,) = self._session.run(["y"], {"x": x})
            rows[row] = BertEncoder.pool(y.reshape(length, self.dim).T, real[None, :length])[0]
        return rows


def build_onnx_encoder(encoder: BertEncoder, *, threads: int = 1) -> OnnxEncoder:
    """An :class:`OnnxEncoder` of ``encoder``'s weights; raises ImportError without onnxruntime
    and onnxruntime's own errors if it refuses the graph."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        model_bytes(encoder), options, providers=["CPUExecutionProvider"]
    )
    return OnnxEncoder(encoder, session)
