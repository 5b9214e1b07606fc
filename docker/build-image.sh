#!/usr/bin/env bash
# Build the Grove sandbox image, idempotently and without an image registry:
#   1. base image (default grove-base:bookworm) from debootstrap + `docker import`, unless present;
#   2. the backend bundle (npm run bundle -w @grove/backend);
#   3. the agent CLIs for the image (the native Claude Code binary from node_modules);
#   4. the terminal's pty helper (docker/grove-pty.c, gcc -static);
#   5. grove-sandbox:<hash12> from Dockerfile + agents + bundle + pty helper + base id, re-pointing grove-sandbox:latest.
# Environment:
#   BASE_IMAGE            base to build FROM (default grove-base:bookworm; e.g. node:20-bookworm-slim)
#   GROVE_IMAGE           repository name of the result (default grove-sandbox)
#   GROVE_ROOTFS_CACHE    debootstrap target, reused across runs (default /var/cache/grove/rootfs)
#   GROVE_DEBIAN_MIRROR   Debian mirror for debootstrap (default: read from this machine's apt sources)
#   GROVE_BACKEND_BUNDLE  use this prebuilt backend bundle instead of running the bundle script
#   GROVE_CLAUDE_BINARY   the native `claude` to put in the image (default: the one npm installed for
#                         @anthropic-ai/claude-code, node_modules/@anthropic-ai/claude-code-linux-<arch>/claude)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
LOCAL_BASE="grove-base:bookworm"
BASE_IMAGE="${BASE_IMAGE:-$LOCAL_BASE}"
IMAGE="${GROVE_IMAGE:-grove-sandbox}"
ROOTFS="${GROVE_ROOTFS_CACHE:-/var/cache/grove/rootfs}"
ROOTFS_MARKER="$ROOTFS.complete"
BUILD="$HERE/build"
SUITE="bookworm"
BASE_PACKAGES="git,ca-certificates,nodejs"

