#!/bin/sh
# make demo: the README's "Profile a program", run as it is written there.
#
# In OUT (default BUILD/demo/, emptied first) it runs the README's two
# commands: `coprof record -- host-pipeline` (a host program that embeds
# three coprocessor images and runs 16 contexts of them from 4 threads on a
# private copsim with the kernel driver and coprofd, at the default rate;
# the session goes to OUT/coprof_data) and `copreport`, printing what they
# print; then `copreport timeline` writes the timeline as Chrome trace
# JSON (open it in https://ui.perfetto.dev) and as a PNG.
#
# It also writes OUT/readme-sample.md: the README's two sample blocks made
# from this run's output, each after its marker comment (the summary whole,
# the report cut after its third row, the cut marked "...", and the
# session's directory shown as /home/you).  tests/test_build.py checks that
# the README's blocks match a fresh demo's on every field that does not
# change from run to run; when a change makes them differ, copy the blocks
# from this file into the README.
#
# Usage: sh mk/demo.sh BUILD [OUT]

set -e
build=$(cd "${1:-build}" && pwd)
out=${2:-$build/demo}

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The README's commands, from OUT, with what they print kept.
echo "== coprof record -- host-pipeline"
(cd "$out" && "$build/bin/coprof" record -- "$build/examples/host-pipeline") \
	2> "$out/record.txt"
grep -v '^coprof: recording: ' "$out/record.txt" > "$out/summary.txt" || true
cat "$out/summary.txt" >&2
echo
echo "== copreport"
(cd "$out" && "$build/bin/copreport") > "$out/report.txt"
cat "$out/report.txt"
echo
echo "== copreport timeline"
"$build/bin/copreport" timeline -d "$out/coprof_data" \
	-o "$out/timeline.json" --png "$out/timeline.png"

# The README's blocks: the report's head up to its third row, "...", its
# footer from the totals on.
rows=$(grep -n '^  samples  ' "$out/report.txt" | head -1 | cut -d: -f1)
total=$(grep -n '^total [0-9]* samples' "$out/report.txt" | tail -1 | cut -d: -f1)
{
	echo '<!-- make demo: record summary -->'
	echo '```'
	sed "s|$out/|/home/you/|" "$out/summary.txt"
	echo '```'
	echo
	echo '<!-- make demo: report -->'
	echo '```'
	head -n $((rows + 3)) "$out/report.txt"
	echo '...'
	tail -n +"$total" "$out/report.txt"
	echo '```'
} > "$out/readme-sample.md"

echo
echo "demo: session in $out/coprof_data"
echo "demo: timeline in $out/timeline.json (open in https://ui.perfetto.dev)" \
	"and $out/timeline.png"
echo "demo: the README's sample blocks from this run in $out/readme-sample.md"
