# shellcheck shell=bash disable=SC2154  # $model_cli, $model_server and $tmp are the caller's
# Shell functions shared by the serving benchmarks: sourced, not run. They use the caller's
# $model_cli, $model_server and die, and the $tmp and pids that start_scratch sets up.

# A scratch directory $tmp and the array pids of processes started: on exit, or on an
# interrupt (through the EXIT trap), the processes are killed and $tmp removed.
start_scratch() {
  tmp=$(mktemp -d)
  pids=()
  trap stop_scratch EXIT
  trap 'exit 130' INT TERM
}
stop_scratch() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}

# Dies unless each argument is an executable (a built binary) and curl is there.
require_binaries() {
  local bin
  for bin in "$@"; do
    [[ -x $bin ]] || die "no $bin (build first)"
  done
  command -v curl >/dev/null || die "curl is needed (scripts/install-deps installs it)"
}

# Writes the MLP 784-1024-1024-10 (model-cli's mlp_784_1024_1024_10) as version 1 of the model
# whose base path is $1.
make_mlp784() {
  "$model_cli" make-example mlp_784_1024_1024_10 --out "$1/1" >/dev/null
}

# A fixed input row of $1 features, feature i being (i * 7 % 17) * $2, as a comma-separated list.
row() { awk -v n="$1" -v scale="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s%g", (i ? "," : ""), (i * 7 % 17) * scale }'; }

# The input row the MLP 784 benchmarks send: 784 values in [0, 0.95).
mlp784_row() { row 784 0.0588; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts model-server NAME with the flags that follow on two free ports and waits for it to
# be ready; sets port_NAME_grpc, port_NAME_rest and pid_NAME. Its log is $tmp/NAME.log.
start_server() {
  local name=$1
  shift
  local attempt grpc rest
  for ((attempt = 0; attempt < 5; attempt++)); do
    grpc=$((20000 + RANDOM % 40000))
    rest=$((grpc + 1))
    if port_in_use "$grpc" || port_in_use "$rest"; then continue; fi
    : >"$tmp/$name.log"  # exists before the server opens it, for the first grep below
    "$model_server" --port="$grpc" --rest_api_port="$rest" "$@" >"$tmp/$name.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    local i
    for ((i = 0; i < 600; i++)); do
      if grep -q "event=server_ready" "$tmp/$name.log"; then
        printf -v "port_${name}_grpc" %s "$grpc"
        printf -v "port_${name}_rest" %s "$rest"
        printf -v "pid_${name}" %s "$pid"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
  die "model-server ($name) would not start: $(tail -n 5 "$tmp/$name.log")"
}

# Starts a plain peer (the command that follows $1, a name) on an ephemeral port; sets
# peer_port to the port it reports and peer_pid. Its output is $tmp/NAME.out and .err.
start_peer() {
  local name=$1
  shift
  : >"$tmp/$name.out"  # exists before the peer opens it, for the first read below
  "$@" --port=0 >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$!
  pids+=("$pid")
  peer_pid=$pid
  local i
  for ((i = 0; i < 100; i++)); do
    if peer_port=$(awk '/^listening on / { print $3; found = 1 } END { exit !found }' "$tmp/$name.out"); then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  die "$name did not start: $(cat "$tmp/$name.err")"
}
