"""`gen-elixir --out` writes only into a Mix project unless told to (`--force`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compilation_bridge.cli import main


def test_a_folder_without_mix_exs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "not-a-project"
    with pytest.raises(SystemExit) as exited:
        main(["gen-elixir", "--no-format", "--out", str(out)])
    assert exited.value.code == 2
    last = capsys.readouterr().err.rstrip("\n").splitlines()[-1]
    assert last == (
        f"compilation-bridge gen-elixir: error: argument --out: {str(out)!r} is not a Mix project "
        "(no mix.exs); pass --force to write there"
    )
    assert not out.exists()


def test_a_mix_project_is_written(tmp_path: Path) -> None:
    (tmp_path / "mix.exs").write_text("defmodule Stub.MixProject do\nend\n")
    assert main(["gen-elixir", "--no-format", "--out", str(tmp_path)]) == 0
    assert any((tmp_path / "lib" / "generated").rglob("*.ex"))


def test_force_writes_anywhere(tmp_path: Path) -> None:
    assert main(["gen-elixir", "--no-format", "--force", "--out", str(tmp_path / "fresh")]) == 0
    assert any((tmp_path / "fresh" / "lib" / "generated").rglob("*.ex"))


def test_a_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "lib").write_text("a file where the generator needs a folder")
    assert main(["gen-elixir", "--no-format", "--force", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("compilation-bridge gen-elixir: error: ") and err.count("\n") == 1, err
