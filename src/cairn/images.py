"""Images for the model: recognised by their bytes, size-capped, downscaled when Pillow is there.

Every way an image reaches cairn (``@shot.png`` in a prompt, ``read_file`` of a picture, an ACP
image block, a daemon image part, an MCP tool result) goes through :func:`image_from_bytes`, so
they all accept the same formats, refuse the same files with the same message and send the same
sizes. Pillow is optional: with it, an image larger than :data:`MAX_IMAGE_EDGE` pixels or
:data:`MAX_IMAGE_BYTES` is downscaled; without it, an image over the byte cap is refused with a
message saying so. It is imported only when an image needs resizing.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import stat
from pathlib import Path
from typing import Any

from cairn.content import Image

__all__ = [
    "IMAGE_SUFFIXES",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_EDGE",
    "MAX_SOURCE_BYTES",
    "ImageError",
    "describe_image",
    "image_from_base64",
    "image_from_bytes",
    "image_note",
    "is_image_path",
    "load_image",
    "sniff_image_type",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # one image as sent, after downscaling (Anthropic's limit)
MAX_IMAGE_EDGE = 1568  # pixels on the longer side; models scale larger images down anyway
MAX_SOURCE_BYTES = 30 * 1024 * 1024  # files larger than this are not read at all
IMAGE_SUFFIXES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                  ".gif": "image/gif", ".webp": "image/webp"}  # fmt: skip
_JPEG_QUALITIES = (85, 70, 50)  # tried in turn when a downscaled photo is still too large


class ImageError(ValueError):
    """An image that cannot be sent; the message says which and why, for the user or model."""


def is_image_path(path: Path | str) -> bool:
    """Whether the file name says image (``.png``, ``.jpg``, ``.jpeg``, ``.gif``, ``.webp``)."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type the bytes are, by their signature; ``None`` when not a supported image."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def load_image(path: Path, *, source: str | None = None) -> Image:
    """The image file at ``path``; :class:`ImageError` for anything that cannot be sent.

    Refuses what is not a regular file (a FIFO would block the read forever) and files larger
    than :data:`MAX_SOURCE_BYTES` before reading them.
    """
    shown = source or str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ImageError(f"{shown}: no such file") from None
    except OSError as exc:
        raise ImageError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ImageError(f"{shown} is not a regular file")
    if info.st_size > MAX_SOURCE_BYTES:
        raise ImageError(
            f"{shown} is {_size(info.st_size)}; images over {_size(MAX_SOURCE_BYTES)} are not read"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    return image_from_bytes(raw, source=shown)


def image_from_base64(data: str, *, mime_type: str | None = None, source: str = "") -> Image:
    """An image sent as base64 (ACP image blocks, daemon image parts)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError(f"{source or 'the image'}: the data is not valid base64") from None
    return image_from_bytes(raw, mime_type=mime_type, source=source)


def image_from_bytes(raw: bytes, *, mime_type: str | None = None, source: str = "") -> Image:
    """``raw`` as an :class:`Image` the model can take: a known format, within the caps.

    The type is read from the bytes (a declared ``mime_type`` that disagrees is ignored).
    """
    shown = source or "the image"
    mime = sniff_image_type(raw)
    if mime is None:
        declared = f" (said to be {mime_type})" if mime_type else ""
        raise ImageError(f"{shown}{declared} is not a PNG, JPEG, GIF or WebP image")
    raw, mime = _fit(raw, mime, shown)
    return Image(mime, base64.b64encode(raw).decode("ascii"), source)


def describe_image(image: Image) -> str:
    """``shot.png (image/png, 12 KB)``."""
    return f"{image.source or 'image'} ({image.mime_type}, {_size(image.size)})"


def image_note(image: Image) -> str:
    """What a text-only model is sent instead of the image."""
    return (
        f"[image {describe_image(image)} not shown: this model takes text only "
        "(model.supportsImages is false)]"
    )


def _fit(raw: bytes, mime: str, shown: str) -> tuple[bytes, str]:
    """The bytes to send: as they are when small enough, else downscaled with Pillow."""
    pil = _pillow()
    if pil is None:
        if len(raw) > MAX_IMAGE_BYTES:
            raise ImageError(
                f"{shown} is {_size(len(raw))}, more than the {_size(MAX_IMAGE_BYTES)} an image "
                "may be (install Pillow to have large images downscaled)"
            )
        return raw, mime
    try:
        return _downscaled(pil, raw, mime, shown)
    except ImageError:
        raise
    except Exception as exc:  # Pillow raises many types for damaged files
        if len(raw) <= MAX_IMAGE_BYTES:
            return raw, mime  # it could not be read, but it is small: let the model try
        raise ImageError(f"{shown} cannot be decoded to be downscaled: {exc}") from None


def _downscaled(pil: Any, raw: bytes, mime: str, shown: str) -> tuple[bytes, str]:
    with pil.open(io.BytesIO(raw)) as picture:
        too_wide = max(picture.size) > MAX_IMAGE_EDGE
        if not too_wide and len(raw) <= MAX_IMAGE_BYTES:
            return raw, mime
        picture.thumbnail((MAX_IMAGE_EDGE, MAX_IMAGE_EDGE))
        fmt = {"image/png": "PNG", "image/gif": "PNG", "image/webp": "WEBP"}.get(mime, "JPEG")
        out_mime = {"PNG": "image/png", "WEBP": "image/webp"}.get(fmt, "image/jpeg")
        data = _encode(picture, fmt)
        if len(data) > MAX_IMAGE_BYTES and picture.mode not in ("RGBA", "LA", "P"):
            for quality in _JPEG_QUALITIES:
                data, out_mime = _encode(picture.convert("RGB"), "JPEG", quality), "image/jpeg"
                if len(data) <= MAX_IMAGE_BYTES:
                    break
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(
            f"{shown} is still {_size(len(data))} after downscaling, more than the "
            f"{_size(MAX_IMAGE_BYTES)} an image may be"
        )
    return data, out_mime


def _encode(picture: Any, fmt: str, quality: int = _JPEG_QUALITIES[0]) -> bytes:
    buffer = io.BytesIO()
    if fmt == "JPEG":
        picture = picture.convert("RGB")
        picture.save(buffer, fmt, quality=quality)
    else:
        picture.save(buffer, fmt)
    return buffer.getvalue()


def _pillow() -> Any:
    """PIL.Image, or ``None`` when Pillow is not installed."""
    try:
        from PIL import Image as pil_image
    except ImportError:
        return None
    return pil_image


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.0f} KB"
    return f"{count / (1024 * 1024):.1f} MB"
