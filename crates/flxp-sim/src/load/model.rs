//! Usage models: a guest's CPU and memory demand as a pure function of (guest, simulated time,
//! seed). Values are fractions (CPU of the guest's vCPUs, memory of its configured memory), held
//! for a whole simulated minute (as one RRD step), so tests can compute the expected figure.

use serde::{Deserialize, Serialize};

/// Seconds per simulated day.
pub const DAY: f64 = 86_400.0;

/// A guest's usage model: CPU and memory separately, each optional (absent: the guest keeps the
/// scenario's fixed figure).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuestModel {
    /// CPU demand, fraction of the guest's vCPUs.
    pub cpu: Option<Signal>,
    /// Memory in use, fraction of the guest's configured memory.
    pub mem: Option<Signal>,
}

/// One resource's demand over time: `level` plus daily and weekly waves, time windows (office
/// hours, night batches), seeded noise, spikes and growth, clamped to 0..1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Signal {
    /// Base level, fraction 0..1.
    pub level: f64,
    /// An idle guest: only `level`, every other term ignored.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
    /// A daily cosine wave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily: Option<Wave>,
    /// A weekly cosine wave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weekly: Option<Wave>,
    /// Levels added during hours of the day (UTC), e.g. office hours on weekdays.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Window>,
    /// Uniform noise amplitude: each minute adds a seeded draw in `-noise..noise`.
    #[serde(skip_serializing_if = "is_zero")]
    pub noise: f64,
    /// Spikes added for a number of minutes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spikes: Vec<Spike>,
    /// Growth per simulated day since the trace starts (fraction per day).
    #[serde(skip_serializing_if = "is_zero")]
    pub growth_per_day: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// A cosine wave: `amplitude * cos(2π (x − peak) / period)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wave {
    /// Amplitude, fraction.
    pub amplitude: f64,
    /// Where the wave peaks: hour of the day (daily, UTC) or day of the week (weekly, 0 =
    /// Monday, fractions allowed).
    #[serde(default)]
    pub peak: f64,
}

/// A level added from hour `from` to hour `to` (UTC, `to` may wrap past midnight) on the given
/// days of the week.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First hour (inclusive), 0..24, fractions allowed.
    pub from: f64,
    /// Last hour (exclusive), 0..24.
    pub to: f64,
    /// Level added inside the window.
    pub add: f64,
    /// Days of the week it applies to (0 = Monday ... 6 = Sunday); default every day. A
    /// window wrapping midnight belongs to the day it starts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<Vec<u8>>,
}

/// A spike: `height` added for `minutes` minutes from `at` seconds after the trace start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spike {
    /// Seconds after the trace start (rounded down to a whole minute).
    pub at: f64,
    /// Length in minutes.
    pub minutes: u32,
    /// Level added.
    pub height: f64,
}

/// Which resource a signal models (part of the noise seed, so CPU and memory noise differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// CPU.
    Cpu,
    /// Memory.
    Mem,
}

/// The minute a time falls in, as epoch seconds (figures hold for a whole minute).
pub fn minute_of(t: f64) -> f64 {
    (t / 60.0).floor() * 60.0
}

/// Day of the week of epoch seconds `t`, 0 = Monday (1970-01-01 was a Thursday).
pub fn weekday(t: f64) -> u8 {
    ((t / DAY).floor() as i64 + 3).rem_euclid(7) as u8
}

/// Hour of the day (UTC, with fraction) of epoch seconds `t`.
pub fn hour_of_day(t: f64) -> f64 {
    t.rem_euclid(DAY) / 3600.0
}

