"""Tests of the build's own tooling: mk/deps.sh and `make install`."""

import os
import re
import subprocess

import pytest

SOURCE = os.environ.get("COPROF_SOURCE",
                        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fake_tools(tmp_path, installed, uid):
    """A PATH whose dpkg-query knows only `installed` and whose id prints uid."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text(
        "#!/bin/sh\n"
        "pkg=\"$3\"\n"
        "for p in %s; do [ \"$p\" = \"$pkg\" ] && "
        "{ printf 'install ok installed'; exit 0; }; done\n"
        "exit 1\n" % " ".join(installed))
    (bin_dir / "id").write_text("#!/bin/sh\necho %d\n" % uid)
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho apt-get \"$@\" >> %s\n"
                                     % (tmp_path / "apt.log"))
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return "%s:/usr/bin:/bin" % bin_dir


def package_list():
    text = open(os.path.join(SOURCE, "mk", "deps.sh")).read()
    block = text.split('PACKAGES="', 1)[1].split('"', 1)[0]
    return block.split()


def run_deps(path):
    return subprocess.run(["sh", os.path.join(SOURCE, "mk", "deps.sh")],
                          env=dict(os.environ, PATH=path),
                          capture_output=True, text=True, timeout=60)


def test_deps_quiet_when_everything_is_installed(tmp_path):
    result = run_deps(fake_tools(tmp_path, package_list(), uid=1000))
    assert result.returncode == 0
    assert result.stdout == "" and result.stderr == ""


def test_deps_prints_the_command_when_not_root(tmp_path):
    packages = package_list()
    result = run_deps(fake_tools(tmp_path, packages[1:], uid=1000))
    assert result.returncode == 1
    assert "apt-get install -y --no-install-recommends %s" % packages[0] \
        in result.stderr
    assert not (tmp_path / "apt.log").exists()


def test_deps_installs_as_root(tmp_path):
    packages = package_list()
    result = run_deps(fake_tools(tmp_path, packages[2:], uid=0))
    assert result.returncode == 0
    log = (tmp_path / "apt.log").read_text().splitlines()
    assert log[0].startswith("apt-get update")
    assert log[1].split()[-2:] == packages[:2]


def test_needed_packages_are_all_listed():
    """What the build (libraries, the RISC-V toolchain, libFuzzer), the
    emulator and the reports use is in make deps' list."""
    for name in ("libelf-dev", "libdw-dev", "libglib2.0-dev", "libpfm4-dev",
                 "libsqlite3-dev", "qemu-system-misc", "gcc-riscv64-unknown-elf",
                 "picolibc-riscv64-unknown-elf", "clang", "python3-pyelftools",
                 "python3-matplotlib", "python3-pytest", "pkg-config"):
        assert name in package_list()


def test_make_install(tmp_path):
    dest = tmp_path / "root"
    result = subprocess.run(["make", "-s", "install", "PREFIX=/opt/coprof",
                             "DESTDIR=%s" % dest], cwd=SOURCE,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    coplfsr = dest / "opt/coprof/bin/coplfsr"
    assert os.access(coplfsr, os.X_OK)
    assert (dest / "opt/coprof/include/coprof/lfsr/lfsr.h").exists()
    out = subprocess.run([str(coplfsr), "1"], capture_output=True, text=True)
    assert out.stdout.split()[0] == "0xfffffe"


def test_installed_headers_compile_alone(tmp_path):
    dest = tmp_path / "root"
    subprocess.run(["make", "-s", "install", "PREFIX=/usr", "DESTDIR=%s" % dest],
                   cwd=SOURCE, check=True, capture_output=True, timeout=600)
    include = dest / "usr/include/coprof"
    headers = sorted(p.relative_to(include) for p in include.rglob("*.h"))
    assert headers
    for header in headers:
        source = tmp_path / "use.c"
        source.write_text('#include "%s"\nint main(void) { return 0; }\n' % header)
        result = subprocess.run(["gcc", "-fsyntax-only", "-I%s" % include,
                                 str(source)], capture_output=True, text=True)
        assert result.returncode == 0, "%s: %s" % (header, result.stderr)


def readme_blocks(text):
    """{marker: [lines]} of the blocks after `<!-- make demo: NAME -->`."""
    return {name: block.splitlines() for name, block in re.findall(
        r"^<!-- make demo: ([\w ]+) -->\n```\n(.*?)^```$", text, re.M | re.S)}


def stable(line):
    """A sample line with what changes from run to run masked: the seed,
    counts, stall time, offsets of embedded images (another build), the
    host side's threads and events."""
    line = re.sub(r"seed \d+", "seed S", line)
    line = re.sub(r"@0x[0-9a-f]+", "@0xH", line)
    line = re.sub(r"stalled [\d.]+ ms in \d+ stalls \([\d.]+%",
                  "stalled T ms in N stalls (P%", line)
    line = re.sub(r"\b(samples=|sched_events=|total |exact )\d+", r"\1N",
                  line)
    line = re.sub(r"events of (the command's )?\d+ threads \(\d+ events",
                  r"events of \1N threads (E events", line)
    # a capture can land in QEMU's six reset instructions before a
    # context's first (outside the local store, counted apart): a run
    # does or does not, at random with the dither
    line = re.sub(r"\b(lost=|outside-ls=)\d+", r"\1N", line)
    line = re.sub(r"^lost \d+ samples.*$", "lost N samples", line)
    # the shares by stall reason are sampled, their intervals batches or
    # Wilson's as below; the reasons' order is kept
    line = re.sub(r"^  by reason \(.*?\):", "  by reason (I):", line)
    line = re.sub(r" [\d.]+% \([\d.]+-[\d.]+\)", " P% (L-H)", line)
    # whether contexts ran long enough for intervals from blocks depends
    # on the machine's speed
    return re.sub(r"^  \d+ samples(, (.* )?intervals?.*)?$", "  N samples",
                  line)


BY_IMAGE = "lost by image: "    # with losses only (see stable())
OUTSIDE = "outside any context "    # with a capture of QEMU's reset code
BY_SLOT = "stalled by slot: "   # when a FIFO filled: a loaded machine's
# A row: samples, percent, interval, then (with stall reasons) wait% and
# top wait, both sampled, and the place.
ROW = re.compile(r"^\s+\d+\s+[\d.]+%\s+[\d.]+-[\d.]+\s+"
                 r"(?:[\d.]+%\s+\S+\s+)?(.*?)\s*$")


def squeeze(line):
    """line with its columns' padding squeezed: a report pads them to the
    widest image name, whose embedded offset differs from build to build
    (the sanitizer build's)."""
    return re.sub(r"(\S) {2,}", r"\1 ", line)


def row_place(line):
    """A row's image, overlay and symbol, stable and squeezed."""
    return squeeze(stable(ROW.match(line).group(1)))


def compare_report(readme, fresh):
    """The README's cut report against a fresh one: the same lines where
    they are stable; its first row's place (image, overlay, symbol) the
    fresh first row's, its other rows among the fresh top five."""
    fresh_rows = [row_place(ln) for ln in fresh if ROW.match(ln)]
    rows = [row_place(ln) for ln in readme if ROW.match(ln)]
    assert rows and rows[0] == fresh_rows[0], (rows, fresh_rows[:5])
    for row in rows[1:]:
        assert row in fresh_rows[:5], (row, fresh_rows[:5])
    apart = (BY_IMAGE, OUTSIDE, BY_SLOT)
    others = [squeeze(stable(ln)) for ln in readme
              if not ROW.match(ln) and not ln.startswith(apart)]
    fresh_others = [squeeze(stable(ln)) for ln in fresh
                    if not ROW.match(ln) and not ln.startswith(apart)]
    assert others == fresh_others, (others, fresh_others)


def test_demo(build_dir, tmp_path):
    """make demo's script: the README's two commands on host-pipeline, the
    report, the timeline files, and the README's sample blocks true."""
    out = tmp_path / "demo"
    result = subprocess.run(["sh", "mk/demo.sh", build_dir, str(out)],
                            cwd=SOURCE, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "host-pipeline: 16 contexts from 4 threads, 16 ok" in result.stdout
    assert "contexts=16 images=3" in result.stderr
    assert "stage_denoise" in result.stdout
    assert "session complete" in result.stdout
    assert (out / "coprof_data" / "session.db").is_file()
    assert (out / "timeline.json").stat().st_size > 1000
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"

    fresh = readme_blocks((out / "readme-sample.md").read_text())
    readme = readme_blocks(open(os.path.join(SOURCE, "README.md")).read())
    hint = "the README's sample differs from make demo's: copy the blocks " \
        "of build/demo/readme-sample.md into README.md"
    assert set(readme) == set(fresh) == {"record summary", "report"}, hint
    assert [stable(ln) for ln in readme["record summary"]] == \
        [stable(ln) for ln in fresh["record summary"]], hint
    compare_report(readme["report"], fresh["report"])
