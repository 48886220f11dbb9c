"""The declared version ranges are true: the environment the tests run in satisfies every one of them, and
environment.yml declares exactly what settings.ini declares. The exact versions of constraints.txt lie within those
ranges, pin every package that computes a number, are what is installed, and environment.yml installs with them."""

import configparser
import importlib.metadata as md
import re

from helpers import ROOT
from packaging.requirements import Requirement

OPTIONAL = (
    "lm_eval_requirements",
    "openvino_requirements",
)  # extras the library runs without (settings.ini says what each is for)


def declared(keys=("requirements", "dev_requirements") + OPTIONAL) -> list[Requirement]:
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return [Requirement(r) for key in keys for r in cfg["DEFAULT"][key].split()]


def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def test_installed_versions_satisfy_every_declared_range():
    "Every required package, and every optional one that is installed, is within its range."
    wrong = []
    for req in declared():
        if installed(req.name) is None and req.name in {r.name for r in declared(OPTIONAL)}:
            continue
        version = md.version(req.name).split("+")[0]
        if not req.specifier.contains(version, prereleases=True):
            wrong.append(f"{req.name} {version} not in {req.specifier}")
    assert not wrong, "; ".join(wrong)


def test_every_range_has_a_floor_and_a_ceiling():
    loose = [
        str(r)
        for r in declared()
        if not (
            any(s.operator in (">=", "==") for s in r.specifier) and any(s.operator in ("<", "==") for s in r.specifier)
        )
    ]
    assert not loose, f"ranges without a tested floor and a ceiling: {loose}"


def test_environment_yml_declares_the_same_ranges():
    listed = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^ {6}- ([A-Za-z0-9_.\-\[\]]+[<>=!~].*?)\s*(?:#.*)?$", line)
        if m:
            req = Requirement(m.group(1))
            listed[req.name] = req
    for req in declared():
        assert req.name in listed, f"environment.yml lacks {req.name}"
        assert listed[req.name].specifier == req.specifier, (
            f"{req.name}: {listed[req.name].specifier} vs {req.specifier}"
        )


def test_each_optional_extra_is_a_setup_extra():
    "setup.py offers `indicipr[lm-eval]` and `indicipr[openvino]` with exactly settings.ini's requirements for them."
    import ast

    src = (ROOT / "setup.py").read_text()
    extras = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.keyword) and n.arg == "extras_require").value
    names = {k.value: v.id for k, v in zip(extras.keys, extras.values)}
    for key in OPTIONAL:
        assert names.get(key.removesuffix("_requirements").replace("_", "-")) == key, (
            f"setup.py's extras_require lacks {key}"
        )


def constraints() -> dict[str, str]:
    "`{name: version}` of constraints.txt (names normalised as pip does)."
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = list(req.specifier)
            assert spec.operator == "==", f"constraints.txt: {line} is not an exact version"
            out[_norm(req.name)] = spec.version
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_constraints_pin_every_declared_package_within_its_range():
    pins = constraints()
    for req in declared():
        assert _norm(req.name) in pins, f"constraints.txt does not pin {req.name}"
        assert req.specifier.contains(pins[_norm(req.name)], prereleases=True), (
            f"constraints.txt: {req.name}=={pins[_norm(req.name)]} is outside settings.ini's {req.specifier}"
        )


def test_constraints_pin_the_packages_that_compute_numbers_and_are_installed():
    "The numerics' packages are pinned, and the environment the tests run in was installed at constraints.txt's versions."
    from indicipr.data.numerics import NUMERIC_PACKAGES

    pins = constraints()
    assert {_norm(n) for n in NUMERIC_PACKAGES} <= set(pins)
    drift = [
        f"{name} {installed(name)} (constraints.txt: {version})"
        for name, version in pins.items()
        if installed(name) is not None and installed(name).split("+")[0] != version
    ]
    assert not drift, "installed versions differ from constraints.txt (run make setup in a fresh .venv): " + "; ".join(
        drift
    )


def test_environment_yml_installs_with_the_constraints():
    lines = [line.strip() for line in (ROOT / "environment.yml").read_text().splitlines()]
    assert "- -c constraints.txt" in lines
