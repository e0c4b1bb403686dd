#!/bin/sh
# make demo: the whole user path on the host-pipeline example.
#
# `coprof record` runs build/examples/host-pipeline (a host program that
# embeds three coprocessor images and runs 16 contexts of them from 4
# threads) against a private copsim with the kernel driver and coprofd,
# then `copreport` prints the per-symbol profile of each context and
# `copreport timeline` writes the timeline as Chrome trace JSON (open it in
# https://ui.perfetto.dev) and as a PNG.  Everything goes to OUT
# (default BUILD/demo/).
#
# Usage: sh mk/demo.sh BUILD [OUT]

set -e
build=${1:-build}
out=${2:-$build/demo}
session=$out/session

rm -rf "$out"
mkdir -p "$out"

step() {
	echo
	echo "== $*"
	"$@"
}

step "$build/bin/coprof" record --event=SPU_CYCLES:997 -o "$session" -- \
	"$build/examples/host-pipeline"
step "$build/bin/copreport" -d "$session" --threshold 1
step "$build/bin/copreport" timeline -d "$session" -o "$out/timeline.json" \
	--png "$out/timeline.png"
echo
echo "demo: session in $session"
echo "demo: timeline in $out/timeline.json (open in https://ui.perfetto.dev)" \
	"and $out/timeline.png"
