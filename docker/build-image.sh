#!/usr/bin/env bash
# Build the Grove sandbox image, idempotently and without an image registry:
#   1. base image (default grove-base:bookworm) from debootstrap + `docker import`, unless present;
#   2. the backend bundle (npm run bundle -w @grove/backend);
#   3. grove-sandbox:<hash12> from Dockerfile + bundle + base id, re-pointing grove-sandbox:latest.
# Environment:
#   BASE_IMAGE            base to build FROM (default grove-base:bookworm; e.g. node:20-bookworm-slim)
#   GROVE_IMAGE           repository name of the result (default grove-sandbox)
#   GROVE_ROOTFS_CACHE    debootstrap target, reused across runs (default /var/cache/grove/rootfs)
#   GROVE_DEBIAN_MIRROR   Debian mirror for debootstrap (default: read from this machine's apt sources)
#   GROVE_BACKEND_BUNDLE  use this prebuilt backend bundle instead of running the bundle script
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

# 3. image, keyed by everything that goes into it
# The context holds exactly what the Dockerfile copies (logs and the lock stay outside it).
CTX="$BUILD/context"
mkdir -p "$CTX"
install -m 0644 "$HERE/Dockerfile" "$CTX/Dockerfile"
install -m 0644 "$BUNDLE" "$CTX/backend.mjs"
BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || echo "$BASE_IMAGE")"
HASH="$( { sha256sum "$CTX/Dockerfile" "$CTX/backend.mjs" | cut -d' ' -f1; echo "$BASE_ID"; } | sha256sum | cut -c1-12)"
TAG="$IMAGE:$HASH"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" "$IMAGE:latest"
  say "$TAG up to date (latest -> $HASH)"
  exit 0
fi

say "building $TAG from $BASE_IMAGE"
# Legacy builder: no BuildKit frontend image to fetch, no registry lookups for a local base.
if ! DOCKER_BUILDKIT=0 docker build \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --label "grove.hash=$HASH" \
    -t "$TAG" -t "$IMAGE:latest" \
    "$CTX" >"$BUILD/build.log" 2>&1; then
  tail -n 40 "$BUILD/build.log" >&2
  die "docker build failed (full log: $BUILD/build.log)"
fi
say "built $TAG (latest -> $HASH)"
