//! Trace generators: four families of simulated days, sized from a scenario's cluster and
//! deterministic for a seed.

use std::collections::BTreeMap;

use super::model::{DAY, GuestModel, Signal, Spike, Wave, Window};
use super::trace::{CreateEvent, DeleteEvent, Event, Trace};
use crate::Scenario;

/// A family of generated traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Weekday 8-18 peaks, quiet nights and weekends.
    OfficeHours,
    /// A group of guests spikes 01-04 every night.
    NightBatch,
    /// Random short spikes (5-30 min) on a few guests.
    NoisyNeighbours,
    /// Memory grows every day; guests are created and deleted through the day.
    GrowthChurn,
}

impl Family {
    /// Every family, in the order `flxp sim trace --help` lists them.
    pub const ALL: [Family; 4] = [
        Family::OfficeHours,
        Family::NightBatch,
        Family::NoisyNeighbours,
        Family::GrowthChurn,
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Family::OfficeHours => "office-hours",
            Family::NightBatch => "night-batch",
            Family::NoisyNeighbours => "noisy-neighbours",
            Family::GrowthChurn => "growth-churn",
        }
    }

    /// The family called `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        super::model::mix64(self.0)
    }

    /// Uniform in `lo..hi`, rounded to 3 decimals (readable traces).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        let u = super::model::unit(self.next());
        ((lo + u * (hi - lo)) * 1000.0).round() / 1000.0
    }

    /// Uniform integer in `lo..=hi`.
    fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.range(0.0, 1.0) < p
    }
}

const WEEKDAYS: [u8; 5] = [0, 1, 2, 3, 4];

/// The guests a trace models: the scenario's non-template guests, by VMID.
fn guests(scenario: &Scenario) -> Vec<u32> {
    let mut v: Vec<u32> = scenario
        .snapshot
        .resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter(|r| r.template != Some(true))
        .filter_map(|r| r.vmid)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A trace of `family` for the scenario's guests over `days` days, the same for equal seeds.
pub fn generate(family: Family, scenario: &Scenario, seed: u64, days: u32) -> Trace {
    let mut rng = Rng(seed ^ 0x005E_ED0F_7ACE);
    let ids = guests(scenario);
    let mut models = BTreeMap::new();
    let mut events = Vec::new();
    let days = days.max(1);
    match family {
        Family::OfficeHours => {
            for &id in &ids {
                let model = if rng.chance(0.2) {
                    idle(&mut rng)
                } else {
                    GuestModel {
                        cpu: Some(Signal {
                            level: rng.range(0.03, 0.12),
                            windows: vec![Window {
                                from: 8.0,
                                to: 18.0,
                                add: rng.range(0.3, 0.6),
                                days: Some(WEEKDAYS.to_vec()),
                            }],
                            noise: 0.03,
                            ..Signal::default()
                        }),
                        mem: Some(Signal {
                            level: rng.range(0.35, 0.55),
                            windows: vec![Window {
                                from: 8.0,
                                to: 18.0,
                                add: rng.range(0.1, 0.25),
                                days: Some(WEEKDAYS.to_vec()),
                            }],
                            noise: 0.01,
                            ..Signal::default()
                        }),
                    }
                };
                models.insert(id.to_string(), model);
            }
        }
        Family::NightBatch => {
            let group = (ids.len() / 4).max(1);
            for (i, &id) in ids.iter().enumerate() {
                let model = if i % ids.len().div_ceil(group).max(1) == 0 {
                    GuestModel {
                        cpu: Some(Signal {
                            level: rng.range(0.03, 0.08),
                            windows: vec![Window {
                                from: 1.0,
                                to: 4.0,
                                add: rng.range(0.7, 0.9),
                                days: None,
                            }],
                            noise: 0.02,
                            ..Signal::default()
                        }),
                        mem: Some(Signal {
                            level: rng.range(0.3, 0.4),
                            windows: vec![Window {
                                from: 1.0,
                                to: 4.0,
                                add: rng.range(0.3, 0.5),
                                days: None,
                            }],
                            ..Signal::default()
                        }),
                    }
                } else {
                    steady(&mut rng)
                };
                models.insert(id.to_string(), model);
            }
        }
        Family::NoisyNeighbours => {
            let noisy = (ids.len() / 10).max(1);
            for (i, &id) in ids.iter().enumerate() {
                let mut model = steady(&mut rng);
                if i % ids.len().div_ceil(noisy).max(1) == 0 {
                    if let Some(cpu) = model.cpu.as_mut() {
                        for day in 0..days {
                            for _ in 0..rng.int(3, 6) {
                                cpu.spikes.push(Spike {
                                    at: f64::from(day) * DAY + (rng.int(0, 1439) * 60) as f64,
                                    minutes: rng.int(5, 30) as u32,
                                    height: rng.range(0.5, 0.9),
                                });
                            }
                        }
                        cpu.spikes.sort_by(|a, b| a.at.total_cmp(&b.at));
                    }
                }
                models.insert(id.to_string(), model);
            }
        }
        Family::GrowthChurn => {
            for &id in &ids {
                let mut model = steady(&mut rng);
                if let Some(mem) = model.mem.as_mut() {
                    mem.level = rng.range(0.3, 0.45);
                    mem.growth_per_day = rng.range(0.02, 0.05);
                }
                models.insert(id.to_string(), model);
            }
            let mut next_id = ids.iter().max().map_or(1000, |m| m + 1).max(1000);
            let per_day = (ids.len() / 20).max(1) as u64;
            for day in 0..days {
                for _ in 0..per_day {
                    let at = f64::from(day) * DAY + (rng.int(6 * 60, 22 * 60) * 60) as f64;
                    let life = (rng.int(2 * 60, 12 * 60) * 60) as f64;
                    let vmid = next_id;
                    next_id += 1;
                    events.push(Event {
                        at,
                        create: Some(CreateEvent {
                            vmid: Some(vmid),
                            node: None,
                            name: Some(format!("churn-{vmid}")),
                            cores: rng.int(1, 4) as u32,
                            memory: 1024 * rng.int(1, 8),
                            disk_gib: 16,
                            tags: Some("churn".into()),
                            model: Some(steady(&mut rng)),
                        }),
                        ..Event::default()
                    });
                    events.push(Event {
                        at: at + life,
                        delete: Some(DeleteEvent { vmid }),
                        ..Event::default()
                    });
                }
            }
            events.sort_by(|a, b| a.at.total_cmp(&b.at));
        }
    }
    Trace {
        family: Some(family.name().to_string()),
        seed,
        models,
        events,
    }
}

/// An idle guest.
fn idle(rng: &mut Rng) -> GuestModel {
    GuestModel {
        cpu: Some(Signal {
            level: rng.range(0.0, 0.02),
            idle: true,
            ..Signal::default()
        }),
        mem: Some(Signal {
            level: rng.range(0.1, 0.2),
            idle: true,
            ..Signal::default()
        }),
    }
}

/// A guest with a mild afternoon peak and some noise.
fn steady(rng: &mut Rng) -> GuestModel {
    GuestModel {
        cpu: Some(Signal {
            level: rng.range(0.1, 0.3),
            daily: Some(Wave {
                amplitude: rng.range(0.02, 0.1),
                peak: 14.0,
            }),
            noise: 0.03,
            ..Signal::default()
        }),
        mem: Some(Signal {
            level: rng.range(0.3, 0.6),
            noise: 0.01,
            ..Signal::default()
        }),
    }
}
