//! What the crate's unit tests share: the builders, and the clusters several modules test on.

pub use crate::builder::*;
use crate::cluster::Cluster;

/// Issue 12's first cluster (N3, N6): n1 32 GiB, n2 24 GiB, n3 16 GiB; 103 is pinned to n2.
pub fn floor1() -> Cluster {
    ClusterBuilder::new()
        .node(node("n1").memory(32 * GIB).cpus(4.0))
        .node(node("n2").memory(24 * GIB).cpus(4.0))
        .node(node("n3").memory(16 * GIB).cpus(4.0))
        .guest(
            vm(101, "n2")
                .mem(GIB / 2, GIB / 2)
                .tagged("flxp.anti-affinity.a"),
        )
        .guest(vm(102, "n1").mem(GIB / 2, GIB / 2))
        .guest(vm(103, "n2").mem(GIB / 2, GIB / 2).tagged("flxp.node.n2"))
        .guest(vm(104, "n1").mem(4 * GIB, 4 * GIB))
        .guest(vm(105, "n1").mem(4 * GIB, 4 * GIB))
        .guest(vm(106, "n2").mem(3 * GIB / 2, 3 * GIB / 2))
        .build()
}

/// Issue 12's second cluster (N3): three 16 GiB nodes, n1 in maintenance.
pub fn floor2() -> Cluster {
    ClusterBuilder::new()
        .node(
            node("n1")
                .memory(16 * GIB)
                .cpus(4.0)
                .notes("flxp.maintenance"),
        )
        .node(node("n2").memory(16 * GIB).cpus(4.0))
        .node(node("n3").memory(16 * GIB).cpus(4.0))
        .guest(vm(101, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(102, "n2").mem(6 * GIB, 6 * GIB))
        .guest(vm(103, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(104, "n1").mem(3 * GIB / 2, 3 * GIB / 2))
        .guest(vm(105, "n2").mem(4 * GIB, 4 * GIB))
        .guest(
            vm(106, "n1")
                .mem(GIB / 2, GIB / 2)
                .tagged("flxp.anti-affinity.a"),
        )
        .build()
}
