"""Tests of the week benchmark's measures on small hand-made records with known answers.

    python3 -m unittest discover -s scripts/week -p 'test_*.py'
"""

import unittest

import measure

GIB = 1 << 30
T0 = 1_800_000_000


def sample(minute, node="pve1", cpu=1.0, mem=4 * GIB, mem_demand=None, guests=2, online=True,
           psi_cpu=0.0, psi_mem_full=0.0):
    return {"time": T0 + 60 * minute, "node": node, "online": online, "cpu_demand": cpu,
            "maxcpu": 8, "mem": mem, "mem_demand": mem if mem_demand is None else mem_demand,
            "maxmem": 16 * GIB, "guests": guests, "psi_cpu_some": psi_cpu,
            "psi_memory_some": 0.0, "psi_memory_full": psi_mem_full, "psi_io_some": 0.0}


def move(vmid, a, b, start, secs=60, ok=True, gib=2):
    return {"vmid": vmid, "from": a, "to": b, "start": T0 + start, "end": T0 + start + secs,
            "bytes": gib * GIB, "user": "root@pam!c", "upid": f"u{vmid}{start}", "ok": ok}


class PingPong(unittest.TestCase):
    def test_one_guest_moved_back_and_forth_shows_one_ping_pong_per_return(self):
        moves = [move(101, "pve1", "pve2", 0), move(101, "pve2", "pve1", 3600),
                 move(101, "pve1", "pve2", 7200)]
        self.assertEqual(len(measure.ping_pongs(moves)), 2)

    def test_a_return_after_six_hours_is_no_ping_pong(self):
        moves = [move(101, "pve1", "pve2", 0, secs=60), move(101, "pve2", "pve1", 6 * 3600 + 60)]
        self.assertEqual(measure.ping_pongs(moves), [])

    def test_moving_on_to_a_third_node_is_no_ping_pong(self):
        moves = [move(101, "pve1", "pve2", 0), move(101, "pve2", "pve3", 600)]
        self.assertEqual(measure.ping_pongs(moves), [])

    def test_a_failed_migration_never_counts(self):
        moves = [move(101, "pve1", "pve2", 0), move(101, "pve2", "pve1", 600, ok=False)]
        self.assertEqual(measure.ping_pongs(moves), [])


class Overload(unittest.TestCase):
    def test_a_node_over_capacity_for_ten_minutes_shows_ten_overload_minutes(self):
        samples = [sample(m, cpu=9.0 if 5 <= m < 15 else 2.0, guests=3) for m in range(30)]
        self.assertEqual(measure.overload(samples), (10.0, 30.0))

    def test_memory_demand_above_95_percent_is_overload(self):
        full = sample(0, mem=16 * GIB, mem_demand=int(15.5 * GIB))
        fine = sample(1, mem=int(15 * GIB))
        self.assertTrue(measure.overloaded(full))
        self.assertFalse(measure.overloaded(fine))

    def test_pressure_above_the_limit_is_overload_and_an_offline_node_never(self):
        self.assertTrue(measure.overloaded(sample(0, psi_cpu=55.0)))
        self.assertTrue(measure.overloaded(sample(0, psi_mem_full=12.0)))
        self.assertFalse(measure.overloaded(sample(0, psi_cpu=30.0)))
        off = sample(0, cpu=20.0, online=False)
        self.assertFalse(measure.overloaded(off))


class Imbalance(unittest.TestCase):
    def test_spread_is_averaged_over_the_minutes(self):
        # Minute 0: 25 % and 75 % memory (spread 50 pp); minute 1: equal (0 pp).
        samples = [sample(0, node="pve1", mem=4 * GIB), sample(0, node="pve2", mem=12 * GIB),
                   sample(1, node="pve1", mem=8 * GIB), sample(1, node="pve2", mem=8 * GIB)]
        mem, cpu = measure.imbalance(samples)
        self.assertAlmostEqual(mem, 25.0)
        self.assertAlmostEqual(cpu, 0.0)


class Placement(unittest.TestCase):
    def test_a_guest_created_on_a_node_overloaded_within_ten_minutes_counts(self):
        samples = [sample(m, cpu=9.0 if m == 8 else 1.0) for m in range(20)]
        early = {"time": T0, "event": "created", "vmid": 200, "node": "pve1", "user": "w"}
        late = {"time": T0 + 60 * 9, "event": "created", "vmid": 201, "node": "pve1", "user": "w"}
        self.assertEqual([g["vmid"] for g in measure.placed_on_overload([early, late], samples)],
                         [200])


class Whole(unittest.TestCase):
    def test_measures_of_a_hand_made_day(self):
        records = {
            "migrations": [move(101, "pve1", "pve2", 0), move(101, "pve2", "pve1", 3600),
                           move(102, "pve1", "pve2", 7200, ok=False)],
            "node_samples": [sample(m, cpu=9.0 if m < 10 else 1.0) for m in range(1440)],
            "guests": [],
            "requests_per_hour": [{"hour": T0, "user": "root@pam!c", "count": 240},
                                  {"hour": T0, "user": "root@pam!other", "count": 999}],
        }
        m = measure.measures(records, T0, T0 + 86400, {"root@pam!c"})
        self.assertEqual(m["migrations"], 3)
        self.assertEqual(m["failed_migrations"], 1)
        self.assertEqual(m["ping_pongs"], 1)
        self.assertEqual(m["gib_copied"], 6.0)
        self.assertEqual(m["overload_node_minutes"], 10.0)
        self.assertEqual(m["api_calls_per_hour"], 10.0)

    def test_a_window_counts_only_what_happened_in_it(self):
        records = {
            "migrations": [move(101, "pve1", "pve2", 0), move(102, "pve1", "pve2", 7200)],
            "node_samples": [sample(m, cpu=9.0 if m < 10 else 1.0) for m in range(240)],
            "guests": [],
            "requests_per_hour": [{"hour": T0 + h * 3600, "user": "root@pam!c", "count": 10 + h}
                                  for h in range(4)],
        }
        m = measure.measures(records, T0, T0 + 7200, {"root@pam!c"})
        self.assertEqual(m["migrations"], 1)
        self.assertEqual(m["overload_node_minutes"], 10.0)
        # The first two hours: 10 and 11 calls.
        self.assertEqual(m["api_calls_per_hour"], 10.5)


if __name__ == "__main__":
    unittest.main()
