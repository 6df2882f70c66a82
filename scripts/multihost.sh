#!/usr/bin/env bash
# Two "hosts" on this machine for multi-host tests and demos: two network namespaces, each with
# its own address, joined by veth pairs to a bridge (root only; nothing leaves the test subnet).
#
#   scripts/multihost.sh up                 create the hosts (idempotent: recreates them)
#   scripts/multihost.sh down               kill what runs in them and remove them
#   scripts/multihost.sh run [-n N] -- CMD  run `mlaserve` CMD over both hosts: mpirun inside
#                                           host A, N ranks per host (2 by default), rank 0 on A
#   scripts/multihost.sh exec A|B -- CMD    run CMD inside host A or B (e.g. a client of rank 0)
#   scripts/multihost.sh delay A|B MS       add MS ms each way to a host's link (0 removes it)
#   scripts/multihost.sh cut A|B            take a host's link down (what a pulled cable does)
#   scripts/multihost.sh check              exit 0 when the hosts can be made here, else 77 and why
#
# MLASERVE_NETNS_PREFIX (default "mls") names everything, so concurrent test runs do not collide:
# namespaces PREFIX-a / PREFIX-b, bridge PREFIXbr, host links PREFIXa / PREFIXb. The subnet
# (10.213.14.0/24 by default, MLASERVE_NETNS_SUBNET to change the first three octets) exists only
# inside the namespaces, so two prefixes may use the same one.
set -euo pipefail

PREFIX=${MLASERVE_NETNS_PREFIX:-mls}
SUBNET=${MLASERVE_NETNS_SUBNET:-10.213.14}
NS_A=$PREFIX-a
NS_B=$PREFIX-b
BRIDGE=${PREFIX}br
ADDR_A=$SUBNET.1
ADDR_B=$SUBNET.2
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=/tmp/mlaserve-multihost-$PREFIX  # hostfile and the mpirun agent
BIN=${MLASERVE_BIN:-$HERE/../build/src/tools/mlaserve}

die() {
  echo "multihost: $*" >&2
  exit 1
}

ns_of() {
  case "$1" in
    A | a) echo "$NS_A" ;;
    B | b) echo "$NS_B" ;;
    *) die "unknown host '$1' (A or B)" ;;
  esac
}

# The root-namespace end of a host's veth pair.
link_of() {
  case "$1" in
    A | a) echo "${PREFIX}a" ;;
    B | b) echo "${PREFIX}b" ;;
    *) die "unknown host '$1' (A or B)" ;;
  esac
}

# Exit status 77 (the usual "skipped") when this machine cannot have the hosts.
unavailable() {
  echo "multihost: $*" >&2
  exit 77
}

check() {
  [ "$(id -u)" = 0 ] || unavailable "needs root to create network namespaces (uid $(id -u))"
  for tool in ip unshare mpirun; do
    command -v $tool >/dev/null || unavailable "needs $tool (iproute2, util-linux, openmpi-bin)"
  done
  local probe="${PREFIX}-probe"
  ip netns add "$probe" 2>/dev/null || unavailable "cannot create a network namespace (ip netns add)"
  ip netns del "$probe"
  ip link add "${PREFIX}pr" type bridge 2>/dev/null || unavailable "cannot create a bridge (ip link add)"
  ip link del "${PREFIX}pr"
  unshare --uts true 2>/dev/null || unavailable "cannot create a UTS namespace (unshare --uts)"
}

down() {
  for pidfile in "$STATE"/relay-*.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  for link in "${PREFIX}a" "${PREFIX}b"; do ip link del "${link}d" 2>/dev/null || true; done
  for ns in "$NS_A" "$NS_B"; do
    if ip netns list | grep -qw "$ns"; then
      # Processes in a namespace keep it alive: end them first (they are ours: only this harness
      # starts anything there).
      local pids
      pids=$(ip netns pids "$ns" || true)
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
      ip netns del "$ns"
    fi
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  ip link del "${PREFIX}a" 2>/dev/null || true
  ip link del "${PREFIX}b" 2>/dev/null || true
  rm -rf "$STATE"
}

# One host: namespace NS with address ADDR on eth0, its peer LINK in the bridge.
add_host() {
  local ns=$1 link=$2 addr=$3
  ip netns add "$ns"
  ip link add "$link" type veth peer name eth0 netns "$ns"
  ip link set "$link" master "$BRIDGE" up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
}

write_agent() {
  mkdir -p "$STATE"
  printf '%s slots=64\n%s slots=64\n' "$ADDR_A" "$ADDR_B" >"$STATE/hostfile"
  # mpirun starts its remote daemon with "AGENT HOST orted ARGS...", as it would run ssh; this
  # agent runs it inside the namespace that owns HOST's address instead, under a host name of
  # its own (a UTS namespace): Open MPI tells hosts apart by name, and two hosts called alike
  # get inconsistent views of which ranks share a node.
  cat >"$STATE/agent" <<EOF
#!/bin/sh
case "\$1" in
  $ADDR_A) ns=$NS_A ;;
  $ADDR_B) ns=$NS_B ;;
  *) echo "multihost agent: unknown host \$1" >&2; exit 1 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns && exec \$*"
EOF
  chmod +x "$STATE/agent"
}

