# Sourced by the two-host benchmarks (two-host-bench.sh, staleness-bench.sh): two network namespaces on this
# one machine, PREFIX"A" and PREFIX"B", joined by a veth pair with the addresses NET.1 and NET.2 (host names
# hostA and hostB), the link shaped to RATE (netem with 0.1 ms each way where the kernel has it, else tbf), and
# an Open MPI launch agent that enters hostB's namespace instead of using ssh.
#
#   two_hosts_up PREFIX NET RATE WORKDIR SLOTS   sets $two_hosts_shaping, writes WORKDIR/agent, WORKDIR/hostfile
#   two_hosts_mpirun PREFIX NET WORKDIR ARGS...  mpirun (ARGS after mpirun's own) started on hostA
#   two_hosts_down PREFIX                        removes both namespaces (safe to call twice)

two_hosts_down() {
  local p=$1
  ip netns del "${p}A" 2>/dev/null || true
  ip netns del "${p}B" 2>/dev/null || true
  rm -rf "/etc/netns/${p}A" "/etc/netns/${p}B"
}

two_hosts_up() {
  local p=$1 net=$2 rate=$3 work=$4 slots=$5 ns
  two_hosts_down "$p"
  ip netns add "${p}A"
  ip netns add "${p}B"
  ip link add "${p}A0" type veth peer name "${p}B0"
  ip link set "${p}A0" netns "${p}A"
  ip link set "${p}B0" netns "${p}B"
  ip -n "${p}A" addr add "$net.1/24" dev "${p}A0"
  ip -n "${p}B" addr add "$net.2/24" dev "${p}B0"
  for ns in "${p}A" "${p}B"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "${ns}0" up
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s.1 hostA\n%s.2 hostB\n' "$net" "$net" > "/etc/netns/$ns/hosts"
  done
  two_hosts_shaping="rate $rate"
  for ns in "${p}A" "${p}B"; do
    if ip netns exec "$ns" tc qdisc add dev "${ns}0" root netem delay 100us rate "$rate" limit 100000 2>/dev/null; then
      two_hosts_shaping="rate $rate, 0.1 ms each way (netem)"
    else
      ip netns exec "$ns" tc qdisc add dev "${ns}0" root tbf rate "$rate" burst 256kb latency 50ms
      two_hosts_shaping="rate $rate (tbf; this kernel has no sch_netem, so no added delay)"
    fi
  done
  # Open MPI starts its daemon on hostB through this agent instead of ssh: it enters hostB's namespace and
  # gives it its own host name, so Open MPI sees two hosts (shared memory inside each, TCP between them).
  cat > "$work/agent" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  hostA) ns=${p}A ;;
  hostB) ns=${p}B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$host; \$*"
AGENT
  chmod +x "$work/agent"
  printf 'hostA slots=%s\nhostB slots=%s\n' "$slots" "$slots" > "$work/hostfile"
}

# Ranks fill hostA's slots first (--map-by slot): ranks 0..k-1 on hostA, k..2k-1 on hostB.
two_hosts_mpirun() {
  local p=$1 net=$2 work=$3
  shift 3
  ip netns exec "${p}A" unshare --uts sh -c "hostname hostA; exec \"\$@\"" sh \
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOOM_COMM_TIMEOUT_S=600 \
    mpirun --hostfile "$work/hostfile" --map-by slot --bind-to none \
      --mca plm_rsh_agent "$work/agent" --mca btl tcp,vader,self \
      --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" "$@"
}
