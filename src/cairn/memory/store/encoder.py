"""A BERT sentence encoder in numpy: the forward pass behind Recall's semantic candidates.

It computes what ``sentence-transformers`` computes for all-MiniLM-L6-v2 (6 layers, 384
dimensions, 12 heads): token, position and segment embeddings, then per layer self-attention
and a GELU feed-forward block, each followed by a residual sum and LayerNorm; the sentence
vector is the mean of the last layer over the real (unpadded) tokens, scaled to unit length.
Checked against an independent ONNX runtime of the same model (benchmarks/README.md).

Only numpy is needed: no PyTorch, no ONNX runtime. Matrix products run in float32 through
numpy's BLAS; callers batch texts of similar length so that padding costs little.
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
    qkv: _Array  # (hidden, 3 × hidden): query, key and value projections side by side
    qkv_bias: _Array
    attention_out: _Array  # (hidden, hidden), transposed into a C-order copy (see _layer)
    attention_out_bias: _Array
    attention_norm: tuple[_Array, _Array]
    up: _Array  # (hidden, intermediate), a C-order copy
    up_bias: _Array
    down: _Array  # (intermediate, hidden), a C-order copy
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
    weight, bias = norm
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(eps)) * weight + bias


class BertEncoder:
    """Mean-pooled, unit-length sentence vectors from BERT weights (``sentence-transformers``
    names: ``embeddings.*``, ``encoder.layer.N.*``)."""

    def __init__(self, tensors: Mapping[str, np.ndarray], *, heads: int, eps: float) -> None:
        try:
            self._words = self._f32(tensors["embeddings.word_embeddings.weight"])
            self._positions = self._f32(tensors["embeddings.position_embeddings.weight"])
            self._segment = self._f32(tensors["embeddings.token_type_embeddings.weight"])[0]
            self._embedding_norm = (
                self._f32(tensors["embeddings.LayerNorm.weight"]),
                self._f32(tensors["embeddings.LayerNorm.bias"]),
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
            if layer.qkv.shape != (self.dim, 3 * self.dim) or layer.down.shape[1] != self.dim:
                raise EncoderShapeError(f"a layer has the shapes {layer.qkv.shape}")

    @staticmethod
    def _f32(array: np.ndarray) -> _Array:
        if array.dtype != np.float32:
            raise EncoderShapeError(f"weights of type {array.dtype}, float32 expected")
        return array

    def _layer(self, tensors: Mapping[str, np.ndarray], prefix: str) -> _Layer:
        # Every weight in C order: BLAS multiplies the few rows of a query by a transposed
        # view about twice as slowly (0.6 against 0.3 ms for the feed-forward weights).
        def weight(name: str) -> _Array:
            return self._f32(tensors[prefix + name])

        parts = ("query", "key", "value")
        projections = [weight(f"attention.self.{part}.weight") for part in parts]
        biases = [weight(f"attention.self.{part}.bias") for part in parts]
        return _Layer(
            qkv=np.ascontiguousarray(np.concatenate(projections).T),
            qkv_bias=np.concatenate(biases),
            attention_out=np.ascontiguousarray(weight("attention.output.dense.weight").T),
            attention_out_bias=weight("attention.output.dense.bias"),
            attention_norm=(
                weight("attention.output.LayerNorm.weight"),
                weight("attention.output.LayerNorm.bias"),
            ),
            up=np.ascontiguousarray(weight("intermediate.dense.weight").T),
            up_bias=weight("intermediate.dense.bias"),
            down=np.ascontiguousarray(weight("output.dense.weight").T),
            down_bias=weight("output.dense.bias"),
            output_norm=(weight("output.LayerNorm.weight"), weight("output.LayerNorm.bias")),
        )

    def encode(self, ids: npt.NDArray[np.int64], mask: _Array) -> _Array:
        """One unit-length row per sequence of ``ids`` (batch × length, padded; ``mask`` is 1.0
        at real tokens, 0.0 at padding). Rows whose mask is all zero come out zero."""
        batch, length = ids.shape
        if length > self.max_tokens:
            raise ValueError(f"{length} tokens; the model takes at most {self.max_tokens}")
        dim, heads = self.dim, self.heads
        width = dim // heads
        x = self._words[ids] + self._positions[:length] + self._segment
        x = _layer_norm(x, self._embedding_norm, self._eps)
        padding = ((1.0 - mask) * _MASKED)[:, None, None, :]  # (batch, 1, 1, length)
        scale = np.float32(1 / math.sqrt(width))
        for layer in self._layers:
            qkv = x.reshape(batch * length, dim) @ layer.qkv + layer.qkv_bias
            qkv = qkv.reshape(batch, length, 3, heads, width).transpose(2, 0, 3, 1, 4)
            query, key, value = qkv[0], qkv[1], qkv[2]
            scores = query @ key.transpose(0, 1, 3, 2) * scale + padding
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            attended = (scores @ value).transpose(0, 2, 1, 3).reshape(batch * length, dim)
            attended = attended @ layer.attention_out + layer.attention_out_bias
            x = _layer_norm(attended.reshape(batch, length, dim) + x, layer.attention_norm,
                            self._eps)  # fmt: skip
            hidden = _gelu(x.reshape(batch * length, dim) @ layer.up + layer.up_bias)
            out = hidden @ layer.down + layer.down_bias
            x = _layer_norm(out.reshape(batch, length, dim) + x, layer.output_norm, self._eps)
        weights = mask[:, :, None]
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.where(norms > 0, pooled / np.maximum(norms, 1e-12), 0.0).astype(np.float32)
