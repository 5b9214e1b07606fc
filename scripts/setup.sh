#!/usr/bin/env bash
# Idempotent machine setup for Grove: npm dependencies, a running Docker engine with gVisor's runsc runtime, the
# sandbox image. Fast when everything is in place. Usage: scripts/setup.sh [--no-install] [--with-browser] [--with-bench]
#   --no-install     skip `npm ci` (used by `npm test`'s pretest)
#   --with-browser   also make sure Debian's chromium, openssh-server and postgresql are there (the browser
#                    tests, the ssh remote test and the PostgreSQL registry tests need them)
#   --with-bench     also make sure Debian's nginx is there (the benchmarks' yardstick; they start their own)
# Works from a fresh clone, as root in CI without a TTY, and re-run any number of times.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKERD_LOG="/var/log/grove-dockerd.log"
DOCKER_WAIT_S=60
INSTALL=1
BROWSER=0
BENCH=0
START_S=$SECONDS

for arg in "$@"; do
  case "$arg" in
    --no-install) INSTALL=0 ;;
    --with-browser) BROWSER=1 ;;
    --with-bench) BENCH=1 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# 2. gVisor's runsc as a second Docker runtime (GROVE_RUNTIME=runsc). Written to daemon.json before the engine
#    starts (read at start) and applied to a running one with SIGHUP (`runtimes` is reloadable): setup never stops or
#    restarts dockerd, so running sandboxes are never taken down. Required when GROVE_RUNTIME=runsc; otherwise a
#    machine where it cannot be set up gets a warning (`npm test`'s gVisor pass then fails, saying the same), and the
#    rest of setup, and of the tests, goes on.
DAEMON_JSON="/etc/docker/daemon.json"
RUNSC_OK=1
runsc_missing() {
  RUNSC_OK=0
  [ "${GROVE_RUNTIME:-runc}" = runsc ] && die "$1"
  if [ "$BROWSER" = 1 ]; then
    say "warning: $1 (npm test's second pass runs the sandbox tests on runsc and will fail)"
  else
    say "note: $1 (only GROVE_RUNTIME=runsc needs it)"
  fi
}

# Merges {"runtimes": {"runsc": …}} into daemon.json, keeping every other key; prints "unchanged" or "written".
write_runsc_config() {
  local bin="$1"
  mkdir -p "$(dirname "$DAEMON_JSON")"
  node -e '
    const fs = require("node:fs");
    const [file, bin] = process.argv.slice(1);
    let cfg = {};
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, "utf8");
      cfg = text.trim() === "" ? {} : JSON.parse(text);
      if (typeof cfg !== "object" || cfg === null || Array.isArray(cfg)) throw new Error(`${file} is not a JSON object`);
    }
    // --network=none: runsc refuses a container in the root network namespace otherwise (Grove never gives one a
    // network anyway). --host-uds=all: without it a socket the backend creates in /run/grove is invisible to the host.
    const want = { path: bin, runtimeArgs: ["--network=none", "--host-uds=all"] };
    if (JSON.stringify(cfg.runtimes?.runsc) === JSON.stringify(want)) { console.log("unchanged"); process.exit(0); }
    cfg.runtimes = { ...(cfg.runtimes ?? {}), runsc: want };
    const tmp = `${file}.grove-${process.pid}`;
    fs.writeFileSync(tmp, JSON.stringify(cfg, null, 2) + "\n", { mode: 0o644 });
    fs.renameSync(tmp, file);
    console.log("written");
  ' "$DAEMON_JSON" "$bin"
}

# The engine lists runsc with Grove's two flags.
engine_has_runsc() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | node -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const r = JSON.parse(s || "{}").runsc;
      const args = r?.runtimeArgs ?? [];
      process.exit(r && args.includes("--network=none") && args.includes("--host-uds=all") ? 0 : 1);
    });'
}

prepare_runsc() {
  if ! command -v runsc >/dev/null 2>&1; then
    if ! is_debian_root; then
      runsc_missing "gVisor's runsc is not installed: install it (Debian as root: apt-get install runsc) and rerun"
      return
    fi
    say "installing runsc (apt-get)"
    apt-get update -qq </dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc </dev/null >/dev/null
  fi
  if ! is_root; then return; fi
  local r
  r="$(write_runsc_config "$(command -v runsc)")" || die "could not merge the runsc runtime into $DAEMON_JSON"
  [ "$r" = written ] && say "added the runsc runtime to $DAEMON_JSON"
  return 0
}

