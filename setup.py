"""The one build step pyproject.toml cannot say: ``recipes/`` and ``themes/`` live at the
repository's top level (as the project was specified), and the wheel carries them inside the
package, as ``fsscope/data/recipes`` and ``fsscope/data/themes``, where an installed fsscope
finds them (fsscope/trust.py, ``SHIPPED_RECIPES``). An editable install reads them where they are."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("recipes", "themes")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for name in SHIPPED:
            self.copy_tree(name, str(Path(self.build_lib) / "fsscope" / "data" / name))


setup(cmdclass={"build_py": BuildPy})
