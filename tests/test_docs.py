"""The project explains itself: the README and docs/ name only what is in
the repository (every relative link resolves, nothing points outside it),
and docs/architecture.md covers every part."""

import os
import re

SOURCE = os.environ.get("COPROF_SOURCE",
                        os.path.dirname(os.path.dirname(
                            os.path.abspath(__file__))))


def documents():
    docs = os.path.join(SOURCE, "docs")
    return [os.path.join(SOURCE, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def test_links_resolve_inside_the_repository():
    for path in documents():
        text = open(path).read()
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if re.match(r"[a-z]+:", target):
                continue                # a web address
            resolved = os.path.realpath(os.path.join(os.path.dirname(path),
                                                     target))
            assert resolved.startswith(os.path.realpath(SOURCE) + os.sep), \
                "%s: %s is outside the repository" % (path, target)
            assert os.path.exists(resolved), "%s: %s does not exist" % (
                path, target)


def test_no_reference_outside_the_repository():
    for path in documents():
        text = open(path).read()
        # the brief the project began from, beside a checkout but not in it
        for needle in (os.path.join("..", "shared"), "DESIGN.md",
                       "DESIGN §"):
            assert needle not in text, "%s names %s" % (path, needle)


def test_readme_links_the_architecture():
    readme = open(os.path.join(SOURCE, "README.md")).read()
    assert "](docs/architecture.md)" in readme


def test_architecture_names_every_part():
    text = open(os.path.join(SOURCE, "docs", "architecture.md")).read()
    parts = [n for n in sorted(os.listdir(SOURCE)) if not n.startswith(".")
             and (os.path.isfile(os.path.join(SOURCE, n, "module.mk"))
             or os.path.isfile(os.path.join(SOURCE, n, "README.md")))]
    assert parts
    for part in parts:
        assert "`%s/`" % part in text, "docs/architecture.md: no %s/" % part
