"""A BERT sentence encoder in numpy: the forward pass behind Recall's semantic candidates.

It computes what ``sentence-transformers`` computes for all-MiniLM-L6-v2 (6 layers, 384
dimensions, 12 heads): token, position and segment embeddings, then per layer self-attention
and a GELU feed-forward block, each followed by a residual sum and LayerNorm; the sentence
vector is the mean of the last layer over the real (unpadded) tokens, scaled to unit length.
Checked against an independent ONNX runtime of the same model (benchmarks/README.md).

Only numpy is needed: no PyTorch, no ONNX runtime. Recall runs it when onnxruntime is
missing; with onnxruntime, :mod:`cairn.memory.store.onnx_encoder` runs the same layers in int8
(and takes :meth:`BertEncoder.embed` and :meth:`BertEncoder.pool` from here). Matrix products
run in float32 through numpy's BLAS, on the weights as the file stores them (memory-mapped, not
copied) and with the activations features-first; callers batch texts of similar length so that
padding costs little.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["BertEncoder", "EncoderShapeError"]

_Array = npt.NDArray[np.float32]
_MASKED = np.float32(-1e9)  # added to the attention scores of padding positions


class EncoderShapeError(ValueError):
    """The tensors are not those of a BERT encoder of the expected shape."""


@dataclass(frozen=True, slots=True)
class _Layer:
    # Every product is weight (out × in, C order: as stored) @ activations (in × tokens), the
    # activations kept features-first: for a query's few tokens BLAS runs this about twice as
    # fast as tokens @ weight.T (benchmarks/README.md, issue #26's fourth part), and the
    # weights need no copy. Biases and norms are columns.
    qkv: _Array  # (3 × hidden, hidden): query, key and value projections stacked
    qkv_bias: _Array
    attention_out: _Array  # (hidden, hidden)
    attention_out_bias: _Array
    attention_norm: tuple[_Array, _Array]
    up: _Array  # (intermediate, hidden)
    up_bias: _Array
    down: _Array  # (hidden, intermediate)
    down_bias: _Array
    output_norm: tuple[_Array, _Array]


def _erf(x: _Array) -> _Array:
    """erf to 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and BERT's GELU is exact."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t  # fmt: skip
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: _Array) -> _Array:
    return 0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2))))


def _layer_norm(x: _Array, norm: tuple[_Array, _Array], eps: float) -> _Array:
    """LayerNorm of each column of ``x`` (features × tokens); ``norm``: weight and bias columns.
    ``x`` is overwritten."""
    weight, bias = norm
    x -= x.mean(axis=0, keepdims=True)
    deviation = np.sqrt(np.einsum("ij,ij->j", x, x)[None, :] / np.float32(len(x)) + np.float32(eps))
    x /= deviation
    x *= weight
    x += bias
    return x


def _column(array: _Array) -> _Array:
    return np.ascontiguousarray(array.reshape(-1, 1))


