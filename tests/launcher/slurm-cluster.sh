#!/usr/bin/env bash
# A one-node Slurm cluster in a folder, for tst_launcher_slurm: munged with a throwaway key, slurmctld and
# slurmd (Debian's slurm-wlm) on private ports with a generated minimal slurm.conf. Clients find it through
# SLURM_CONF=DIR/slurm.conf.
#
#   tests/launcher/slurm-cluster.sh up DIR [CPUS]   prints SLURM_CONF=…; exit 3: cannot be done here (why on stdout)
#   tests/launcher/slurm-cluster.sh down DIR        stops the daemons it started (safe to repeat)
set -uo pipefail
cmd=${1:-} dir=${2:-} cpus=${3:-4}
[ -n "$dir" ] && [ -d "$dir" ] || { echo "usage: $0 up|down DIR [CPUS] (an existing folder)" >&2; exit 64; }

down() {
  for f in slurmd.pid slurmctld.pid munged.pid; do
    [ -s "$dir/$f" ] && kill "$(cat "$dir/$f")" 2>/dev/null
  done
  for _ in $(seq 50); do
    alive=0
    for f in slurmd.pid slurmctld.pid munged.pid; do
      [ -s "$dir/$f" ] && kill -0 "$(cat "$dir/$f")" 2>/dev/null && alive=1
    done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for f in slurmd.pid slurmctld.pid munged.pid; do
    [ -s "$dir/$f" ] && kill -9 "$(cat "$dir/$f")" 2>/dev/null
    rm -f "$dir/$f"
  done
  return 0
}

case "$cmd" in
down) down; exit 0 ;;
up) ;;
*) echo "usage: $0 up|down DIR [CPUS]" >&2; exit 64 ;;
esac

skip() { echo "$*"; down; exit 3; }
[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
for t in munged slurmctld slurmd sbatch scontrol; do
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
cat > "$dir/slurm.conf" <<CONF
ClusterName=loomtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
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
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
KillWait=5
NodeName=loomnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=loomtest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" -i 2>"$dir/slurmctld.err" || skip "slurmctld did not start: $(tail -n 1 "$dir/slurmctld.err")"
slurmd -f "$SLURM_CONF" -N loomnode 2>"$dir/slurmd.err" || skip "slurmd did not start: $(tail -n 1 "$dir/slurmd.err")"
for _ in $(seq 100); do
  state=$(scontrol show node loomnode -o 2>/dev/null | sed -n 's/.*State=\([A-Z+_]*\).*/\1/p')
  case "$state" in IDLE*|MIXED*|ALLOCATED*) break ;; esac
  sleep 0.1
done
case "$state" in
IDLE*|MIXED*|ALLOCATED*) ;;
*) skip "the Slurm node did not come up (state ${state:-unknown}): $(tail -n 2 "$dir/slurmd.log" "$dir/slurmctld.log" 2>/dev/null | tr '\n' ' ')" ;;
esac
echo "SLURM_CONF=$SLURM_CONF"
