//! The bytes guests' volumes take per storage, summed for every storage and node in one pass:
//! `GET /nodes/{node}/storage` reads it instead of walking every guest per call (a shared
//! storage holds the volumes of the whole cluster).

use std::collections::HashMap;

use super::World;

/// Bytes of the guests' own volumes per storage, as each node sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageUse {
    /// Storage id → node → bytes; node `""` for a shared storage (every node sees its volumes).
    bytes: HashMap<String, HashMap<String, u64>>,
}

impl StorageUse {
    /// Sums the volumes of every guest of `world`, as [`World::storage_usage`] does per storage.
    pub fn of(world: &World) -> Self {
        let mut bytes: HashMap<String, HashMap<String, u64>> = HashMap::new();
        for g in world.guests.values() {
            for (storage, size) in g.bytes_by_storage() {
                let Some(st) = world.storages.get(storage) else {
                    continue;
                };
                let node = if st.shared { "" } else { g.node.as_str() };
                let per_node = match bytes.get_mut(storage) {
                    Some(m) => m,
                    None => bytes.entry(storage.to_owned()).or_default(),
                };
                let used = match per_node.get_mut(node) {
                    Some(u) => u,
                    None => per_node.entry(node.to_owned()).or_insert(0),
                };
                *used = used.saturating_add(size);
            }
        }
        Self { bytes }
    }

    /// Size and use of `storage` as `node` sees it, bytes: the same as
    /// [`World::storage_usage`] of the world this was summed from.
    pub fn usage(&self, world: &World, storage: &str, node: &str) -> (u64, u64) {
        let Some(st) = world.storages.get(storage) else {
            return (0, 0);
        };
        let used = self
            .bytes
            .get(storage)
            .and_then(|m| m.get(if st.shared { "" } else { node }))
            .copied()
            .unwrap_or(0);
        let (total, base) = st.size_on(node);
        (total, base.saturating_add(used).min(total))
    }
}