say() { printf '[image] %s\n' "$*"; }
die() { printf '[image] error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker CLI not found; run scripts/setup.sh first"
docker info >/dev/null 2>&1 || die "Docker engine not reachable; run scripts/setup.sh (it starts dockerd)"

mkdir -p "$BUILD"
# One build at a time per checkout: concurrent `npm test` runs would otherwise race on build/.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$BUILD/.lock"
  flock 9
fi

is_debian_root() { [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

# The mirror this machine already uses (deb822 .sources first, then sources.list); a suite named
# $SUITE wins, else any non-security deb entry, else deb.debian.org.
apt_mirror() {
  local files=() f uri
  for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && files+=("$f"); done
  if [ "${#files[@]}" -gt 0 ]; then
    uri="$(awk -v suite="$SUITE" '
      BEGIN { RS = ""; FS = "\n" }
      {
        uri = ""; suites = ""; types = ""
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", line); split(line, a, /[ \t]+/); uri = a[1] }
          if (line ~ /^Suites:/) { sub(/^Suites:/, "", line); suites = " " line " " }
          if (line ~ /^Types:/)  { types = line " " }
        }
        if (uri == "" || types !~ /[ \t]deb[ \t]/) next
        if (suites ~ ("[ \t]" suite "[ \t]")) { print uri; found = 1; exit }
        if (fallback == "" && suites !~ /security/) fallback = uri
      }
      END { if (!found && fallback != "") print fallback }' "${files[@]}")"
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  fi
  if [ -f /etc/apt/sources.list ]; then
    uri="$(awk -v suite="$SUITE" '
      $1 == "deb" {
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; found = 1; exit }
        if (fallback == "" && $(i + 1) !~ /security/) fallback = $i
      }
      END { if (!found && fallback != "") print fallback }' /etc/apt/sources.list)"
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  fi
  echo "http://deb.debian.org/debian"
}

ensure_local_base() {
  if docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    say "base $LOCAL_BASE present"
    return
  fi
  if [ ! -f "$ROOTFS_MARKER" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
      is_debian_root || die "debootstrap is missing: install it (apt-get install debootstrap) and rerun as root, or set BASE_IMAGE=node:20-bookworm-slim where a registry is reachable"
      say "installing debootstrap"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    [ "$(id -u)" = 0 ] || die "debootstrap needs root to build $LOCAL_BASE"
    if [ -e "$ROOTFS" ]; then
      say "removing half-done rootfs at $ROOTFS"
      rm -rf "$ROOTFS"
    fi
    local mirror="${GROVE_DEBIAN_MIRROR:-$(apt_mirror)}"
    say "debootstrap $SUITE from $mirror into $ROOTFS (about a minute)"
    mkdir -p "$(dirname "$ROOTFS")"
    if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$ROOTFS" "$mirror" >"$ROOTFS.log" 2>&1; then
      tail -n 30 "$ROOTFS.log" >&2
      die "debootstrap failed (full log: $ROOTFS.log)"
    fi
    # Package caches are dead weight in the image.
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    touch "$ROOTFS_MARKER"
  else
    say "reusing rootfs $ROOTFS"
  fi
  say "importing $LOCAL_BASE"
  tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    - "$LOCAL_BASE" >/dev/null
}

# 1. base
if [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; then
  ensure_local_base
elif ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  say "base $BASE_IMAGE not present locally; docker build will try to pull it"
fi

# 2. backend bundle
if [ -n "${GROVE_BACKEND_BUNDLE:-}" ]; then
  BUNDLE="$GROVE_BACKEND_BUNDLE"
  say "using prebuilt bundle $BUNDLE"
else
  BUNDLE="$ROOT/packages/backend/dist/backend.mjs"
  say "bundling backend"
  if ! (cd "$ROOT" && npm run --silent bundle -w @grove/backend) >"$BUILD/bundle.log" 2>&1; then
    tail -n 30 "$BUILD/bundle.log" >&2
    die "backend bundle failed (npm run bundle -w @grove/backend)"
  fi
fi
[ -s "$BUNDLE" ] || die "backend bundle $BUNDLE is missing or empty"

# The context holds exactly what the Dockerfile copies (logs and the lock stay outside it).
CTX="$BUILD/context"
mkdir -p "$CTX/agents"

# 3. agent CLIs. The Claude Code binary is 370 MB: it is hard-linked into the context (copied only
# across filesystems) and replaced only when the source file changed; its hash is cached by file
# identity, so rebuilding for a backend change does not re-read it.
claude_default() {
  local arch
  case "$(uname -m)" in
    x86_64|amd64) arch=x64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) return 1 ;;
  esac
  echo "$ROOT/node_modules/@anthropic-ai/claude-code-linux-$arch/claude"
}
CLAUDE_SRC="${GROVE_CLAUDE_BINARY:-$(claude_default || true)}"
CLAUDE_CTX="$CTX/agents/claude"
CLAUDE_HASH="none"
if [ -n "$CLAUDE_SRC" ] && [ -f "$CLAUDE_SRC" ]; then
  [ -x "$CLAUDE_SRC" ] || die "$CLAUDE_SRC is not executable"
  CLAUDE_SRC="$(readlink -f "$CLAUDE_SRC")"
  # Identity of the source file: npm writes a new file (new inode) on every install, so this changes
  # whenever the binary may have, without reading 370 MB to find out.
  src_key="$(stat -c '%d:%i:%s:%Y' "$CLAUDE_SRC")"
  cache="$BUILD/claude.sha256"
  if [ -f "$CLAUDE_CTX" ] && [ -f "$cache" ] && [ "$(cut -d' ' -f1 "$cache")" = "$src_key" ]; then
    CLAUDE_HASH="$(cut -d' ' -f2 "$cache")"
  else
    say "adding $(basename "$(dirname "$CLAUDE_SRC")")/claude to the build context"
    rm -f "$CLAUDE_CTX" "$cache"
    ln "$CLAUDE_SRC" "$CLAUDE_CTX" 2>/dev/null || cp -p "$CLAUDE_SRC" "$CLAUDE_CTX"
    CLAUDE_HASH="$(sha256sum "$CLAUDE_CTX" | cut -d' ' -f1)"
    echo "$src_key $CLAUDE_HASH" > "$cache"
  fi
  # The version from the package beside the binary: the binary itself is never run on the host.
  version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$(dirname "$CLAUDE_SRC")/package.json" 2>/dev/null | head -n 1)"
  say "claude ${version:-(unknown version)} (sha256 ${CLAUDE_HASH:0:12})"
else
  rm -f "$CLAUDE_CTX"
  say "warning: no Claude Code binary at ${CLAUDE_SRC:-<none for $(uname -m)>}; the image will not have the claude provider's CLI (npm install, or set GROVE_CLAUDE_BINARY)"
fi

# 4. the terminal's pty helper: static, so it runs on any base (the image has no compiler).
command -v gcc >/dev/null 2>&1 || die "gcc is missing: run scripts/setup.sh (it installs gcc + libc6-dev)"
if ! gcc -static -O2 -Wall -Wextra -Werror -o "$CTX/grove-pty.new" "$HERE/grove-pty.c" 2>"$BUILD/pty.log"; then
  cat "$BUILD/pty.log" >&2
  die "building docker/grove-pty.c failed (gcc -static; is libc6-dev installed?)"
fi
strip "$CTX/grove-pty.new" 2>/dev/null || true
mv "$CTX/grove-pty.new" "$CTX/grove-pty"

# 5. image, keyed by everything that goes into it
install -m 0644 "$HERE/Dockerfile" "$CTX/Dockerfile"
install -m 0644 "$BUNDLE" "$CTX/backend.mjs"
# The sandbox user's home is defined once, as SANDBOX_PATHS.home: the driver mounts the tmpfs and the agent
# state there, so the image must make the same directory the user's home.
SANDBOX_HOME="$(sed -n "s/^  home: '\(\/[^']*\)',$/\1/p" "$ROOT/packages/sandbox/src/types.ts")"
[ -n "$SANDBOX_HOME" ] || die "could not read SANDBOX_PATHS.home from packages/sandbox/src/types.ts"
BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || echo "$BASE_IMAGE")"
HASH="$( { sha256sum "$CTX/Dockerfile" "$CTX/backend.mjs" "$CTX/grove-pty" | cut -d' ' -f1; echo "claude $CLAUDE_HASH"; echo "$BASE_ID"; echo "home $SANDBOX_HOME"; } | sha256sum | cut -c1-12)"
TAG="$IMAGE:$HASH"

