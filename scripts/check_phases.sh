# Sourced by the long machine checks (fresh_machine_check.sh, container_check.sh): their log lines,
# timed phases and the summary they print at the end. The caller sets CHECK_TAG (the lines' prefix)
# and LOG (the file every line also goes to) before using them.
SUMMARY=()

say() { printf '\033[1m[%s]\033[0m %s\n' "$CHECK_TAG" "$*" | tee -a "$LOG"; }
# A line kept for the summary.
note() { SUMMARY+=("$*"); say "$*"; }
# Runs "$@" as a timed phase named $1, its output into the log (and on screen).
phase() {
  local name="$1" start rc=0
  shift
  say "== $name"
  start=$(date +%s%N)
  "$@" 2>&1 | tee -a "$LOG" || rc=$?
  local ms=$((($(date +%s%N) - start) / 1000000))
  note "$(printf '%-36s %3dm%02d.%ds%s' "$name" $((ms / 60000)) $((ms / 1000 % 60)) $((ms / 100 % 10)) \
    "$([ $rc = 0 ] || echo "  FAILED (exit $rc)")")"
  return $rc
}
row() { note "$(printf '%-36s %s' "$1" "$2")"; }
print_summary() { printf '  %s\n' "${SUMMARY[@]}" | tee -a "$LOG"; }
