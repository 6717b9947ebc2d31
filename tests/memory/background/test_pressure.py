"""The memory-pressure gate: /proc/meminfo, thresholds, graceful degradation."""

from __future__ import annotations

from pathlib import Path

from cairn.memory.background.pressure import available_memory_mb, under_memory_pressure


def test_mem_available_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    2097152 kB\n")

    assert available_memory_mb(meminfo) == 2048.0


def test_a_missing_meminfo_falls_back_to_the_system_or_none(tmp_path: Path) -> None:
    found = available_memory_mb(tmp_path / "absent")
    assert found is None or found > 0


def test_less_than_the_threshold_is_pressure() -> None:
    assert under_memory_pressure(256, lambda: 100.0)
    assert not under_memory_pressure(256, lambda: 300.0)


def test_an_unknown_amount_or_a_zero_threshold_never_blocks() -> None:
    assert not under_memory_pressure(256, lambda: None)
    assert not under_memory_pressure(0, lambda: 1.0)


def test_a_failing_probe_never_blocks() -> None:
    def broken() -> float | None:
        raise OSError("no /proc")

    assert not under_memory_pressure(256, broken)


def test_this_machine_reports_some_available_memory() -> None:
    assert (available_memory_mb() or 1.0) > 0
