#!/usr/bin/env bash
# Two ssh hosts on this one machine for tst_launcher_ssh: network namespaces "hosta" and "hostb" joined by a
# veth pair, each with its own host name (UTS namespace) and its own sshd on port 22 that accepts only a
# throwaway key made here.
#
#   tests/launcher/ssh-hosts.sh up DIR     prints KEY=VALUE lines (NS_A, KEY); exit 3: cannot be done here
#   tests/launcher/ssh-hosts.sh down DIR   stops both sshd and removes the namespaces (safe to repeat)
#
# Needs root, iproute2, util-linux (unshare), openssh-server and openssh-client. Names carry this script's
# pid and the subnet 10.234.N.0/24 is picked from it, so parallel runs do not collide.
set -uo pipefail
cmd=${1:-} dir=${2:-}
[ -n "$dir" ] && [ -d "$dir" ] || { echo "usage: $0 up|down DIR (an existing folder)" >&2; exit 64; }
state=$dir/ssh-hosts.state

down() {
  [ -f "$state" ] || return 0
  # shellcheck disable=SC1090
  . "$state"
  for f in "$dir"/sshd-a.pid "$dir"/sshd-b.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  # anything still running inside the namespaces (sessions, orted, ranks)
  for ns in "$NS_A" "$NS_B"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -f "$state"
  return 0
}

case "$cmd" in
down) down; exit 0 ;;
up) ;;
*) echo "usage: $0 up|down DIR" >&2; exit 64 ;;
esac

skip() { echo "$*"; down; exit 3; }
[ "$(id -u)" -eq 0 ] || skip "needs root to make network namespaces"
[ -x /usr/sbin/sshd ] || skip "no /usr/sbin/sshd (apt-get install openssh-server)"
for t in ip unshare ssh ssh-keygen; do
  command -v $t >/dev/null || skip "$t is missing (install iproute2, util-linux, openssh-client)"
done
id=$$ net=$(( $$ % 200 + 20 ))
NS_A=lhosta$id NS_B=lhostb$id
printf 'NS_A=%s\nNS_B=%s\n' "$NS_A" "$NS_B" > "$state"
ip netns add "$NS_A" || skip "cannot make a network namespace here"
ip netns add "$NS_B" || skip "cannot make a network namespace here"
ip link add "lva$id" type veth peer name "lvb$id" || skip "cannot make a veth pair here"
ip link set "lva$id" netns "$NS_A" && ip link set "lvb$id" netns "$NS_B" || skip "cannot move the veth pair"
ip -n "$NS_A" addr add "10.234.$net.1/24" dev "lva$id"
ip -n "$NS_B" addr add "10.234.$net.2/24" dev "lvb$id"
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.234.%s.1 hosta\n10.234.%s.2 hostb\n' "$net" "$net" > "/etc/netns/$ns/hosts"
done
ip -n "$NS_A" link set "lva$id" up && ip -n "$NS_B" link set "lvb$id" up || skip "cannot bring the veth pair up"

ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key" <<< y >/dev/null || skip "ssh-keygen failed"
ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key" <<< y >/dev/null || skip "ssh-keygen failed"
cp "$dir/client_key.pub" "$dir/authorized_keys"
chmod 600 "$dir/host_key" "$dir/client_key" "$dir/authorized_keys"
mkdir -p /run/sshd
for h in a b; do
  cat > "$dir/sshd-$h.conf" <<CONF
Port 22
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd-$h.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv none
MaxStartups 100
CONF
done
ip netns exec "$NS_A" unshare --uts sh -c "hostname hosta; exec /usr/sbin/sshd -f '$dir/sshd-a.conf' -E '$dir/sshd-a.log'" \
  || skip "sshd did not start in $NS_A: $(tail -n 2 "$dir/sshd-a.log" 2>/dev/null)"
ip netns exec "$NS_B" unshare --uts sh -c "hostname hostb; exec /usr/sbin/sshd -f '$dir/sshd-b.conf' -E '$dir/sshd-b.log'" \
  || skip "sshd did not start in $NS_B: $(tail -n 2 "$dir/sshd-b.log" 2>/dev/null)"
for _ in $(seq 50); do
  [ -s "$dir/sshd-a.pid" ] && [ -s "$dir/sshd-b.pid" ] && break
  sleep 0.1
done
[ -s "$dir/sshd-a.pid" ] && [ -s "$dir/sshd-b.pid" ] || skip "sshd did not write its pid file"
ssh_opts=(-i "$dir/client_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes)
out=$(ip netns exec "$NS_A" ssh "${ssh_opts[@]}" hostb hostname 2>&1) || skip "ssh from hosta to hostb failed: $out"
[ "$out" = hostb ] || skip "hostb answered as \"$out\""
echo "NS_A=$NS_A"
echo "KEY=$dir/client_key"
echo "NET=10.234.$net"
