#!/bin/sh
# Installs the JavaScript libraries that copreport html inlines into its
# page (d3 and d3-flame-graph, report/README.md "The HTML report") with
# `npm ci` from the committed report/js/package.json and package-lock.json
# into report/js/node_modules.  Quick when they are there: a copy of the
# lock file that npm ci installed is kept beside them
# (node_modules/.coprof-installed) and compared with the committed one.
# npm comes with Node.js (Debian's nodejs and npm packages, which
# mk/deps.sh installs when npm is missing).

dir=report/js
stamp=$dir/node_modules/.coprof-installed

cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null && exit 0

if ! command -v npm >/dev/null 2>&1; then
	echo "coprof: npm is missing: run make deps as root" >&2
	exit 1
fi
echo "coprof: installing the report's JavaScript libraries (npm ci in $dir)"
npm ci --prefix "$dir" --no-audit --no-fund --silent || {
	echo "coprof: npm ci failed in $dir" >&2
	exit 1
}
cp "$dir/package-lock.json" "$stamp"