class BertEncoder:
    """Mean-pooled, unit-length sentence vectors from BERT weights (``sentence-transformers``
    names: ``embeddings.*``, ``encoder.layer.N.*``)."""

    def __init__(self, tensors: Mapping[str, np.ndarray], *, heads: int, eps: float) -> None:
        try:
            self._words = self._f32(tensors["embeddings.word_embeddings.weight"])
            self._positions = self._f32(tensors["embeddings.position_embeddings.weight"])
            self._segment = self._f32(tensors["embeddings.token_type_embeddings.weight"])[0]
            self._embedding_norm = (
                _column(self._f32(tensors["embeddings.LayerNorm.weight"])),
                _column(self._f32(tensors["embeddings.LayerNorm.bias"])),
            )
            depth = sum(1 for name in tensors if name.endswith(".attention.self.query.weight"))
            self._layers = [self._layer(tensors, f"encoder.layer.{n}.") for n in range(depth)]
        except KeyError as error:
            raise EncoderShapeError(f"tensor {error} is missing") from error
        self.dim = int(self._words.shape[1])
        if not self._layers or self.dim % heads:
            raise EncoderShapeError(f"{len(self._layers)} layers of {self.dim} for {heads} heads")
        self.heads = heads
        self.max_tokens = int(self._positions.shape[0])
        self.vocabulary = int(self._words.shape[0])
        self._eps = eps
        for layer in self._layers:
            if layer.qkv.shape != (3 * self.dim, self.dim) or layer.down.shape[0] != self.dim:
                raise EncoderShapeError(f"a layer has the shapes {layer.qkv.shape}")

    @staticmethod
    def _f32(array: np.ndarray) -> _Array:
        if array.dtype != np.float32:
            raise EncoderShapeError(f"weights of type {array.dtype}, float32 expected")
        return array

    def _layer(self, tensors: Mapping[str, np.ndarray], prefix: str) -> _Layer:
        def weight(name: str) -> _Array:
            return np.ascontiguousarray(self._f32(tensors[prefix + name]))

        def bias(name: str) -> _Array:
            return _column(self._f32(tensors[prefix + name]))

        parts = ("query", "key", "value")
        return _Layer(
            qkv=np.concatenate([weight(f"attention.self.{part}.weight") for part in parts]),
            qkv_bias=np.concatenate([bias(f"attention.self.{part}.bias") for part in parts]),
            attention_out=weight("attention.output.dense.weight"),
            attention_out_bias=bias("attention.output.dense.bias"),
            attention_norm=(
                bias("attention.output.LayerNorm.weight"),
                bias("attention.output.LayerNorm.bias"),
            ),
            up=weight("intermediate.dense.weight"),
            up_bias=bias("intermediate.dense.bias"),
            down=weight("output.dense.weight"),
            down_bias=bias("output.dense.bias"),
            output_norm=(bias("output.LayerNorm.weight"), bias("output.LayerNorm.bias")),
        )

    @property
    def layers(self) -> list[_Layer]:
        return self._layers

    @property
    def eps(self) -> float:
        return self._eps

    def embed(self, ids: npt.NDArray[np.int64]) -> _Array:
        """The normalised embeddings of ``ids`` (batch × length), features-first (dim × tokens)."""
        batch, length = ids.shape
        if length > self.max_tokens:
            raise ValueError(f"{length} tokens; the model takes at most {self.max_tokens}")
        x = self._words[ids] + self._positions[:length] + self._segment  # (batch, length, dim)
        return _layer_norm(np.ascontiguousarray(x.reshape(batch * length, self.dim).T),
                           self._embedding_norm, self._eps)  # fmt: skip

    @staticmethod
    def pool(x: _Array, mask: _Array) -> _Array:
        """Unit-length means of the last layer ``x`` (dim × tokens) over the real tokens of each
        sequence (``mask``: batch × length); a row whose mask is all zero comes out zero."""
        batch, length = mask.shape
        dim = x.shape[0]
        pooled = (x * mask.reshape(1, batch * length)).reshape(dim, batch, length).sum(axis=2).T
        pooled /= np.maximum(mask.sum(axis=1), 1.0)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.where(norms > 0, pooled / np.maximum(norms, 1e-12), 0.0).astype(np.float32)

    def encode(self, ids: npt.NDArray[np.int64], mask: _Array) -> _Array:
        """One unit-length row per sequence of ``ids`` (batch × length, padded; ``mask`` is 1.0
        at real tokens, 0.0 at padding). Rows whose mask is all zero come out zero."""
        batch, length = ids.shape
        dim, heads = self.dim, self.heads
        width = dim // heads
        tokens = batch * length
        x = self.embed(ids)
        padding = ((1.0 - mask) * _MASKED)[:, None, None, :]  # (batch, 1, 1, length)
        scale = np.float32(1 / math.sqrt(width))
        for layer in self._layers:
            qkv = layer.qkv @ x
            qkv += layer.qkv_bias
            # (3, heads, width, batch, length) -> per batch and head: query (length × width),
            # key and value transposed (width × length)
            qkv = qkv.reshape(3, heads, width, batch, length).transpose(0, 3, 1, 2, 4)
            query, key, value = qkv[0].swapaxes(2, 3), qkv[1], qkv[2]
            scores = query @ key
            scores *= scale
            scores += padding
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            # attended, transposed: (batch, heads, width, length) -> (dim, tokens)
            attended = (value @ scores.swapaxes(2, 3)).transpose(1, 2, 0, 3).reshape(dim, tokens)
            out = layer.attention_out @ attended
            out += layer.attention_out_bias
            out += x
            x = _layer_norm(out, layer.attention_norm, self._eps)
            hidden = layer.up @ x
            hidden += layer.up_bias
            out = layer.down @ _gelu(hidden)
            out += layer.down_bias
            out += x
            x = _layer_norm(out, layer.output_norm, self._eps)
        return self.pool(x, mask)
