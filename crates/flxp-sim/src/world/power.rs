//! Node power: shutdown and reboot (`POST /nodes/{node}/status`) and Wake-on-LAN
//! (`POST /nodes/{node}/wakeonlan`), with a shutdown and a boot time.
//!
//! Proxmox does not refuse to shut down a node that still runs guests (`node_cmd` in
//! pve-manager's `PVE/API2/Nodes.pm` runs `poweroff` two seconds later); on the way down the
//! `pve-guests` service stops every guest (`stopall`), and HA's default `conditional` shutdown
//! policy has the other nodes recover the HA-managed ones. The simulator does the same: after the
//! shutdown time every guest on the node is stopped and the node goes offline, and HA recovers
//! its started services through the usual fence path. Wake-on-LAN answers the node's MAC address
//! (Proxmox's return value) and the node is online again after the boot time; waking a node that
//! is up or already booting changes nothing, as a magic packet would. A node named in the
//! `fail_boots` fault never comes back: it stays offline after its boot time.

use super::{Action, World};
use crate::ApiError;

impl World {
    /// `POST /nodes/{node}/status` with `command` `shutdown` or `reboot`.
    pub fn node_power(&mut self, node: &str, command: &str) -> Result<(), ApiError> {
        let reboot = match command {
            "shutdown" => false,
            "reboot" => true,
            other => {
                return Err(ApiError::param(
                    "command",
                    format!(
                        "value '{other}' does not have a value in the enumeration 'reboot, shutdown'"
                    ),
                ));
            }
        };
        let at = self.now + self.settings.node_shutdown_secs;
        let n = self
            .nodes
            .get_mut(node)
            .ok_or_else(|| ApiError::die(format!("no such cluster node '{node}'")))?;
        if n.shutting_down {
            return Ok(());
        }
        n.shutting_down = true;
        tracing::info!(node, reboot, "node shutting down");
        self.schedule(
            at,
            Action::NodePowerOff {
                node: node.to_string(),
                reboot,
            },
        );
        Ok(())
    }

    /// `POST /nodes/{node}/wakeonlan`: the MAC address the packet was built from.
    pub fn wake_on_lan(&mut self, node: &str) -> Result<String, ApiError> {
        let at = self.now + self.settings.node_boot_secs;
        let n = self
            .nodes
            .get_mut(node)
            .ok_or_else(|| ApiError::die(format!("no such cluster node '{node}'")))?;
        let mac = n.mac();
        if !n.online && !n.booting {
            n.booting = true;
            tracing::info!(node, "node woken, booting");
            self.schedule(
                at,
                Action::NodeBooted {
                    node: node.to_string(),
                },
            );
        }
        Ok(mac)
    }

    /// The shutdown time is over: every guest on the node is stopped and it goes offline (and,
    /// for a reboot, starts booting).
    pub(crate) fn on_node_power_off(&mut self, node: &str, reboot: bool) {
        let at = self.now + self.settings.node_boot_secs;
        let vmids: Vec<u32> = self
            .guests
            .values()
            .filter(|g| g.node == node && g.running)
            .map(|g| g.vmid)
            .collect();
        for vmid in vmids {
            if let Some(g) = self.guests.get_mut(&vmid) {
                g.running = false;
                g.config.values.remove("lock");
            }
            self.release_reservation(vmid);
        }
        self.set_online(node, false);
        if let Some(n) = self.nodes.get_mut(node) {
            n.shutting_down = false;
            if reboot {
                n.booting = true;
            }
        }
        if reboot {
            self.schedule(
                at,
                Action::NodeBooted {
                    node: node.to_string(),
                },
            );
        }
    }

    /// The boot time is over: the node is online again, with a new boot time, unless it is set
    /// to fail its boot (`fail_boots`): then it stays offline, as a node stuck in its firmware or
    /// without its network would.
    pub(crate) fn on_node_booted(&mut self, node: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.booting = false;
        }
        if self.faults.boot_fails(node) {
            tracing::warn!(
                node,
                "node failed to boot (injected fault): it stays offline"
            );
            return;
        }
        self.set_online(node, true);
    }
}
