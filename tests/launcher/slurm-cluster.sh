#!/usr/bin/env bash
# A one-node Slurm cluster in a folder, for tst_launcher_slurm: munged with a throwaway key, slurmctld and
# slurmd (Debian's slurm-wlm) on private ports with a generated minimal slurm.conf. Clients find it through
# SLURM_CONF=DIR/slurm.conf.
#
# `up2` makes two nodes instead (tst_launcher_slurm2): network namespaces joined by a veth pair, each with its
# own slurmd and host name (loomnode1, loomnode2), slurmctld beside the first. Debian's slurmd is built
# without --enable-multiple-slurmd, so two slurmd on one network stack would share a port; each namespace
# has its own. They are entered with nsenter --net (not ip netns exec, which remounts /sys and hides the
# cgroup hierarchy slurmd needs); the filesystem is shared, as a cluster's would be. Clients must run in the
# first namespace: `nsenter --net=NETNS …`.
#
#   tests/launcher/slurm-cluster.sh up DIR [CPUS]   prints SLURM_CONF=…; exit 3: cannot be done here (why on stdout)
#   tests/launcher/slurm-cluster.sh up2 DIR [CPUS]  CPUS a node; prints SLURM_CONF=… and NETNS=…; exit 3 likewise
#   tests/launcher/slurm-cluster.sh down DIR        stops the daemons it started (safe to repeat); also done by
#                                                   itself once the process that ran `up` has ended
set -uo pipefail
cmd=${1:-} dir=${2:-} cpus=${3:-4}
[ -n "$dir" ] && [ -d "$dir" ] || { echo "usage: $0 up|down DIR [CPUS] (an existing folder)" >&2; exit 64; }

# Whether process $1 still exists (a zombie, which only waits for its parent to reap it, does not count).
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# The processes of this cluster's jobs: each slurmstepd its slurmd started (they have its SLURM_CONF; they
# outlive slurmd, ranks and all) and everything below them.
job_pids() {
  local steps="" p
  for p in $(pgrep -x slurmstepd 2>/dev/null); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf" && steps="$steps $p"
  done
  [ -n "$steps" ] || return 0
  ps -eo pid=,ppid= | awk -v roots="$steps" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END { for (grew = 1; grew;) { grew = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 } }
          for (p in keep) print p }'
}

# Waits until none of the pids in $1 is alive, at most $2 tenths of a second; whether none is.
gone_within() {
  local p left
  for _ in $(seq "$2"); do
    left=0
    for p in $1; do alive "$p" && left=1; done
    [ $left -eq 0 ] && return 0
    sleep 0.1
  done
  return 1
}

