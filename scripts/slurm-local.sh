#!/usr/bin/env bash
# A private single-node Slurm cluster for tests: munged, slurmctld and slurmd
# from Debian's munge and slurm-wlm packages, run as root with their config,
# key, sockets, state and logs under DIR and their own ports, so they touch
# no system-wide Slurm or munge. Stopped by the PIDs they wrote.
#
#   scripts/slurm-local.sh start DIR   # prints SLURM_CONF=DIR/slurm.conf once the node is idle
#   scripts/slurm-local.sh stop DIR
#
# Needs root (slurmd runs jobs as the submitting user, munged as user munge).
set -euo pipefail
cmd=${1:?usage: slurm-local.sh start|stop DIR}
dir=${2:?usage: slurm-local.sh start|stop DIR}

stop() {
  for p in "$dir/slurmd.daemon.pid" "$dir/slurmctld.daemon.pid" "$dir/munge/munged.pid"; do
    if [ -s "$p" ]; then
      kill "$(cat "$p")" 2>/dev/null || true
    fi
  done
  # Wait for the daemons to go, so the directory can be removed.
  for _ in $(seq 50); do
    alive=0
    for p in "$dir/slurmd.daemon.pid" "$dir/slurmctld.daemon.pid" "$dir/munge/munged.pid"; do
      if [ -s "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: slurm-local.sh start|stop DIR" >&2; exit 2; }
for b in munged slurmctld slurmd sbatch sinfo; do
  command -v "$b" >/dev/null || { echo "slurm-local.sh: $b not found: apt-get install slurm-wlm munge" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "slurm-local.sh: needs root" >&2; exit 3; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
# munged refuses group- or world-writable paths and needs the socket's
# directory searchable by everyone.
chmod 755 "$dir" "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chown -R munge:munge "$dir/munge"
chmod 400 "$dir/munge/munge.key"
runuser -u munge -- munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --log-file="$dir/munge/munged.log" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed"

# Two free TCP ports for the controller and the node daemon.
read -r cport dport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
ClusterName=blistest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
# -D keeps them in the foreground of their own background jobs; setsid
# detaches them from this script's process group.
# In the foreground they write no PID file: keep their PIDs ourselves.
setsid slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 < /dev/null &
echo $! >"$dir/slurmctld.daemon.pid"
setsid slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 < /dev/null &
echo $! >"$dir/slurmd.daemon.pid"
for _ in $(seq 150); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-local.sh: the node did not become idle in 30 s; logs in $dir/log:" >&2
tail -n 20 "$dir"/log/* >&2 || true
stop
exit 1