# Earlier builds' tags, once no container (running or stopped) uses them: each is ~800 MB. docker rmi
# refuses an image a container still uses, so a stopped workspace keeps the image it will start from.
prune_old() {
  local t removed=0
  for t in $(docker images --format '{{.Repository}}:{{.Tag}}' "$IMAGE"); do
    case "$t" in "$TAG"|"$IMAGE:latest"|*:'<none>') continue ;; esac
    if docker rmi "$t" >/dev/null 2>&1; then removed=$((removed + 1)); fi
  done
  [ "$removed" = 0 ] || say "removed $removed unused older $IMAGE image(s)"
}

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" "$IMAGE:latest"
  say "$TAG up to date (latest -> $HASH)"
  prune_old
  exit 0
fi

say "building $TAG from $BASE_IMAGE"
# Legacy builder: no BuildKit frontend image to fetch, no registry lookups for a local base.
if ! DOCKER_BUILDKIT=0 docker build \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --build-arg "SANDBOX_HOME=$SANDBOX_HOME" \
    --label "grove.hash=$HASH" \
    -t "$TAG" -t "$IMAGE:latest" \
    "$CTX" >"$BUILD/build.log" 2>&1; then
  tail -n 40 "$BUILD/build.log" >&2
  die "docker build failed (full log: $BUILD/build.log)"
fi
say "built $TAG (latest -> $HASH)"
prune_old