down() {
  # The daemons' pids are read once, before they are told to stop: slurmctld removes its pid file as it
  # begins to shut down, so waiting on the files would stop waiting for a daemon that still runs.
  local daemons="" jobs f p
  for f in "$dir"/*.pid; do
    [ -s "$f" ] && daemons="$daemons $(cat "$f")"
  done
  jobs=$(job_pids)
  for p in $jobs; do kill -9 "$p" 2>/dev/null; done # what a failed test left running (its ranks train on)
  for p in $daemons; do kill "$p" 2>/dev/null; done
  gone_within "$daemons" 100 || for p in $daemons; do kill -9 "$p" 2>/dev/null; done
  gone_within "$daemons $jobs" 50
  rm -f "$dir"/*.pid
  if [ -f "$dir/netns.state" ]; then # up2: what is left in the namespaces (job steps, ranks), then them
    for ns in $(cat "$dir/netns.state"); do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null
      ip netns del "$ns" 2>/dev/null
    done
    rm -f "$dir/netns.state"
  fi
  return 0
}

case "$cmd" in
down) down; exit 0 ;;
up|up2) ;;
*) echo "usage: $0 up|up2|down DIR [CPUS]" >&2; exit 64 ;;
esac

skip() { echo "$*"; down; exit 3; }
[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
tools="munged slurmctld slurmd sbatch scontrol"
[ "$cmd" = up2 ] && tools="$tools ip nsenter unshare"
for t in $tools; do
  command -v $t >/dev/null || [ -x /usr/sbin/$t ] || skip "$t is missing (apt-get install slurm-wlm)"
done
PATH=$PATH:/usr/sbin
chmod 700 "$dir"
mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 700 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" 2>"$dir/munged.err" \
  || skip "munged did not start: $(tail -n 1 "$dir/munged.err")"
port=$(( 20000 + $$ % 20000 ))
host=$(hostname)
# The node's own TmpFS: PMIx (srun --mpi=pmix) makes its client folder there, named by job and step only, so
# clusters of tests running side by side (job 1, step 0 each) would collide in /tmp.
mkdir -p "$dir/tmp"
tmpfs="TmpFS=$dir/tmp" ctl="$host(127.0.0.1)" spool=$dir/spool pidfile=$dir/slurmd.pid logfile=$dir/slurmd.log
nodes="NodeName=loomnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
if [ "$cmd" = up2 ]; then
  id=$$ net=$(( $$ % 200 + 20 ))
  nsa=lslurma$id nsb=lslurmb$id
  printf '%s\n%s\n' "$nsa" "$nsb" > "$dir/netns.state"
  ip netns add "$nsa" && ip netns add "$nsb" || skip "cannot make a network namespace here"
  ip link add "lsa$id" type veth peer name "lsb$id" || skip "cannot make a veth pair here"
  ip link set "lsa$id" netns "$nsa" && ip link set "lsb$id" netns "$nsb" || skip "cannot move the veth pair"
  ip -n "$nsa" addr add "10.235.$net.1/24" dev "lsa$id" && ip -n "$nsb" addr add "10.235.$net.2/24" dev "lsb$id"
  for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
  ip -n "$nsa" link set "lsa$id" up && ip -n "$nsb" link set "lsb$id" up || skip "cannot bring the veth pair up"
  mkdir -p "$dir/spool-loomnode1" "$dir/spool-loomnode2"
  # %n: each slurmd's own spool folder, pid and log file (Slurm puts in the node's name)
  ctl="loomnode1(10.235.$net.1)" spool=$dir/spool-%n pidfile=$dir/slurmd-%n.pid logfile=$dir/slurmd-%n.log
  # Each node's own TmpFS (its slurmd reads a copy of slurm.conf that differs in it): the two on one
  # filesystem would collide in one folder.
  mkdir -p "$dir/tmp-loomnode1" "$dir/tmp-loomnode2"
  tmpfs="TmpFS=$dir/tmp-loomnode1"
  nodes="NodeName=loomnode1 NodeHostname=loomnode1 NodeAddr=10.235.$net.1 CPUs=$cpus State=UNKNOWN
NodeName=loomnode2 NodeHostname=loomnode2 NodeAddr=10.235.$net.2 CPUs=$cpus State=UNKNOWN"
fi
cat > "$dir/slurm.conf" <<CONF
ClusterName=loomtest
SlurmctldHost=$ctl
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$pidfile
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$logfile
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
$tmpfs
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
KillWait=5
$nodes
PartitionName=loomtest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
if [ "$cmd" = up2 ]; then
  in_a=(nsenter "--net=/run/netns/$nsa")
  "${in_a[@]}" unshare --uts sh -c "hostname loomnode1 && slurmctld -f '$SLURM_CONF' -i" 2>"$dir/slurmctld.err" \
    || skip "slurmctld did not start: $(tail -n 1 "$dir/slurmctld.err")"
  sed "s|^TmpFS=.*|TmpFS=$dir/tmp-loomnode2|" "$SLURM_CONF" > "$dir/slurm-loomnode2.conf"
  for n in 1 2; do
    ns=$nsa conf=$SLURM_CONF
    [ $n -eq 2 ] && ns=$nsb conf=$dir/slurm-loomnode2.conf
    nsenter "--net=/run/netns/$ns" unshare --uts sh -c "hostname loomnode$n && exec slurmd -f '$conf' -N loomnode$n" \
      2>"$dir/slurmd$n.err" || skip "slurmd of loomnode$n did not start: $(tail -n 1 "$dir/slurmd$n.err")"
  done
  node_names="loomnode1 loomnode2"
else
  in_a=()
  slurmctld -f "$SLURM_CONF" -i 2>"$dir/slurmctld.err" || skip "slurmctld did not start: $(tail -n 1 "$dir/slurmctld.err")"
  slurmd -f "$SLURM_CONF" -N loomnode 2>"$dir/slurmd.err" || skip "slurmd did not start: $(tail -n 1 "$dir/slurmd.err")"
  node_names=loomnode
fi
for node in $node_names; do
  for _ in $(seq 100); do
    state=$("${in_a[@]}" scontrol show node "$node" -o 2>/dev/null | sed -n 's/.*State=\([A-Z+_]*\).*/\1/p')
    case "$state" in IDLE*|MIXED*|ALLOCATED*) break ;; esac
    sleep 0.1
  done
  case "$state" in
  IDLE*|MIXED*|ALLOCATED*) ;;
  *) skip "the Slurm node $node did not come up (state ${state:-unknown}): $(tail -q -n 2 "$dir"/slurmd*.log "$dir/slurmctld.log" 2>/dev/null | tr '\n' ' ')" ;;
  esac
done
# A test killed by its timeout never calls `down`: a detached watcher stops the daemons once the process
# that asked for them (this script's parent, the test) has gone, so nothing is left running after it.
owner=$PPID
setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" down "$3"' watch "$owner" "$0" "$dir" \
  </dev/null >/dev/null 2>&1 &
echo "SLURM_CONF=$SLURM_CONF"
[ "$cmd" = up2 ] && echo "NETNS=/run/netns/$nsa"
exit 0
