#!/usr/bin/env bash
# Keeps a podman network's bridge at the MAC address it has now.
#   scripts/pin-bridge-mac.sh NETWORK
# A Linux bridge whose address was never set takes the lowest MAC of its
# ports, so it changes when the container with that port leaves (or one with a
# lower one joins). Every other container on the network still sends to the old
# MAC until its ARP entry expires: all its traffic to the gateway is lost for up
# to a minute, DNS included (aardvark-dns answers there), while traffic between
# containers goes on. Measured here (Debian 12's netavark 1.4): a killed worker
# container took the bridge's MAC with it and its peers' name lookups went
# unanswered for 50 s; with the MAC set, they were answered at once. netavark
# sets a fixed MAC on its bridges itself from 1.9 (containers/netavark#833).
# Run it once the network's first container runs (netavark makes the bridge
# then, and deletes it with the last one). Does nothing under docker, which
# sets its bridges' MACs, or for a network whose bridge does not exist yet.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/container-env.sh
network="${1:?usage: scripts/pin-bridge-mac.sh NETWORK}"
[[ $ENGINE == podman ]] || exit 0
bridge="$(podman network inspect "$network" --format '{{.NetworkInterface}}')"
[[ -e "/sys/class/net/$bridge/address" ]] || exit 0
# Setting the address, even to the one it has, is what stops the kernel from changing it.
ip link set dev "$bridge" address "$(cat "/sys/class/net/$bridge/address")"
