"""Ships the top-level ``envs/`` specs inside the wheel as ``forecast_dojo/envs/`` (see pyproject.toml)."""

from pathlib import Path

from setuptools import find_packages, setup

# The discovered forecast_dojo* packages plus "forecast_dojo.envs", whose files are the top-level envs/
# folder: a package-dir mapping that a pyproject-only configuration cannot combine with discovery.
packages = find_packages(include=["forecast_dojo", "forecast_dojo.*"])
package_dir = {}
if (Path(__file__).resolve().parent / "envs").is_dir():  # a copy of forecast_dojo/ alone still builds
    packages.append("forecast_dojo.envs")
    package_dir["forecast_dojo.envs"] = "envs"
setup(packages=packages, package_dir=package_dir)
