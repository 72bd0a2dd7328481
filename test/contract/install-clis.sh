#!/usr/bin/env bash
# Install the real vendor CLIs, pinned, into a cache folder outside the checkout, for the
# contract tests. Idempotent: a CLI whose binary already answers `--version` with the pinned
# version is not touched, so a warm run takes about a second.
#
#   bash test/contract/install-clis.sh            # human-readable log on stderr
#   eval "$(bash test/contract/install-clis.sh)"  # stdout is only shell assignments:
#       POLYSPAWN_CLAUDE_BIN=...  POLYSPAWN_CODEX_BIN=...  POLYSPAWN_COPILOT_BIN=...
#       POLYSPAWN_GEMINI_BIN=...  POLYSPAWN_CLAUDE_ACP_BIN=...  POLYSPAWN_CODEX_ACP_BIN=...
#       POLYSPAWN_COPILOT_XDG_CACHE_HOME=...
#
# Environment:
#   POLYSPAWN_CLI_CACHE   where to install (default: $HOME/.cache/polyspawn/clis)
#   POLYSPAWN_CLI_FORCE=1 reinstall even if the binaries answer
#
# Notes (see test/contract/FINDINGS.md):
# - claude-code's postinstall must run: it links the native binary over bin/claude.exe (with
#   --ignore-scripts that file stays a ~500-byte stub). npm 11 warns that the script is not in
#   allowScripts but runs it anyway. So never pass --ignore-scripts here.
# - copilot unpacks ~235 MB into $XDG_CACHE_HOME/copilot/pkg/<platform>/<version> on its first
#   run. We pin that to "$CACHE/xdg-cache" and warm it here, once, so every test (and every
#   parallel copilot) shares one unpacked copy. Run copilot with
#   XDG_CACHE_HOME="$POLYSPAWN_COPILOT_XDG_CACHE_HOME".
set -euo pipefail

CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.169.0
COPILOT_VERSION=1.0.102
GEMINI_VERSION=0.61.0
# The ACP adapters (docs/acp-agents.md): each runs the pinned CLI above (CLAUDE_CODE_EXECUTABLE, CODEX_PATH).
CLAUDE_ACP_VERSION=0.101.0
CODEX_ACP_VERSION=2.6.0

CACHE="${POLYSPAWN_CLI_CACHE:-$HOME/.cache/polyspawn/clis}"
XDG_CACHE_DIR="$CACHE/xdg-cache"
mkdir -p "$CACHE" "$XDG_CACHE_DIR"

log() { printf '[install-clis] %s\n' "$*" >&2; }

# One installer at a time (parallel CI jobs, two test files) per cache folder.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock"
  flock 9
fi

# version_ok BIN VERSION [ENV...]: true if BIN --version prints VERSION.
version_ok() {
  local bin="$1" want="$2"
  shift 2
  [[ -x "$bin" ]] || return 1
  local out
  out="$(env "$@" "$bin" --version </dev/null 2>/dev/null)" || return 1
  [[ "$out" == *"$want"* ]]
}

# install_pkg NAME SPEC DIR: npm install SPEC into DIR (its own prefix, its own node_modules).
install_pkg() {
  local name="$1" spec="$2" dir="$3"
  log "installing $spec into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  # A package.json of our own keeps npm from walking up into some unrelated project.
  printf '{"name":"polyspawn-cli-%s","private":true}\n' "$name" >"$dir/package.json"
  local t0=$SECONDS
  npm install --prefix "$dir" --no-audit --no-fund --no-save --no-package-lock \
    --loglevel=error "$spec" >&2
  log "$spec installed in $((SECONDS - t0)) s"
}

ensure() {
  local name="$1" spec="$2" version="$3" binname="$4"
  local dir="$CACHE/$name-$version"
  local bin="$dir/node_modules/.bin/$binname"
  shift 4
  if [[ "${POLYSPAWN_CLI_FORCE:-}" != 1 ]] && version_ok "$bin" "$version" "$@"; then
    log "$spec already installed: $bin"
  else
    install_pkg "$name" "$spec" "$dir"
    if ! version_ok "$bin" "$version" "$@"; then
      log "ERROR: $bin --version does not report $version after install:"
      env "$@" "$bin" --version </dev/null >&2 || true
      exit 1
    fi
  fi
  printf '%s\n' "$bin"
}

