# Sourced by bench/proxy.sh and bench/h2.sh: how a bench starts a boundary build.
#   entry_of DIST            the CLI entry of a build: dist/app/main.js, or dist/main.js in builds from before src/app/
#                            (BOUNDARY_REF)
#   exec_logged FILE CMD...  replaces the shell with CMD, its stdout going to FILE: the file itself, or with LOG_PIPE=1
#                            a FIFO that cat, pinned by PIN_LOAD (an array, may be empty), empties into it. The process
#                            keeps the shell's PID either way, as the benches' CPU readings need. cat is started from a
#                            subshell that exits at once, so it is no child of the proxy: a process's CPU reading counts
#                            its children, and a container runtime's reader is no part of the container's CPU either.
#   trim_log FILE            empties a log before a measurement and prints how many lines it held (0 for no file).
#                            A loaded boundary writes tens of MB of audit lines a second; left on disk, the kernel
#                            writes a gigabyte of them back at a time, and the measurement that falls in reads
#                            boundary's CPU higher (docs/benchmarks.md#fifteenth-pass-the-logs-writeback). Each line is
#                            still written and copied into the page cache; its pages are dropped before writeback.
entry_of() { if [[ -f $1/app/main.js ]]; then echo "$1/app/main.js"; else echo "$1/main.js"; fi; }

exec_logged() {
  local file=$1
  shift
  # Appended to, so that after trim_log the next line lands at the start of the file, not past a hole.
  if [[ ${LOG_PIPE:-0} != 1 ]]; then exec "$@" >>"$file"; fi
  local fifo="$file.fifo"
  rm -f "$fifo" && mkfifo "$fifo"
  ("${PIN_LOAD[@]}" cat "$fifo" >>"$file" &)
  exec "$@" >"$fifo"
}

trim_log() {
  local lines=0
  if [[ -f $1 ]]; then
    lines=$(wc -l <"$1")
    : >"$1"
  fi
  echo "$lines"
}
