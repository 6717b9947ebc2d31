"""Images for the model: formats by signature, size caps, downscaling with and without Pillow."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image as PilImage

from cairn.content import Image
from cairn.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_EDGE,
    ImageError,
    describe_image,
    image_from_base64,
    image_from_bytes,
    image_note,
    is_image_path,
    load_image,
    sniff_image_type,
)


def png(width: int, height: int, *, noisy: bool = False) -> bytes:
    """A real PNG of that size; ``noisy`` makes it barely compressible (a large file)."""
    picture = PilImage.new("RGB", (width, height), (40, 120, 200))
    if noisy:
        picture = PilImage.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


def pixels(image: Image) -> tuple[int, int]:
    with PilImage.open(io.BytesIO(base64.b64decode(image.data))) as picture:
        return picture.size


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\x89PNG\r\n\x1a\n....", "image/png"),
        (b"\xff\xd8\xff\xe0....", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"%PDF-1.7", None),
        (b"", None),
    ],
)
def test_the_type_is_read_from_the_signature(head: bytes, mime: str | None) -> None:
    assert sniff_image_type(head) == mime


def test_image_paths_are_recognised_by_suffix_in_any_case() -> None:
    assert is_image_path("shots/Screen.PNG") and is_image_path(Path("a.jpeg"))
    assert not is_image_path("notes.txt") and not is_image_path("png")


def test_a_small_image_is_sent_as_it_is() -> None:
    raw = png(40, 30)

    image = image_from_bytes(raw, source="tiny.png")

    assert image == Image("image/png", base64.b64encode(raw).decode(), "tiny.png")
    assert image.size == len(raw)


def test_a_declared_type_that_disagrees_with_the_bytes_is_ignored() -> None:
    assert image_from_bytes(png(4, 4), mime_type="image/jpeg").mime_type == "image/png"


def test_bytes_that_are_no_image_are_refused_by_name() -> None:
    with pytest.raises(ImageError, match=r"notes\.pdf \(said to be image/png\) is not a PNG"):
        image_from_bytes(b"%PDF-1.7 ...", mime_type="image/png", source="notes.pdf")


def test_a_wide_image_is_downscaled_to_the_edge_limit() -> None:
    image = image_from_bytes(png(4000, 1000), source="wide.png")

    assert pixels(image) == (MAX_IMAGE_EDGE, MAX_IMAGE_EDGE // 4)
    assert image.mime_type == "image/png"


def test_a_huge_photo_is_downscaled_under_the_byte_cap() -> None:
    raw = png(1500, 1500, noisy=True)  # ~6.8 MB of noise: over the cap at any size that fits
    assert len(raw) > MAX_IMAGE_BYTES

    image = image_from_bytes(raw, source="noise.png")

    assert image.size <= MAX_IMAGE_BYTES
    assert image.mime_type == "image/jpeg"  # PNG noise does not shrink; a JPEG of it does


def test_without_pillow_a_large_image_is_refused_saying_how_to_fix_it(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(png(1500, 1500, noisy=True))
    small = tmp_path / "small.png"
    small.write_bytes(png(10, 10))
    script = (
        "import sys; sys.modules['PIL'] = None\n"  # as if Pillow were not installed
        "from pathlib import Path\n"
        "from cairn.images import ImageError, load_image\n"
        f"print(load_image(Path({str(small)!r})).mime_type)\n"
        f"try: load_image(Path({str(big)!r}))\n"
        "except ImageError as exc: print(exc)\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )

    first, second = done.stdout.splitlines()
    assert first == "image/png"
    assert "more than the 5.0 MB an image may be (install Pillow" in second


def test_load_image_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)

    with pytest.raises(ImageError, match="not a regular file"):
        load_image(fifo)


def test_load_image_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"gone\.png: no such file"):
        load_image(tmp_path / "gone.png", source="gone.png")


def test_invalid_base64_is_refused() -> None:
    with pytest.raises(ImageError, match="not valid base64"):
        image_from_base64("not base64!!", mime_type="image/png", source="pasted")


def test_a_damaged_small_image_is_passed_on_for_the_model_to_try() -> None:
    broken = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64

    assert image_from_bytes(broken).mime_type == "image/png"


def test_the_note_names_the_image_and_the_setting() -> None:
    image = Image("image/png", base64.b64encode(b"x" * 2048).decode(), "shot.png")

    assert describe_image(image) == "shot.png (image/png, 2 KB)"
    assert image_note(image) == (
        "[image shot.png (image/png, 2 KB) not shown: this model takes text only "
        "(model.supportsImages is false)]"
    )