COPILOT_ENV=(XDG_CACHE_HOME="$XDG_CACHE_DIR" COPILOT_AUTO_UPDATE=false)

CLAUDE_BIN="$(ensure claude-code "@anthropic-ai/claude-code@$CLAUDE_VERSION" "$CLAUDE_VERSION" claude)"
CODEX_BIN="$(ensure codex "@openai/codex@$CODEX_VERSION" "$CODEX_VERSION" codex)"
COPILOT_BIN="$(ensure copilot "@github/copilot@$COPILOT_VERSION" "$COPILOT_VERSION" copilot "${COPILOT_ENV[@]}")"
CLAUDE_ACP_BIN="$(ensure claude-agent-acp "@agentclientprotocol/claude-agent-acp@$CLAUDE_ACP_VERSION" "$CLAUDE_ACP_VERSION" claude-agent-acp)"
CODEX_ACP_BIN="$(ensure codex-acp "@agentclientprotocol/codex-acp@$CODEX_ACP_VERSION" "$CODEX_ACP_VERSION" codex-acp)"
GEMINI_BIN="$(ensure gemini-cli "@google/gemini-cli@$GEMINI_VERSION" "$GEMINI_VERSION" gemini)"

# claude-code: make sure the postinstall really replaced the stub.
CLAUDE_REAL="$(readlink -f "$CLAUDE_BIN")"
if [[ "$(stat -c %s "$CLAUDE_REAL" 2>/dev/null || stat -f %z "$CLAUDE_REAL")" -lt 1000000 ]]; then
  log "ERROR: $CLAUDE_REAL is a stub: claude-code's postinstall did not run (--ignore-scripts?)"
  exit 1
fi

# copilot: its package must be unpacked into the shared XDG cache now, not inside the first
# test. The `--version` check above already does it (1.0.102); this is the fallback.
if [[ ! -d "$XDG_CACHE_DIR/copilot/pkg" ]] || [[ -z "$(ls -A "$XDG_CACHE_DIR/copilot/pkg" 2>/dev/null)" ]]; then
  log "warming copilot's package cache in $XDG_CACHE_DIR"
  t0=$SECONDS
  env "${COPILOT_ENV[@]}" COPILOT_OFFLINE=true "$COPILOT_BIN" help </dev/null >/dev/null 2>&1 || true
  log "copilot cache warmed in $((SECONDS - t0)) s"
fi

log "claude:  $CLAUDE_BIN"
log "codex:   $CODEX_BIN"
log "copilot: $COPILOT_BIN (run with XDG_CACHE_HOME=$XDG_CACHE_DIR)"
log "gemini:  $GEMINI_BIN"
log "claude-agent-acp: $CLAUDE_ACP_BIN (CLAUDE_CODE_EXECUTABLE=claude)"
log "codex-acp: $CODEX_ACP_BIN (CODEX_PATH=codex)"

q() { printf '%q' "$1"; }
echo "POLYSPAWN_CLAUDE_BIN=$(q "$CLAUDE_BIN")"
echo "POLYSPAWN_CODEX_BIN=$(q "$CODEX_BIN")"
echo "POLYSPAWN_COPILOT_BIN=$(q "$COPILOT_BIN")"
echo "POLYSPAWN_COPILOT_XDG_CACHE_HOME=$(q "$XDG_CACHE_DIR")"
echo "POLYSPAWN_GEMINI_BIN=$(q "$GEMINI_BIN")"
echo "POLYSPAWN_CLAUDE_ACP_BIN=$(q "$CLAUDE_ACP_BIN")"
echo "POLYSPAWN_CODEX_ACP_BIN=$(q "$CODEX_ACP_BIN")"
