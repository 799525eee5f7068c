"""Sizes and durations as users write them: one reading for every setting that takes one."""

from __future__ import annotations

import pytest

from stepscope.quantities import (
    format_duration,
    format_size,
    parse_duration,
    parse_memory,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "num_bytes"),
    [("2GB", 2 * 10**9), ("512mib", 512 << 20), (" 1.5 kB ", 1500), (".5TB", 5 * 10**11)],
)
def test_a_size_needs_its_unit(text: str, num_bytes: int) -> None:
    assert parse_size(text) == num_bytes


@pytest.mark.parametrize("text", ["2", "2G", "0GB", "-1GB", "2 parsecs", "GB", ""])
def test_what_is_not_a_size(text: str) -> None:
    assert parse_size(text) is None


@pytest.mark.parametrize(
    ("text", "num_bytes"),
    [
        ("8G", 8 << 30),
        ("8g", 8 << 30),
        ("8Gi", 8 << 30),
        ("8GiB", 8 << 30),
        ("8GB", 8 * 10**9),
        ("512M", 512 << 20),
        ("4096", 4096),
        ("4096B", 4096),
    ],
)
def test_a_memory_setting_reads_as_ulimit_and_docker_do(text: str, num_bytes: int) -> None:
    assert parse_memory(text) == num_bytes


@pytest.mark.parametrize("text", ["lots", "0", "0G", "4PB", "G", "8 G B", ""])
def test_what_is_not_a_memory_setting(text: str) -> None:
    assert parse_memory(text) is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0), ("7D", 604800.0)]
)
def test_a_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["90", "0s", "1w", "s", ""])
def test_what_is_not_a_duration(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [(2 * 10**9, "2GB"), (1_500_000_000, "1500MB"), (1_595_883, "1595883B"), (7, "7B")],
)
def test_a_size_is_written_back_exactly(num_bytes: int, text: str) -> None:
    assert format_size(num_bytes) == text
    assert parse_size(text) == num_bytes


@pytest.mark.parametrize(
    ("seconds", "text"), [(604800.0, "7d"), (129600.0, "36h"), (90.0, "90s"), (600.0, "10m")]
)
def test_a_duration_is_written_back_exactly(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