up() {
  check
  down
  ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" up
  add_host "$NS_A" "${PREFIX}a" "$ADDR_A"
  add_host "$NS_B" "${PREFIX}b" "$ADDR_B"
  write_agent
  echo "multihost: hosts A=$ADDR_A ($NS_A) and B=$ADDR_B ($NS_B) are up"
}

run() {
  local per_host=2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in
      -n) per_host=$2; shift 2 ;;
      *) die "run: unknown option $1 (usage: run [-n RANKS_PER_HOST] -- MLASERVE_ARGS...)" ;;
    esac
  done
  [ "${1:-}" = -- ] && shift
  [ -f "$STATE/agent" ] || die "the hosts are not up (scripts/multihost.sh up)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # --map-by ppr:N:node: N ranks per host in rank order, so ranks 0..N-1 (rank 0 serves HTTP)
  #   run on host A, the first line of the hostfile.
  # plm_rsh_agent: how mpirun starts its daemon on the other host (our namespace agent, not ssh).
  # btl tcp,self: ranks talk over TCP (self: a rank to itself); no shared memory, so two ranks of
  #   one host use the network stack as two machines' ranks would.
  # btl_tcp_if_include / oob_tcp_if_include: only the test subnet carries MPI traffic and the
  #   runtime's own messages; without them Open MPI also tries every other interface it sees.
  # rtc_hwloc_vmhole none: Debian's Open MPI 4.1.4 orted can segfault in
  #   hwloc_shmem_topology_write when it places the shared topology in the "biggest" hole of its
  #   address space; with none it does not map the topology into shared memory at all.
  # oob_tcp_keepalive_*: mpirun and each host's daemon probe their idle connection after 5 s, every
  #   2 s, and give up after 3 unanswered probes: a host whose link is cut is declared lost
  #   within ~11 s and mpirun ends the job (by default the first probe waits 300 s, and an abort
  #   that must reach the lost host never lets mpirun end).
  # mpi_yield_when_idle 1: a rank waiting in MPI yields its core; here all ranks share one
  #   machine's cores, and busy-polling ranks would starve the ones computing.
  exec ip netns exec "$NS_A" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$NS_A" mpirun -np $((2 * per_host)) --hostfile "$STATE/hostfile" \
    --map-by "ppr:$per_host:node" --bind-to none \
    --mca plm_rsh_agent "$STATE/agent" \
    --mca btl tcp,self \
    --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
    --mca rtc_hwloc_vmhole none \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 \
    --mca oob_tcp_keepalive_probes 3 \
    --mca mpi_yield_when_idle 1 \
    "$BIN" "$@"
}

# MS ms each way on host H's link: tc's netem where the kernel has it, else mlaserve_link_delay
# relaying frames between the host's link and a second veth pair that takes its place in the
# bridge (bridge - PREFIXHd ~ PREFIXHx <relay> PREFIXH - the host's eth0).
delay() {
  local host=${1:?delay A|B MS} ms=${2:?delay A|B MS}
  local link ns
  link=$(link_of "$host")
  ns=$(ns_of "$host")
  undelay "$link" "$ns"
  [ "$ms" = 0 ] && return
  if tc qdisc replace dev "$link" root netem delay "${ms}ms" 2>/dev/null; then
    ip netns exec "$ns" tc qdisc replace dev eth0 root netem delay "${ms}ms"
    return
  fi
  local relay=${MLASERVE_LINK_DELAY:-$HERE/../build/tests/support/mlaserve_link_delay}
  [ -x "$relay" ] || die "no netem in this kernel and no $relay to delay frames instead"
  ip link add "${link}d" type veth peer name "${link}x"
  ip link set "$link" nomaster
  ip link set "${link}d" master "$BRIDGE" up
  ip link set "${link}x" up
  ip link set "$link" promisc on
  ip link set "${link}x" promisc on
  # The relay forwards frames as they are: the hosts must send wire-sized ones, not 64 KB
  # segmentation-offload batches that no link would carry.
  set_gso_max_size 1500
  setsid "$relay" "$link" "${link}x" "$ms" </dev/null >"$STATE/relay-$link.log" 2>&1 &
  echo $! >"$STATE/relay-$link.pid"
}

# Removes a delay: netem's qdiscs, or the relay and its veth pair (the link rejoins the bridge).
undelay() {
  local link=$1 ns=$2
  tc qdisc del dev "$link" root 2>/dev/null || true
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  if [ -f "$STATE/relay-$link.pid" ]; then
    kill "$(cat "$STATE/relay-$link.pid")" 2>/dev/null || true
    rm -f "$STATE/relay-$link.pid"
    ip link del "${link}d" 2>/dev/null || true
    ip link set "$link" promisc off master "$BRIDGE"
    set_gso_max_size 65536
  fi
}

set_gso_max_size() {
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set dev eth0 gso_max_size "$1"; done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  up) up ;;
  down) down ;;
  check) check ;;
  run) run "$@" ;;
  exec)
    ns=$(ns_of "${1:-}")
    shift
    [ "${1:-}" = -- ] && shift
    exec ip netns exec "$ns" "$@"
    ;;
  delay) delay "$@" ;;
  cut) ip link set "$(link_of "${1:-}")" down ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
