#!/usr/bin/env bash
# The Dockerfile, checked: builds the image with podman from a clean clone of a commit and runs the
# demo in it (the Brown corpus mounted read-only, no network at run time), then prints each phase's
# time, the image's size and the demo's figure. No registry is needed: the Dockerfile's base
# (debian:bookworm-slim) is made here with debootstrap and imported under that name.
#
#   sudo scripts/container_check.sh [-c COMMIT] [-m MIRROR] [-w WORK] [-k]
#     -c COMMIT  what to build (default HEAD here; uncommitted changes are not in it)
#     -m MIRROR  Debian mirror for the base image (default http://deb.debian.org/debian)
#     -w WORK    scratch folder (clone, run directory, log); must not exist
#                (default /var/tmp/roformer-container)
#     -k         keep the image (roformer:check), the base this script made and WORK after a
#                passing check (a failing one keeps them, for inspection)
#   SHARED_DIR   the folder holding data/brown (default: ../shared beside this checkout)
#
# Needs root, Debian's archive and PyPI; installs podman, runc and debootstrap when missing. The
# build downloads about 3 GB (torch) and compiles the program (most of the time; README says what a
# loaded 2-core machine took). Not part of
# .ci/run for that reason; run it after changing the Dockerfile or what set-up installs.
# This sandbox's quirks, which a plain host does not need but tolerates: `podman build --isolation
# chroot` and `podman run --runtime runc` with raised nofile/nproc limits (crun cannot raise
# RLIMIT_NOFILE here).
set -euo pipefail

COMMIT="" MIRROR=http://deb.debian.org/debian WORK=/var/tmp/roformer-container KEEP=0
while getopts "c:m:w:k" opt; do
  case "$opt" in
    c) COMMIT="$OPTARG" ;;
    m) MIRROR="$OPTARG" ;;
    w) WORK="$OPTARG" ;;
    k) KEEP=1 ;;
    *) sed -n '7,14p' "$0" >&2; exit 1 ;;
  esac
done
[ -n "$WORK" ] || { echo "container_check: -w needs a folder" >&2; exit 1; }
WORK="$(realpath -m "$WORK")"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$REPO/../shared}"
COMMIT="$(git -C "$REPO" rev-parse "${COMMIT:-HEAD}")"
IMAGE=localhost/roformer:check
LOG="$WORK.log"
MADE_BASE=0

die() { echo "container_check: $*" >&2; exit 1; }
CHECK_TAG=container
source "$REPO/scripts/check_phases.sh"
load() { cut -d' ' -f1-3 /proc/loadavg; }

[ "$(id -u)" = 0 ] || die "needs root (apt-get, debootstrap, podman's storage): sudo $0 $*"
[ -e "$WORK" ] && die "$WORK exists; give a new folder with -w (this script removes only what it made)"
[ -f "$SHARED_DIR/data/brown/train.txt" ] || die "no Brown corpus under $SHARED_DIR/data/brown (set SHARED_DIR)"
# The base image is the Dockerfile's, made from the Debian release its tag names.
BASE="$(awk 'toupper($1) == "FROM" {print $2; exit}' "$REPO/Dockerfile")"
[[ "$BASE" =~ ^debian:([a-z]+)-slim$ ]] ||
  die "the Dockerfile's base is $BASE; this script makes debian:<release>-slim bases only"
SUITE="${BASH_REMATCH[1]}"
BASE_REF="docker.io/library/$BASE"  # what FROM's short name means

mkdir -p "$WORK"
: >"$LOG"
say "checking $COMMIT in a container (log: $LOG); load average $(load) on $(nproc) cores"
[ -z "$(git -C "$REPO" status --porcelain)" ] || say "note: uncommitted changes here are not in the clone ($COMMIT)"

cleanup() {
  local rc=$?
  row "load average at the end" "$(load)"
  say "summary ($COMMIT$([ $rc = 0 ] || echo ", FAILED"))"
  print_summary
  if [ $rc = 0 ] && [ "$KEEP" = 0 ]; then
    podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
    [ "$MADE_BASE" = 1 ] && { podman rmi -f "$BASE_REF" >/dev/null 2>&1 || true; }
    rm -rf --one-file-system "$WORK"
    say "removed $IMAGE$([ "$MADE_BASE" = 1 ] && echo ", $BASE_REF") and $WORK (-k keeps them)"
  else
    say "kept $IMAGE, $WORK$([ "$MADE_BASE" = 1 ] && echo " and the base $BASE_REF")"
  fi
  exit $rc
}
trap cleanup EXIT

install_tools() {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends podman runc debootstrap \
    | { grep -E '^(Need to get|After this operation|E:)' || true; }
}
missing_tools=""
for t in podman runc debootstrap; do command -v "$t" >/dev/null || missing_tools+="$t "; done
[ -z "$missing_tools" ] || phase "installing ${missing_tools}(apt-get)" install_tools

# debian:<release>-slim as Debian publishes it, near enough: a minbase root, the release's three
# archives, no apt lists, bash as the command. Plus this site's settings for reaching the archives,
# as any machine on its network has them: extra CA certificates (a TLS-inspecting proxy; they enter
# the trust store when the Dockerfile installs ca-certificates) and pip's configuration.
# (A phase's function runs where errexit does not apply: each step that can fail returns.)
make_base() {
  local root="$WORK/base"
  debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" || return 1
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF || return 1
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates" &&
      cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" || return 1
  fi
  if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$root/etc/pip.conf" || return 1; fi
  tar -C "$root" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$BASE_REF" || return 1
  rm -rf --one-file-system "$root"
}
if podman image exists "$BASE_REF"; then
  say "base image $BASE_REF is here already; using it (podman rmi it to make a fresh one)"
else
  phase "base image (debootstrap $SUITE)" make_base
  MADE_BASE=1
fi
row "base image" "$BASE_REF, $(podman image inspect --format '{{.Size}}' "$BASE_REF" | numfmt --to=si)B"

clone() {
  git clone -q --no-checkout "$REPO" "$WORK/src" && git -C "$WORK/src" checkout -q --detach "$COMMIT"
}
phase "clone $COMMIT" clone
# --pull=never: the base is the one made above, never a registry's.
phase "podman build" podman build --isolation chroot --pull=never -t "$IMAGE" "$WORK/src"
row "image size" "$(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=si)B ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"

# The demo as README's `make demo` runs it, inside the image: no network (nothing is fetched at run
# time), Brown read-only, the run directory on the host.
RUN=(podman run --rm --runtime runc --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 --network none
     -v "$SHARED_DIR/data/brown:/data/brown:ro" -v "$WORK/runs:/work/runs")
mkdir -p "$WORK/runs"
phase "demo in the container" "${RUN[@]}" -e BROWN_DIR=/data/brown -e RUN_DIR=/work/runs/demo \
  --entrypoint bash "$IMAGE" /opt/roformer/scripts/demo.sh
row "demo result" "$(grep -E '^MLM accuracy' "$LOG" | tail -1)"
# The image's own entry point, as the Dockerfile's header uses it, on the run the demo left.
phase "roformer inspect (entry point)" "${RUN[@]}" "$IMAGE" inspect runs/demo
row "versions in the image" "$("${RUN[@]}" --entrypoint bash "$IMAGE" -c \
  "dpkg-query -W -f='sentencepiece \${Version}, ' libsentencepiece-dev; g++ -dumpfullversion | sed 's/^/g++ /'" | tr -d '\n')"
row "podman" "$(podman --version)"
