#!/usr/bin/env bash
# The peer that bench/coldstart.mjs starts beside polyspawn: mcp-server-subagent (an MCP server
# on the v1 SDK that runs CLI sub-agents, with ask_parent / reply_subagent; its handover document
# is the project's reference for those tools). It is not on the npm registry and stays out of
# package.json (it is no dependency of polyspawn, and AGPL): it is built here, from a checkout of
# its repository, into a cache folder outside this one, at the commit measured so far.
#
#   bash bench/install-peer.sh <checkout of mcp-server-subagent>
#
# Environment: POLYSPAWN_BENCH_PEER_DIR, where to build (default $HOME/.cache/polyspawn/peer).
# The bench finds it there; without it, the bench says so and measures polyspawn alone.
set -euo pipefail

PEER_COMMIT=3c7a01a6ba08615749099555a2ed00d9fb97fb2e # 1.3.3
SOURCE="${1:?usage: bash bench/install-peer.sh <checkout of mcp-server-subagent>}"
DIR="${POLYSPAWN_BENCH_PEER_DIR:-$HOME/.cache/polyspawn/peer}/mcp-server-subagent"

rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
git clone --quiet --no-checkout "$SOURCE" "$DIR"
git -C "$DIR" checkout --quiet "$PEER_COMMIT"
# Its own lock file (it pins @modelcontextprotocol/sdk 1.11.5); no install scripts: tsc builds it.
(cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts >&2 && npx --no-install tsc >&2)
echo "peer built: $DIR/build/index.js" >&2
