#!/bin/sh
# First boot of the arm64 node (setup/arm64-node.sh runs it as root inside the emulated machine,
# chrooted into the node's disk): debootstrap's second stage (the packages' maintainer scripts,
# which need an arm64 CPU), then what the host uses to reach the registries (staged by
# setup/arm64-node.sh under /var/lib/harness-node/host: apt sources and settings, pip settings,
# local CA certificates), the user-mode network's resolver, and the ordinary user USER with
# password-less sudo (the harness's installer runs apt through sudo).
#   arm64-node-firstboot.sh USER
set -eu
user=$1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive
if [ -x /debootstrap/debootstrap ]; then
    echo "second stage: $(date -u +%FT%TZ)"
    /debootstrap/debootstrap --second-stage
fi
staged=/var/lib/harness-node/host
if [ -d "$staged" ]; then
    # The host's sources replace debootstrap's one line (as ci/fresh-machine does).
    rm -f /etc/apt/sources.list
    cp -a "$staged/." /
    rm -rf "$staged"
fi
echo "nameserver 10.0.2.3" >/etc/resolv.conf
echo harness-node >/etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\tharness-node\n' >/etc/hosts
update-ca-certificates >/dev/null
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
echo "$user ALL=(ALL) NOPASSWD:ALL" >"/etc/sudoers.d/$user"
chmod 440 "/etc/sudoers.d/$user"
# A fresh machine's apt has no package lists: the harness's installer runs apt-get update.
apt-get clean
find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock -delete
echo "first boot done: $(date -u +%FT%TZ)"
