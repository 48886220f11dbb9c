"""Packaging for indicipr: reads settings.ini, the single source of metadata nbdev uses."""
from configparser import ConfigParser
from pathlib import Path

import setuptools

cfg = ConfigParser(delimiters=["="])
cfg.read(Path(__file__).parent / "settings.ini", encoding="utf-8")
cfg = cfg["DEFAULT"]

requirements = cfg.get("requirements", "").split()
dev_requirements = cfg.get("dev_requirements", "").split()
lm_eval_requirements = cfg.get("lm_eval_requirements", "").split()
openvino_requirements = cfg.get("openvino_requirements", "").split()
console_scripts = cfg.get("console_scripts", "").split()
readme = Path(__file__).parent / "README.md"

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else cfg["description"],
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license="Apache-2.0",
    # templates and the lm-eval task folder: data (the tasks' utils.py is loaded by lm-eval from the folder)
    packages=setuptools.find_packages(include=["indicipr", "indicipr.*"])
             + ["indicipr.templates", "indicipr.lm_eval_tasks", "indicipr.lm_eval_tasks.indicipr_qa"],
    include_package_data=True,
    package_data={"indicipr": ["templates/*", "lm_eval_tasks/indicipr_qa/*.yaml",
                               "lm_eval_tasks/indicipr_qa/_default_template_yaml", "lm_eval_tasks/indicipr_qa/*.py",
                               "lm_eval_tasks/indicipr_qa/*.md"]},
    python_requires=">=" + cfg["min_python"],
    install_requires=requirements,
    extras_require={"dev": dev_requirements, "lm-eval": lm_eval_requirements, "openvino": openvino_requirements},
    entry_points={
        "console_scripts": console_scripts,
    },
    zip_safe=False,
)
