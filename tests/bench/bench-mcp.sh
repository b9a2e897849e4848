#!/bin/sh
# bench-mcp: `gbrctl mcp` beside the reference MCP filesystem server, both
# driven by the official MCP TypeScript SDK (tests/mcp/bench.mjs, Node).
# `make bench` copies this script to BUILD_DIR/tests/bench/bench-mcp with
# the source folder filled in; tests/bench/run runs it as
# `bench-mcp BUILD_DIR`. The Node packages come from tests/mcp's
# package-lock.json (npm ci, the first time).
#
# usage: bench-mcp BUILD_DIR [-n calls] [-b block]
set -eu
top='@abs_top_srcdir@'
mcp=$top/tests/mcp
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "bench-mcp: node and npm are needed (contrib/install-deps)" >&2
	exit 1
fi
if [ ! -f "$mcp/node_modules/@modelcontextprotocol/server-filesystem/package.json" ] ||
    [ ! -f "$mcp/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
	(cd "$mcp" && npm ci --no-audit --no-fund >&2) || {
		echo "bench-mcp: npm ci in $mcp failed" >&2
		exit 1
	}
fi
exec node "$mcp/bench.mjs" "$@"