# After the engine is up: reload it if it does not list runsc yet (SIGHUP, never a restart).
apply_runsc() {
  [ "$RUNSC_OK" = 1 ] || return 0
  engine_has_runsc && { say "docker runtime runsc configured"; return; }
  if ! is_root; then
    runsc_missing "the Docker engine has no runsc runtime: add {\"runtimes\": {\"runsc\": {\"path\": \"$(command -v runsc)\", \"runtimeArgs\": [\"--network=none\", \"--host-uds=all\"]}}} to $DAEMON_JSON and send dockerd SIGHUP (as root), then rerun"
    return
  fi
  local pid=""
  [ -f /var/run/docker.pid ] && pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != dockerd ]; then
    pid="$(pidof dockerd 2>/dev/null | awk '{print $1}' || true)"
  fi
  [ -n "$pid" ] || { runsc_missing "no local dockerd to reload: make the engine read $DAEMON_JSON (send it SIGHUP)"; return; }
  say "reloading dockerd (SIGHUP, pid $pid) so it reads the runsc runtime; running containers are untouched"
  kill -HUP "$pid"
  local waited=0
  until engine_has_runsc; do
    if [ "$waited" -ge 20 ]; then
      runsc_missing "dockerd did not pick up the runsc runtime from $DAEMON_JSON after SIGHUP (see its log)"
      return
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  say "docker runtime runsc configured"
}

prepare_runsc

# 3. Docker engine
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

apply_runsc

# 4. sandbox image (it carries docker/grove-pty, built with gcc -static against glibc's libc.a)
if ! command -v gcc >/dev/null 2>&1 || [ ! -f /usr/include/pty.h ]; then
  is_debian_root || die "gcc and libc6-dev are missing: install them (apt-get install gcc libc6-dev) and rerun"
  say "installing gcc + libc6-dev (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev </dev/null >/dev/null
fi
bash "$ROOT/docker/build-image.sh"

# 5. the dashboard: `next build` when there is no build or a source is newer than it
web="$ROOT/apps/web"
build_id="$web/.next/BUILD_ID"
if [ ! -f "$build_id" ] || [ -n "$(find "$web/src" "$web/next.config.ts" "$web/package.json" "$ROOT/packages/contracts/src" -newer "$build_id" -print -quit 2>/dev/null)" ]; then
  say "building the dashboard (next build)"
  (cd "$ROOT" && NEXT_TELEMETRY_DISABLED=1 npm run build -w @grove/web --silent </dev/null >/dev/null) || die "the dashboard did not build: run npm run build -w @grove/web to see why"
else
  say "dashboard build up to date"
fi

# 6. the CLI as one file: bin/grove.mjs runs it while none of its inputs is newer, else the sources through tsx
cli_bundle=$(cd "$ROOT" && node apps/cli/bundle.mjs --if-stale </dev/null) || die "the CLI did not bundle: run node apps/cli/bundle.mjs to see why"
say "$cli_bundle"

# Installs one Debian package for steps 7-10, or stops with what needs it when this is not Debian as root.
apt_install() {
  local pkg="$1" need="$2"
  is_debian_root || die "$need: install Debian's $pkg package"
  say "installing $pkg (apt-get)"
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" </dev/null >/dev/null
}

# 7. the browser for the end-to-end tests (Debian's chromium; never a downloaded browser build)
if [ "$BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  apt_install chromium "the browser tests need /usr/bin/chromium"
fi

# 8. sshd for the ssh remote test (Debian's openssh-server; the test runs its own on loopback, never the service)
if [ "$BROWSER" = 1 ] && [ ! -x /usr/sbin/sshd ]; then
  apt_install openssh-server "the ssh remote test needs /usr/sbin/sshd"
fi

# 9. PostgreSQL server binaries for the registry tests on PostgreSQL (each test run starts its own throwaway cluster
#    on a Unix socket as an unprivileged user; Debian's packaged cluster is not used)
has_initdb() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; }; }
if [ "$BROWSER" = 1 ] && ! has_initdb; then
  apt_install postgresql "the PostgreSQL registry tests need initdb and pg_ctl"
fi

# 10. nginx for the benchmarks, which compare Grove's front door with it (each run starts its own nginx, one worker,
#     in a temp prefix; the package's service is never used and, with no init system running, not started)
if [ "$BENCH" = 1 ] && ! command -v nginx >/dev/null 2>&1; then
  apt_install nginx "the benchmarks' yardstick needs nginx"
fi

say "done in $((SECONDS - START_S))s"
