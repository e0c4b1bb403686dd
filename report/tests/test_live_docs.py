"""The live views in the READMEs: the top-level README names `coprof
top` and `copcontrol --serve-pprof` and points at control/README.md;
every scraper control/README.md names has a configuration there that
asks the endpoint live.py serves (its path, a seconds= it accepts), and
Pyroscope's is a Grafana Alloy pyroscope.scrape block."""

import os
import re

import yaml

from coprof_report import live

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


def _read(*path):
    with open(os.path.join(SOURCE, *path)) as f:
        return f.read()


def _paragraphs(text):
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def _blocks(text, lang):
    return re.findall(r"^```%s\n(.*?)^```" % lang, text, re.M | re.S)


def test_readme_names_the_live_views():
    readme = _read("README.md")
    for name in ("coprof top", "--serve-pprof"):
        hits = [p for p in _paragraphs(readme) if name in p]
        assert hits, name
        assert [p for p in hits if "control/README.md" in p], name


def _seconds(interval):
    """The seconds= a delta scrape asks: its interval less 1 s (Parca's
    and Alloy's)."""
    m = re.fullmatch(r"(\d+)s", interval)
    assert m, interval
    return int(m.group(1)) - 1


def test_parca_configuration():
    doc = _read("control", "README.md")
    (block,) = [b for b in _blocks(doc, "yaml") if "scrape_configs" in b]
    (job,) = yaml.safe_load(block)["scrape_configs"]
    cpu = job["profiling_config"]["pprof_config"]["process_cpu"]
    assert cpu == {"enabled": True, "path": live.PROFILE_PATH,
                   "delta": True}
    assert 0 < _seconds(job["scrape_interval"]) <= live.MAX_SECONDS
    others = job["profiling_config"]["pprof_config"]
    assert all(not v["enabled"] for k, v in others.items()
               if k != "process_cpu")


def _alloy_attributes(block, name):
    """{attribute: value text} of the first block `name {...}`."""
    start = block.index(name + " {")
    depth, at = 0, start
    for at in range(start, len(block)):
        depth += {"{": 1, "}": -1}.get(block[at], 0)
        if depth == 0 and block[at] == "}":
            break
    body = block[block.index("{", start) + 1:at]
    return dict(re.findall(r"^\s*([\w.]+)\s*=\s*(.+?)\s*$", body, re.M))


def test_pyroscope_is_an_alloy_scrape():
    """Pyroscope is claimed only with a real Alloy pyroscope.scrape block:
    balanced, the process_cpu profile on the endpoint's path as a delta
    scrape (asking ?seconds= the endpoint accepts), Go's other default
    profiles, which the endpoint does not serve, off, and a
    pyroscope.write it forwards to."""
    doc = _read("control", "README.md")
    assert "Pyroscope" in doc
    (block,) = _blocks(doc, "alloy")
    assert block.count("{") == block.count("}")
    scrape = _alloy_attributes(block, 'pyroscope.scrape "coprof"')
    assert '"__address__" = "127.0.0.1:6060"' in scrape["targets"]
    assert scrape["forward_to"] == "[pyroscope.write.local.receiver]"
    assert 'pyroscope.write "local" {' in block
    interval = scrape["scrape_interval"].strip('"')
    assert 0 < _seconds(interval) <= live.MAX_SECONDS
    cpu = _alloy_attributes(block, "profile.process_cpu")
    assert cpu == {"enabled": "true", "path": '"%s"' % live.PROFILE_PATH,
                   "delta": "true"}
    for name in ("memory", "block", "goroutine", "mutex"):
        assert _alloy_attributes(block, "profile." + name) == \
            {"enabled": "false"}, name
