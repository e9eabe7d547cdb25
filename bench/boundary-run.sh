# Sourced by bench/proxy.sh and bench/h2.sh: how a bench starts a boundary build.
#   entry_of DIST            the CLI entry of a build: dist/app/main.js, or dist/main.js in builds from before src/app/
#                            (BOUNDARY_REF)
#   exec_logged FILE CMD...  replaces the shell with CMD, its stdout going to FILE: the file itself, or with LOG_PIPE=1
#                            a FIFO that cat, pinned by PIN_LOAD (an array, may be empty), empties into it. The process
#                            keeps the shell's PID either way, as the benches' CPU readings need. cat is started from a
#                            subshell that exits at once, so it is no child of the proxy: a process's CPU reading counts
#                            its children, and a container runtime's reader is no part of the container's CPU either.
entry_of() { if [[ -f $1/app/main.js ]]; then echo "$1/app/main.js"; else echo "$1/main.js"; fi; }

exec_logged() {
  local file=$1
  shift
  if [[ ${LOG_PIPE:-0} != 1 ]]; then exec "$@" >"$file"; fi
  local fifo="$file.fifo"
  rm -f "$fifo" && mkfifo "$fifo"
  ("${PIN_LOAD[@]}" cat "$fifo" >"$file" &)
  exec "$@" >"$fifo"
}
