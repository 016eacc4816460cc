#!/usr/bin/env bash
# README's promise, checked: on a fresh Debian machine, `make demo` and `make test` do all the
# set-up. Builds a minimal Debian root filesystem with debootstrap (no CUDA toolkit, no compiler,
# no Python: git and make only, as a newcomer would start), clones this repository into it with
# ../shared beside it (read-only), and runs the two commands there as root. Records each phase's
# time, the build steps of `make demo`, the test counts and the disk used; prints them at the end.
#
#   sudo scripts/fresh_machine_check.sh [-s SUITE] [-r ROOT] [-c COMMIT] [-m MIRROR] [-k]
#     -s SUITE   Debian release: trixie (Debian 13, the default) or bookworm (Debian 12)
#     -r ROOT    where the root filesystem goes; must not exist (default /var/tmp/roformer-fresh-SUITE)
#     -c COMMIT  what to check out in the clone (default HEAD here; uncommitted changes are not in it)
#     -m MIRROR  Debian mirror (default http://deb.debian.org/debian)
#     -k         keep ROOT after a passing check (a failing one is always kept, for inspection)
#   SHARED_DIR   the folder mounted at ../shared (default: ../shared beside this checkout)
#
# Needs root, debootstrap (apt-get install debootstrap), Debian's archive and PyPI, ~25 GB of disk;
# downloads about 3.5 GB. On 2 cores it takes one to two hours, most of it compiling with a cold
# ccache. Not part of .ci/run for that reason; run it before changing what set-up installs.
set -euo pipefail

SUITE=trixie ROOT_FS="" COMMIT="" MIRROR=http://deb.debian.org/debian KEEP=0
while getopts "s:r:c:m:k" opt; do
  case "$opt" in
    s) SUITE="$OPTARG" ;;
    r) ROOT_FS="$OPTARG" ;;
    c) COMMIT="$OPTARG" ;;
    m) MIRROR="$OPTARG" ;;
    k) KEEP=1 ;;
    *) sed -n '9,16p' "$0" >&2; exit 1 ;;
  esac
done
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT_FS="${ROOT_FS:-/var/tmp/roformer-fresh-$SUITE}"
SHARED_DIR="${SHARED_DIR:-$REPO/../shared}"
COMMIT="$(git -C "$REPO" rev-parse "${COMMIT:-HEAD}")"
LOG="$ROOT_FS.log"

die() { echo "fresh_machine_check: $*" >&2; exit 1; }
CHECK_TAG="fresh $SUITE"
source "$REPO/scripts/check_phases.sh"

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts): sudo $0 $*"
command -v debootstrap >/dev/null || die "needs debootstrap: apt-get install debootstrap"
case "$SUITE" in trixie|bookworm) ;; *) die "-s must be trixie or bookworm, not $SUITE" ;; esac
[ -e "$ROOT_FS" ] && die "$ROOT_FS exists; give a new folder with -r (this script removes only what it made)"
[ -f "$SHARED_DIR/data/brown/train.txt" ] || die "no Brown corpus under $SHARED_DIR/data/brown (set SHARED_DIR)"
[ -z "$(git -C "$REPO" status --porcelain)" ] || say "note: uncommitted changes here are not in the clone ($COMMIT)"

# The mounts below ROOT_FS, deepest first (from the kernel's table, not from what we think we did).
mounts_below() { awk -v r="$ROOT_FS/" 'index($2 "/", r) == 1 {print $2}' /proc/self/mounts | sort -r; }
cleanup() {
  local rc=$?
  say "summary ($SUITE, $COMMIT$([ $rc = 0 ] || echo ", FAILED"))"
  print_summary
  for m in $(mounts_below); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  if [ -n "$(mounts_below)" ]; then
    say "still mounted below $ROOT_FS (left in place; unmount before removing it): $(mounts_below | tr '\n' ' ')"
  elif [ $rc = 0 ] && [ "$KEEP" = 0 ] && [ -d "$ROOT_FS" ]; then
    rm -rf --one-file-system "$ROOT_FS"
    say "removed $ROOT_FS (-k keeps it)"
  elif [ -d "$ROOT_FS" ]; then
    say "kept $ROOT_FS"
  fi
  exit $rc
}
trap cleanup EXIT

: >"$LOG"
say "checking $COMMIT on a fresh Debian $SUITE root at $ROOT_FS (log: $LOG)"

make_root() {
  debootstrap --variant=minbase --include=git,make,ca-certificates "$SUITE" "$ROOT_FS" "$MIRROR"
  cp /etc/resolv.conf "$ROOT_FS/etc/resolv.conf"
  # This site's settings for reaching the archives, as any machine on its network has them: extra
  # CA certificates (a TLS-inspecting proxy) and pip's configuration (which bundle to trust).
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOT_FS/usr/local/share/ca-certificates/"
    chroot "$ROOT_FS" update-ca-certificates >/dev/null
  fi
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT_FS/etc/pip.conf"
  mount -t proc proc "$ROOT_FS/proc"
  for d in sys dev; do mount --rbind "/$d" "$ROOT_FS/$d" && mount --make-rslave "$ROOT_FS/$d"; done
  mkdir -p "$ROOT_FS/work/shared"
  mount --bind "$SHARED_DIR" "$ROOT_FS/work/shared" && mount -o remount,bind,ro "$ROOT_FS/work/shared"
  git clone -q --no-checkout "$REPO" "$ROOT_FS/work/roformer"
  git -C "$ROOT_FS/work/roformer" checkout -q --detach "$COMMIT"
}
# A login-like environment inside the root: nothing of this machine's (no CUDA on PATH).
in_root() {
  chroot "$ROOT_FS" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c "cd /work/roformer && $1"
}

phase "debootstrap + clone" make_root
row "root filesystem" "$(du -sh --one-file-system "$ROOT_FS" | cut -f1)"
phase "make demo" in_root "make demo"
phase "make test" in_root "make test"
phase "setup for make demo, nothing changed" in_root "bash scripts/setup.sh demo >/dev/null"
phase "setup for make test, nothing changed" in_root "bash scripts/setup.sh all >/dev/null"

# The figures README quotes, from the log.
row "build steps of make demo" "$(sed -n '/building the roformer program/,/done in/p' "$LOG" |
  grep -oE '^\[[0-9]+/[0-9]+\]' | tail -1)"
row "build steps of make test (the rest)" "$(sed -n '/building everything/,/done in/p' "$LOG" |
  grep -oE '^\[[0-9]+/[0-9]+\]' | tail -1)"
row "demo result" "$(grep -E '^MLM accuracy' "$LOG" | tail -1)"
row "tests" "$(grep -E 'tests passed, ' "$LOG" | tail -1)"
row "tests skipped" "$(grep -cE '\(Skipped\)' "$LOG" || true)"
row "sentencepiece, g++, cmake" "$(in_root "dpkg-query -W -f='\${Version}' libsentencepiece-dev; echo -n ', '; \
  g++ -dumpfullversion; echo -n ', '; cmake --version | head -1" | tr -d '\n')"
for d in /root/.cache/roformer /root/.cache/ccache /work/roformer/build /var/cache/apt; do
  row "disk: $d" "$(du -sh "$ROOT_FS$d" 2>/dev/null | cut -f1)"
done
row "disk: whole root" "$(du -sh --one-file-system "$ROOT_FS" | cut -f1)"
