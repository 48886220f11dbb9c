"""The declared version ranges are true: the environment the tests run in satisfies every one of them, and
environment.yml declares exactly what settings.ini declares."""
import configparser
import importlib.metadata as md
import re

from packaging.requirements import Requirement

from helpers import ROOT


def declared() -> list[Requirement]:
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return [Requirement(r) for key in ("requirements", "dev_requirements", "lm_eval_requirements")
            for r in cfg["DEFAULT"][key].split()]


def test_installed_versions_satisfy_every_declared_range():
    wrong = []
    for req in declared():
        version = md.version(req.name).split("+")[0]
        if not req.specifier.contains(version, prereleases=True): wrong.append(f"{req.name} {version} not in {req.specifier}")
    assert not wrong, "; ".join(wrong)


def test_every_range_has_a_floor_and_a_ceiling():
    loose = [str(r) for r in declared()
             if not (any(s.operator in (">=", "==") for s in r.specifier) and any(s.operator in ("<", "==") for s in r.specifier))]
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
        assert listed[req.name].specifier == req.specifier, f"{req.name}: {listed[req.name].specifier} vs {req.specifier}"
