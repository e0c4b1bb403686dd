#!/bin/sh
# Installs the Debian packages coprof needs to build and test, or, when not
# run as root, prints the exact apt-get command and fails.  Quiet and quick
# when everything is already present: it only asks dpkg.
#
# The list is what the build, the tests and the reports use (README.md),
# with the kernel, its headers, QEMU for x86 and busybox-static for the
# Linux module's guest (kernel-driver/linux/), sparse and linux-source-6.1
# (its tarball has checkpatch.pl) for make check-kernel-style, and the
# viewers' own tools that read copreport's exports back in its tests (go tool pprof from
# golang-go, callgrind_annotate from valgrind, headless chromium for the
# HTML report) with python3-protobuf, which writes the pprof export.

PACKAGES="gcc make pkg-config libelf-dev libdw-dev libglib2.0-dev libpfm4-dev
libtracefs-dev libtraceevent-dev linux-perf
libsqlite3-dev qemu-system-misc gcc-riscv64-unknown-elf
picolibc-riscv64-unknown-elf clang python3-pyelftools python3-matplotlib
python3-pytest qemu-system-x86 linux-image-amd64 linux-headers-amd64
busybox-static golang-go valgrind python3-protobuf chromium sparse
linux-source-6.1"

missing=""
for p in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	case "$status" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done

[ -z "$missing" ] && exit 0

command="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
	echo "coprof: missing Debian packages:$missing" >&2
	echo "coprof: run as root: apt-get update && $command" >&2
	exit 1
fi

echo "coprof: installing missing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || exit 1
apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
	echo "coprof: apt-get install failed for:$missing" >&2
	exit 1
}
