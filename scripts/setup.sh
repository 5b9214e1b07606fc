#!/usr/bin/env bash
# Idempotent machine setup for Grove: npm dependencies, a running Docker engine, the sandbox image.
# Fast when everything is in place. Usage: scripts/setup.sh [--no-install] [--with-browser]
#   --no-install     skip `npm ci` (used by `npm test`'s pretest)
#   --with-browser   also make sure Debian's chromium, openssh-server and postgresql are there (the browser
#                    tests, the ssh remote test and the PostgreSQL registry tests need them)
# Works from a fresh clone, as root in CI without a TTY, and re-run any number of times.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKERD_LOG="/var/log/grove-dockerd.log"
DOCKER_WAIT_S=60
INSTALL=1
BROWSER=0
START_S=$SECONDS

for arg in "$@"; do
  case "$arg" in
    --no-install) INSTALL=0 ;;
    --with-browser) BROWSER=1 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) printf 'setup: unknown argument %s (try --help)\n' "$arg" >&2; exit 2 ;;
  esac
done

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
is_debian_root() { is_root && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

# 0. toolchain the rest relies on
command -v node >/dev/null 2>&1 || die "node is missing: install Node.js >= 20.9 (e.g. from nodejs.org or NodeSource)"
command -v npm >/dev/null 2>&1 || die "npm is missing: install it alongside Node.js >= 20.9"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "Node.js $(node --version) is too old: Grove needs >= 20.9"

# 1. npm dependencies: `npm ci` only when node_modules is missing or the lockfile moved on.
install_deps() {
  local stamp="$ROOT/node_modules/.grove-setup.stamp"
  local hidden="$ROOT/node_modules/.package-lock.json"
  local lock="$ROOT/package-lock.json"
  local ref="$stamp"
  # An install made by hand (no stamp yet) counts if npm's own record of it is current; this
  # avoids wiping a working node_modules just because setup has never run here.
  [ -f "$ref" ] || ref="$hidden"
  if [ -d "$ROOT/node_modules" ] && [ -f "$ref" ] && ! [ "$lock" -nt "$ref" ]; then
    touch "$stamp"
    say "npm dependencies up to date"
    return
  fi
  say "npm ci (lockfile changed or node_modules missing)"
  # package.json's allowScripts approves the install scripts that must run (better-sqlite3, esbuild).
  (cd "$ROOT" && npm ci --no-audit --no-fund </dev/null)
  if ! (cd "$ROOT" && node -e "new (require('better-sqlite3'))(':memory:').close()") >/dev/null 2>&1; then
    die "better-sqlite3's native module did not build; check that package.json allowScripts approves it, then run: npm rebuild better-sqlite3"
  fi
  touch "$stamp"
}

if [ "$INSTALL" = 1 ]; then
  install_deps
else
  say "skipping npm ci (--no-install)"
fi

# 2. Docker engine
docker_ok() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

install_docker() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=("dockerd")
  command -v docker >/dev/null 2>&1 || missing+=("docker CLI")
  [ "${#missing[@]}" -eq 0 ] && return
  if ! is_debian_root; then
    die "missing: ${missing[*]}. Install Docker Engine (Debian/Ubuntu as root: apt-get install docker.io iptables) and rerun"
  fi
  say "installing docker.io + iptables (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io iptables </dev/null >/dev/null
}

start_docker() {
  if ! is_root; then
    local why
    why="$(docker info 2>&1 >/dev/null | tail -n 1 || true)"
    die "Docker engine not reachable (${why:-no answer}). Start it (sudo systemctl start docker) or add $(id -un) to the docker group, then rerun"
  fi
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 && systemctl start docker >/dev/null 2>&1; then
    say "started docker via systemd"
  else
    say "starting dockerd in the background (log: $DOCKERD_LOG)"
    # setsid + nohup: the daemon outlives this script and the CI step that ran it.
    # fd 8 (the start lock) is closed for the daemon, or it would hold the lock for its lifetime.
    nohup setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null 8>&- &
  fi
  local waited=0
  until docker info >/dev/null 2>&1; do
    if [ "$waited" -ge "$DOCKER_WAIT_S" ]; then
      [ -f "$DOCKERD_LOG" ] && tail -n 20 "$DOCKERD_LOG" >&2
      die "dockerd did not answer within ${DOCKER_WAIT_S}s (see $DOCKERD_LOG)"
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

if docker_ok; then
  say "docker engine up ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
else
  install_docker
  # Two setups at once (parallel test runs) must not start two daemons.
  lock="${TMPDIR:-/tmp}/grove-setup-dockerd.lock"
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$lock"
    flock 8
  fi
  if docker_ok; then
    say "docker engine up"
  else
    start_docker
    say "docker engine up ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
  fi
  exec 8>&-
fi

# 3. sandbox image
bash "$ROOT/docker/build-image.sh"

# 4. the dashboard: `next build` when there is no build or a source is newer than it
web="$ROOT/apps/web"
build_id="$web/.next/BUILD_ID"
if [ ! -f "$build_id" ] || [ -n "$(find "$web/src" "$web/next.config.ts" "$web/package.json" "$ROOT/packages/contracts/src" -newer "$build_id" -print -quit 2>/dev/null)" ]; then
  say "building the dashboard (next build)"
  (cd "$ROOT" && NEXT_TELEMETRY_DISABLED=1 npm run build -w @grove/web --silent </dev/null >/dev/null) || die "the dashboard did not build: run npm run build -w @grove/web to see why"
else
  say "dashboard build up to date"
fi

# 5. the browser for the end-to-end tests (Debian's chromium; never a downloaded browser build)
if [ "$BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  is_debian_root || die "the browser tests need /usr/bin/chromium: install Debian's chromium package"
  say "installing chromium (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium </dev/null >/dev/null
fi

# 6. sshd for the ssh remote test (Debian's openssh-server; the test runs its own on loopback, never the service)
if [ "$BROWSER" = 1 ] && [ ! -x /usr/sbin/sshd ]; then
  is_debian_root || die "the ssh remote test needs /usr/sbin/sshd: install Debian's openssh-server package"
  say "installing openssh-server (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server </dev/null >/dev/null
fi

# 7. PostgreSQL server binaries for the registry tests on PostgreSQL (each test run starts its own throwaway cluster
#    on a Unix socket as an unprivileged user; Debian's packaged cluster is not used)
has_initdb() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; }; }
if [ "$BROWSER" = 1 ] && ! has_initdb; then
  is_debian_root || die "the PostgreSQL registry tests need initdb and pg_ctl: install Debian's postgresql package"
  say "installing postgresql (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql </dev/null >/dev/null
fi

say "done in $((SECONDS - START_S))s"
