"""Installs the repository's model presets (../configs/models) with the package, so an
installed sparsp_torch resolves preset names without the repository."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent.parent / "configs" / "models"
        dst = Path(self.build_lib) / "sparsp_torch" / "models"
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
            for f in src.glob("*.json"):
                shutil.copy(f, dst / f.name)


setup(cmdclass={"build_py": BuildPy})
