#!/usr/bin/env bash
# Toolchain bootstrap: make sure `node` (>= 22.20, Node 24 LTS preferred) and pnpm are on PATH.
# Source it (`. scripts/bootstrap.sh`) so that the PATH change stays in your shell.
# Everything comes from the npm registry: the `node` package ships the official binaries
# (through its platform package), and pnpm is installed with npm.
#
# Env: NODE_VERSION (default from .nvmrc), PNPM_VERSION (default from package.json's packageManager),
#      TOOLS_DIR (default .tools in the repository).

_bs_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_bs_tools="${TOOLS_DIR:-$_bs_root/.tools}"
_bs_node_version="${NODE_VERSION:-$(tr -d ' \nv' < "$_bs_root/.nvmrc")}"
_bs_pnpm_version="${PNPM_VERSION:-$(sed -n 's/.*"packageManager": *"pnpm@\([^"+]*\).*/\1/p' "$_bs_root/package.json")}"

_bs_node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e '
    const [maj, min] = process.versions.node.split(".").map(Number);
    process.exit(maj > 22 || (maj === 22 && min >= 20) ? 0 : 1);
  '
}

_bs_fail() { echo "bootstrap: $*" >&2; return 1; }

if [ -x "$_bs_tools/node/bin/node" ]; then
  export PATH="$_bs_tools/node/bin:$PATH"
fi

if ! _bs_node_ok; then
  echo "bootstrap: node $(node --version 2>/dev/null || echo missing) is older than 22.20; installing node@$_bs_node_version from the npm registry into $_bs_tools/node" >&2
  command -v npm >/dev/null 2>&1 || _bs_fail "npm is needed to install Node (install any Node.js with npm first)" || return 1 2>/dev/null || exit 1
  mkdir -p "$_bs_tools/node"
  # The `node` package's preinstall fetches node-<platform>-<arch>@<version> from the registry.
  npm install --prefix "$_bs_tools/node" --no-save --no-audit --no-fund --loglevel=error "node@$_bs_node_version" >&2 \
    || _bs_fail "npm install node@$_bs_node_version failed" || return 1 2>/dev/null || exit 1
  mkdir -p "$_bs_tools/node/bin"
  ln -sf "$_bs_tools/node/node_modules/node/bin/node" "$_bs_tools/node/bin/node"
  export PATH="$_bs_tools/node/bin:$PATH"
  _bs_node_ok || _bs_fail "node on PATH is still $(node --version 2>/dev/null); expected >= 22.20" || return 1 2>/dev/null || exit 1
fi

# npm and npx of the new Node: the `node` package ships only the binary; the system npm
# runs fine under it, and `node` on PATH is now the new one.
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$_bs_pnpm_version" ]; then
  if [ -x "$_bs_tools/pnpm/bin/pnpm" ] && [ "$("$_bs_tools/pnpm/bin/pnpm" --version 2>/dev/null)" = "$_bs_pnpm_version" ]; then
    export PATH="$_bs_tools/pnpm/bin:$PATH"
  else
    echo "bootstrap: installing pnpm@$_bs_pnpm_version with npm into $_bs_tools/pnpm" >&2
    npm install --global --prefix "$_bs_tools/pnpm" --no-audit --no-fund --loglevel=error "pnpm@$_bs_pnpm_version" >&2 \
      || _bs_fail "npm install pnpm@$_bs_pnpm_version failed" || return 1 2>/dev/null || exit 1
    export PATH="$_bs_tools/pnpm/bin:$PATH"
  fi
fi

# node-gyp must build native addons against the Node that runs them, not the system's headers.
# The npm `node` package ships them in its platform package (node-<os>-<arch>/include/node).
# A glob, not `ls` in a command substitution: under the caller's `set -euo pipefail` a failing `ls` (no .tools/node,
# because Node was already on PATH) would stop the caller's script without a word.
_bs_node_dir=""
for _bs_candidate in "$_bs_tools"/node/node_modules/node/node_modules/node-*-*/include/node; do
  if [ -d "$_bs_candidate" ]; then _bs_node_dir="${_bs_candidate%/include/node}"; break; fi
done
# A Node found on PATH ships its headers beside its binary (<prefix>/include/node).
if [ -z "$_bs_node_dir" ]; then
  _bs_candidate="$(dirname "$(dirname "$(command -v node)")")"
  if [ -d "$_bs_candidate/include/node" ]; then _bs_node_dir="$_bs_candidate"; fi
fi
if [ -n "$_bs_node_dir" ]; then
  export npm_config_nodedir="$_bs_node_dir"
fi

echo "bootstrap: node $(node --version), pnpm $(pnpm --version)" >&2
unset -f _bs_node_ok _bs_fail
unset _bs_root _bs_tools _bs_node_version _bs_pnpm_version _bs_node_dir _bs_candidate
