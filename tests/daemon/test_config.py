"""Which flag combinations the daemon starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.daemon.config import DaemonConfig, DaemonConfigError, is_loopback_host


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"]
)
def test_loopback_hosts_are_recognised(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "10.0.0.1", "example.com", ""])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_a_non_loopback_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="without a token"):
        DaemonConfig(workspace=tmp_path, host="0.0.0.0").validate()


def test_a_non_loopback_bind_with_a_token_is_accepted(tmp_path: Path) -> None:
    DaemonConfig(workspace=tmp_path, host="0.0.0.0", token="t").validate()


def test_a_blank_token_counts_as_no_token(tmp_path: Path) -> None:
    config = DaemonConfig(workspace=tmp_path, host="0.0.0.0", token="   ")

    assert config.token is None
    with pytest.raises(DaemonConfigError):
        config.validate()


def test_a_token_is_trimmed(tmp_path: Path) -> None:
    assert DaemonConfig(workspace=tmp_path, token=" abc \n").token == "abc"


def test_host_with_a_port_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="--port"):
        DaemonConfig(workspace=tmp_path, host="127.0.0.1:4170").validate()


def test_an_ipv6_host_is_not_mistaken_for_host_and_port(tmp_path: Path) -> None:
    DaemonConfig(workspace=tmp_path, host="::1").validate()


def test_any_origin_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="'\\*'"):
        DaemonConfig(workspace=tmp_path, allow_origins=("*",)).validate()


def test_a_missing_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="not a folder"):
        DaemonConfig(workspace=tmp_path / "nope").validate()


def test_max_sessions_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="max-sessions"):
        DaemonConfig(workspace=tmp_path, max_sessions=0).validate()


def test_the_port_must_be_in_range(tmp_path: Path) -> None:
    with pytest.raises(DaemonConfigError, match="--port"):
        DaemonConfig(workspace=tmp_path, port=70000).validate()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_seconds": 0.5}, "--lease-seconds must be between 1 and 300, not 0.5"),
        ({"lease_seconds": 301.0}, "--lease-seconds must be between 1 and 300"),
        ({"drain_seconds": 3601.0}, "--drain-seconds must be between 0 and 3600"),
    ],
)
def test_a_lease_or_drain_out_of_bounds_is_refused(
    tmp_path: Path, options: dict[str, float], message: str
) -> None:
    config = DaemonConfig(workspace=tmp_path, database="postgresql://db/cairn", **options)

    with pytest.raises(DaemonConfigError, match=message):
        config.validate()


def test_the_replicas_flags_need_a_database(tmp_path: Path) -> None:
    config = DaemonConfig(workspace=tmp_path, lease_seconds=3.0)

    with pytest.raises(DaemonConfigError, match="--lease-seconds needs --database"):
        config.validate(replica_flags=("--lease-seconds",))
    DaemonConfig(workspace=tmp_path, database="postgresql://db/cairn", drain_seconds=0).validate(
        replica_flags=("--drain-seconds",)
    )
