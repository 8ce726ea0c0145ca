#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the Slurm tests (tests/test_slurm_launcher.py, tests/test_srun_fit.py)
# and for trying the Slurm launcher (docs/compare.md, "On a Slurm cluster"): Debian's slurm-wlm and munge,
# slurmctld and slurmd on localhost, two CPUs, one partition `debug`. Run as root. Idempotent: a cluster already up
# with this configuration is left as it is, and the packages are installed only when missing. Exits 0 once `sinfo`
# shows the node idle; otherwise prints why on one line (`start_slurm: ...`) and exits non-zero (the Slurm tests
# then skip, saying why).
set -uo pipefail

CONF=/etc/slurm/slurm.conf
CPUS=2
PARTITION=debug

fail() { echo "start_slurm: $*" >&2; exit 1; }

node_idle() { sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | grep -qx 'idle'; }

# One node `localhost` with two CPUs (one job per CPU: CR_CPU) and the machine's memory (so --mem requests fit);
# no cgroups (a container has none to give); requeued jobs keep their ids (JobRequeue) and may start again after
# 10 s (cred_expire; Slurm's default is 120 s; a local job starts well within it), picked up by a backfill pass
# every 2 s (bf_interval; default 30 s). At 30 s and 30 s the Slurm requeue test waited 39 s of its 92 for them.
render_conf() {
  local memory
  memory=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  cat <<EOF
# Written by lit_rnncells scripts/start_slurm.sh: a one-node cluster on localhost for tests.
ClusterName=local
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=600
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=${memory:-1000} State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

up() { echo "start_slurm: the local cluster is up (partition $PARTITION, node idle)"; exit 0; }

if command -v slurmd >/dev/null 2>&1 && node_idle && [ "$(cat "$CONF" 2>/dev/null)" = "$(render_conf)" ]; then
  up
fi
[ "$(id -u)" = 0 ] || fail "needs root (it installs packages and starts the Slurm daemons); run it with sudo"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || fail "no apt-get here to install slurm-wlm and munge (a Debian/Ubuntu machine is needed)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed (no network to the Debian mirrors?)"
  apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 || fail "apt-get install slurm-wlm munge failed"
fi

# munge: the key the package made (made here when missing), the daemon as the munge user.
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key && chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged || fail "munged did not start (see /var/log/munge/munged.log)"
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || fail "munge does not answer (see /var/log/munge/munged.log)"
fi

mkdir -p "$(dirname "$CONF")" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
NEW=$(render_conf)
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW" ]; then
  if [ -f "$CONF" ] && ! head -1 "$CONF" | grep -q 'scripts/start_slurm.sh'; then
    fail "$CONF exists and was not written by this script; it is left alone (this machine has its own Slurm)"
  fi
  printf '%s\n' "$NEW" > "$CONF"
  for daemon in slurmd slurmctld; do  # started by an earlier run of this script with the old config: restart
    pid=$(cat "/run/slurm/$daemon.pid" 2>/dev/null)
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  done
fi

pgrep -x slurmctld >/dev/null || slurmctld || fail "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
pgrep -x slurmd >/dev/null || slurmd -N localhost || fail "slurmd did not start (see /var/log/slurm/slurmd.log)"

state=""
for _ in $(seq 60); do
  node_idle && up
  state=$(sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null)
  case "$state" in  # a node left down or drained by an earlier start: return it to service
    down*|drain*|drng*) scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 ;;
  esac
  sleep 0.5
done
fail "the node did not become idle within 30 s (sinfo: ${state:-no answer}); see /var/log/slurm/slurmd.log"
