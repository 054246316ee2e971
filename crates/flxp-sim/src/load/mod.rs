//! Load that moves over time: usage models per guest ([`model`]), traces of models and workload
//! events ([`trace`]), and generators of traces ([`generate()`]).

pub mod generate;
pub mod model;
pub mod trace;

pub use generate::{Family, generate};
pub use model::{GuestModel, Signal, Spike, Wave, Window};
pub use trace::{
    CreateEvent, DeleteEvent, Event, MaintenanceEvent, MaintenanceVia, ModelEvent, Trace,
};
