//! Serde wire types of the Proxmox VE API endpoints flxp uses, shared by client and simulator.
