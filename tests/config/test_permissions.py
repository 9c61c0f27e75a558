"""A config directory or file that other users may write is refused: config runs code."""

from __future__ import annotations

from pathlib import Path

import pytest

from reach_adapters.config import ConfigError, load_config
from reach_adapters.gateway import Gateway
from tests.gateway.conftest import ECHO, SHOUT, run_reach, write


@pytest.fixture
def echo_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "config"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    write(directory, "util:echo:01.yaml", ECHO).chmod(0o644)
    return directory


@pytest.mark.parametrize("mode", [0o775, 0o757])
def test_a_directory_writable_by_others_is_refused(echo_dir: Path, mode: int) -> None:
    echo_dir.chmod(mode)
    with pytest.raises(ConfigError) as caught:
        load_config(echo_dir)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{echo_dir} is writable by other users" in message
    assert f"chmod go-w {echo_dir}" in message
    assert "--allow-insecure-config" in message


def test_a_file_writable_by_others_is_refused(echo_dir: Path) -> None:
    (echo_dir / "util:echo:01.yaml").chmod(0o666)
    with pytest.raises(ConfigError, match=r"echo:01\.yaml is writable by other users.*chmod go-w"):
        load_config(echo_dir)


def test_allow_insecure_accepts_it(echo_dir: Path) -> None:
    (echo_dir / "util:echo:01.yaml").chmod(0o666)
    assert list(load_config(echo_dir, allow_insecure=True).agents) == ["util:echo:01"]


def test_owner_only_and_read_only_modes_pass(echo_dir: Path) -> None:
    echo_dir.chmod(0o700)
    (echo_dir / "util:echo:01.yaml").chmod(0o400)
    assert list(load_config(echo_dir).agents) == ["util:echo:01"]


async def test_a_reload_refuses_a_file_made_writable_later(echo_dir: Path) -> None:
    async with await Gateway.start(echo_dir) as gateway:
        write(echo_dir, "util:shout:01.yaml", SHOUT).chmod(0o664)
        assert await gateway.reload() is False
        assert gateway.last_error is not None
        assert "util:shout:01.yaml is writable by other users" in gateway.last_error
        assert "util:shout:01" not in gateway.router


def test_reach_check_and_serve_refuse_it_unless_allowed(echo_dir: Path) -> None:
    echo_dir.chmod(0o777)
    for command in ("check", "serve"):
        refused = run_reach(command, str(echo_dir))
        assert refused.returncode == 3, refused.stderr
        assert "chmod go-w" in refused.stderr
    allowed = run_reach("check", str(echo_dir), "--allow-insecure-config")
    assert allowed.returncode == 0, allowed.stderr
    assert "util:echo:01" in allowed.stdout