/// The splitmix64 finaliser: a well-mixed 64-bit value of `z`.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 53 random bits of `z` as a float in `0..1`.
pub(crate) fn unit(z: u64) -> f64 {
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A deterministic draw in `-1..1` for (seed, guest, resource, minute).
pub fn noise_draw(seed: u64, vmid: u32, resource: Resource, minute: i64) -> f64 {
    let z = seed
        ^ (u64::from(vmid)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (minute as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
        ^ match resource {
            Resource::Cpu => 0x1234_5678,
            Resource::Mem => 0x8765_4321_0000,
        };
    unit(mix64(z)) * 2.0 - 1.0
}

impl Signal {
    /// The value at epoch seconds `t` for a trace starting at `start`: a pure function, held
    /// for the whole minute `t` falls in, clamped to 0..1.
    pub fn value(&self, seed: u64, vmid: u32, resource: Resource, start: f64, t: f64) -> f64 {
        let m = minute_of(t);
        if self.idle {
            return self.level.clamp(0.0, 1.0);
        }
        let mut v = self.level;
        let hour = hour_of_day(m);
        if let Some(w) = self.daily {
            v += w.amplitude * (std::f64::consts::TAU * (hour - w.peak) / 24.0).cos();
        }
        if let Some(w) = self.weekly {
            let day = f64::from(weekday(m)) + hour / 24.0;
            v += w.amplitude * (std::f64::consts::TAU * (day - w.peak) / 7.0).cos();
        }
        for w in &self.windows {
            if w.contains(m) {
                v += w.add;
            }
        }
        if self.noise != 0.0 {
            v += self.noise * noise_draw(seed, vmid, resource, (m / 60.0) as i64);
        }
        let rel = m - minute_of(start);
        for s in &self.spikes {
            let from = minute_of(s.at);
            if rel >= from && rel < from + f64::from(s.minutes) * 60.0 {
                v += s.height;
            }
        }
        if self.growth_per_day != 0.0 && rel > 0.0 {
            v += self.growth_per_day * rel / DAY;
        }
        v.clamp(0.0, 1.0)
    }
}

impl Window {
    /// Whether epoch seconds `t` fall in the window.
    pub fn contains(&self, t: f64) -> bool {
        let hour = hour_of_day(t);
        let today = weekday(t);
        let on = |day: u8| self.days.as_ref().is_none_or(|d| d.contains(&day));
        if self.from <= self.to {
            hour >= self.from && hour < self.to && on(today)
        } else if hour >= self.from {
            on(today)
        } else if hour < self.to {
            // After midnight: the window started yesterday.
            on((today + 6) % 7)
        } else {
            false
        }
    }
}

/// Checks a model: `Err((field path relative to the model, what is wrong))`.
pub fn check_model(m: &GuestModel) -> Result<(), (String, String)> {
    for (name, s) in [("cpu", &m.cpu), ("mem", &m.mem)] {
        let Some(s) = s else { continue };
        let bad = |field: &str, msg: String| Err((format!("{name}.{field}"), msg));
        if !(0.0..=1.0).contains(&s.level) {
            return bad("level", format!("must be a fraction 0..1, got {}", s.level));
        }
        if !(s.noise.is_finite() && s.noise >= 0.0) {
            return bad(
                "noise",
                format!("must be a non-negative fraction, got {}", s.noise),
            );
        }
        if !s.growth_per_day.is_finite() {
            return bad("growth_per_day", "must be a number".into());
        }
        for (i, w) in s.windows.iter().enumerate() {
            for (f, h) in [("from", w.from), ("to", w.to)] {
                if !(0.0..=24.0).contains(&h) {
                    return bad(
                        &format!("windows[{i}].{f}"),
                        format!("must be an hour 0..24, got {h}"),
                    );
                }
            }
            if let Some(d) = w.days.as_ref().and_then(|d| d.iter().find(|d| **d > 6)) {
                return bad(
                    &format!("windows[{i}].days"),
                    format!("days are 0 (Monday) to 6 (Sunday), got {d}"),
                );
            }
        }
        for (i, sp) in s.spikes.iter().enumerate() {
            if !(sp.at.is_finite() && sp.at >= 0.0) {
                return bad(
                    &format!("spikes[{i}].at"),
                    format!("must be seconds after the trace start, got {}", sp.at),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2025-12-01 00:00:00 UTC was a Monday.
    const MONDAY: f64 = 1_764_547_200.0;

    #[test]
    fn calendar_helpers_know_monday_and_the_hour() {
        assert_eq!(weekday(MONDAY), 0);
        assert_eq!(weekday(MONDAY + 5.0 * DAY + 3600.0), 5);
        assert_eq!(hour_of_day(MONDAY + 9.5 * 3600.0), 9.5);
    }

    #[test]
    fn windows_respect_days_and_wrap_midnight() {
        let office = Window {
            from: 8.0,
            to: 18.0,
            add: 0.5,
            days: Some(vec![0, 1, 2, 3, 4]),
        };
        assert!(office.contains(MONDAY + 8.0 * 3600.0));
        assert!(!office.contains(MONDAY + 18.0 * 3600.0));
        assert!(
            !office.contains(MONDAY + 5.0 * DAY + 10.0 * 3600.0),
            "Saturday"
        );
        let night = Window {
            from: 22.0,
            to: 2.0,
            add: 0.5,
            days: Some(vec![4]),
        };
        assert!(
            night.contains(MONDAY + 4.0 * DAY + 23.0 * 3600.0),
            "Friday 23:00"
        );
        assert!(
            night.contains(MONDAY + 5.0 * DAY + 3600.0),
            "Saturday 01:00 is Friday's night"
        );
        assert!(
            !night.contains(MONDAY + 4.0 * DAY + 3600.0),
            "Friday 01:00 is Thursday's"
        );
    }

    #[test]
    fn values_hold_for_a_minute_and_add_up() {
        let s = Signal {
            level: 0.2,
            spikes: vec![Spike {
                at: 90.0,
                minutes: 2,
                height: 0.5,
            }],
            growth_per_day: 0.1,
            ..Signal::default()
        };
        let v = |t: f64| s.value(1, 100, Resource::Cpu, MONDAY, MONDAY + t);
        assert_eq!(v(59.0), 0.2 + 0.1 * 0.0);
        assert_eq!(
            v(60.0),
            0.2 + 0.1 * 60.0 / DAY + 0.5,
            "the spike starts at its minute"
        );
        assert_eq!(v(179.0), 0.2 + 0.1 * 120.0 / DAY + 0.5);
        assert_eq!(
            v(180.0),
            0.2 + 0.1 * 180.0 / DAY,
            "and ends two minutes later"
        );
        assert_eq!(v(DAY * 3.0), 0.2 + 0.3);
        assert_eq!(v(DAY * 30.0), 1.0, "clamped");
    }

    #[test]
    fn noise_is_seeded_and_bounded() {
        let a: Vec<f64> = (0..100)
            .map(|m| noise_draw(7, 100, Resource::Cpu, m))
            .collect();
        let b: Vec<f64> = (0..100)
            .map(|m| noise_draw(7, 100, Resource::Cpu, m))
            .collect();
        let c: Vec<f64> = (0..100)
            .map(|m| noise_draw(8, 100, Resource::Cpu, m))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
    }
}
