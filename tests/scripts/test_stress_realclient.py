"""scripts/stress_realclient.sh says what it needs instead of running the suite without load."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stress_realclient.sh"


def test_without_stress_ng_it_refuses_with_the_install_command(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "nproc", "mkdir"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    done = subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT)], env={"PATH": str(bin_dir)}, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "apt-get install -y stress-ng" in done.stderr
