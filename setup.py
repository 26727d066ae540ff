"""Package discovery over the folders that make up the one `itsmreview` namespace.

pyproject.toml's `[tool.setuptools.package-dir]` maps each top-level folder to its package
(app/ -> itsmreview, review/ -> itsmreview.review, ...). setuptools' own discovery cannot follow
such a mapping, so every regular package (a folder with `__init__.py`) below each mapped folder
is listed here: a new package can not be left out of the wheel.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "setuptools"
]["package-dir"]


def discover(package_dir: dict[str, str]) -> list[str]:
    """Every package below each mapped folder, named in the `itsmreview` namespace."""
    packages: set[str] = set()
    for name, folder in package_dir.items():
        packages.add(name)
        mapped = set(package_dir.values()) - {folder}
        for found in find_packages(str(ROOT / folder), exclude=["tests", "tests.*"]):
            if any(f"{folder}/{found.replace('.', '/')}" == other for other in mapped):
                continue
            packages.add(f"{name}.{found}")
    return sorted(packages)


setup(packages=discover(PACKAGE_DIR))
