//! The crates.io peers of cellrate (governor, aerorate) through the scenarios
//! of bench/c/bench_core.c: same limits, same key sets, same random draws
//! (splitmix64 seeded alike), same timing method (median of `--reps` runs).
//!
//! Usage:
//!   bench_peers run [--reps N] [--single-ops N] [--keyed-ops N] [--keys N]
//!   bench_peers mem [--keys N]
//!
//! Each result is one JSON object per line on stdout.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, MonotonicClock, QuantaClock};
use governor::{Quota, RateLimiter};

struct Config {
    reps: usize,
    single_ops: usize,
    keyed_ops: usize,
    keys: usize,
}

// Allow path of one key: T = 10 ns and a burst of 1e9 (tau = 10 s), so no
// call in a run can be turned away. Deny path: one unit per hour, drained
// before timing. Keyed allow path: one unit per hour and a burst of 1e6, so
// every call is admitted and every key stays tracked (its TAT stays hours ahead).
const ALLOW_RATE_PER_S: u32 = 100_000_000;
const ALLOW_BURST: u32 = 1_000_000_000;
const KEYED_BURST: u32 = 1_000_000;
const SEED: u64 = 42;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Integer-like keys: distinct 64-bit values, scrambled so that they are not
/// consecutive (the same values as the C harness).
fn int_keys(count: usize) -> Vec<u64> {
    (0..count as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555_5555)
        .collect()
}

/// Short string keys, "user:<n>" (the same strings as the C harness).
fn str_keys(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("user:{i}")).collect()
}

/// `ops` indices drawn uniformly at random in [lo, lo + span).
fn draws(ops: usize, lo: usize, span: usize, seed: u64) -> Vec<u32> {
    let mut state = seed;
    (0..ops)
        .map(|_| (lo as u64 + splitmix64(&mut state) % span as u64) as u32)
        .collect()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// One JSON line. `expect` is what every call of the run must return
/// ("allow", "deny" or "" when not applicable); `ok` says whether it did.
fn emit(id: &str, threads: usize, ops: usize, runs: &mut [f64], expect: &str, ok: bool) {
    let list: Vec<String> = runs.iter().map(|r| format!("{r:.3}")).collect();
    let med = median(runs);
    println!(
        "{{\"id\": \"{id}\", \"lang\": \"rust\", \"ns_per_op\": {med:.3}, \"threads\": {threads}, \
         \"ops_per_run\": {ops}, \"runs_ns_per_op\": [{}], \"expect\": \"{expect}\", \"expect_met\": {ok}}}",
        list.join(", ")
    );
}

/// Pins the calling thread to the `index`-th CPU this process may use (as the
/// C harness does: left to itself, the scheduler of the machine this was
/// written on often kept both workers on one CPU for a whole run).
fn pin_to_cpu(index: usize) {
    // SAFETY: cpu_set_t is plain data; the calls only read and write `set`.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> =
            (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &allowed)).collect();
        if cpus.len() < 2 {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()], &mut one);
        libc::pthread_setaffinity_np(
            libc::pthread_self(),
            std::mem::size_of::<libc::cpu_set_t>(),
            &one,
        );
    }
}

/// One scenario: `body(t, i)` for i = 0..ops on each of `threads` threads
/// (t = thread index); it returns whether call i was admitted.
struct Case<'a> {
    id: String,
    threads: usize,
    ops: usize,
    expect: &'static str, // "allow", "deny" or "" (floors)
    body: Box<dyn Fn(usize, usize) -> bool + Sync + 'a>,
}

impl<'a> Case<'a> {
    fn new<F: Fn(usize, usize) -> bool + Sync + 'a>(
        id: impl Into<String>,
        threads: usize,
        ops: usize,
        expect: &'static str,
        body: F,
    ) -> Self {
        Case { id: id.into(), threads, ops, expect, body: Box::new(body) }
    }

    /// One timed run: wall ns per call (all threads' calls), and whether
    /// every call returned what `expect` says.
    fn time_once(&self) -> (f64, bool) {
        let want = self.expect != "deny";
        let body = &self.body;
        let ops = self.ops;
        let (elapsed, matched): (Duration, usize) = if self.threads == 1 {
            let start = Instant::now();
            let mut matched = 0usize;
            for i in 0..ops {
                if body(0, i) == want {
                    matched += 1;
                }
            }
            (start.elapsed(), matched)
        } else {
            // Workers start together without a sleeping barrier: each spins
            // (yielding) until all have started; the time runs from the first
            // start to the last end.
            let ready = AtomicUsize::new(0);
            let threads = self.threads;
            let spans: Vec<(Instant, Instant, usize)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let ready = &ready;
                        scope.spawn(move || {
                            pin_to_cpu(t);
                            ready.fetch_add(1, Ordering::SeqCst);
                            while ready.load(Ordering::SeqCst) < threads {
                                std::thread::yield_now();
                            }
                            let begin = Instant::now();
                            let mut matched = 0usize;
                            for i in 0..ops {
                                if body(t, i) == want {
                                    matched += 1;
                                }
                            }
                            (begin, Instant::now(), matched)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let first = spans.iter().map(|s| s.0).min().unwrap();
            let last = spans.iter().map(|s| s.1).max().unwrap();
            (last - first, spans.iter().map(|s| s.2).sum())
        };
        let calls = ops * self.threads;
        let as_expected = self.expect.is_empty() || matched == calls;
        (elapsed.as_nanos() as f64 / calls as f64, as_expected)
    }
}

/// Runs the cases round-robin, one run of each per round, so that a slow
/// phase of the machine falls on every case of the group alike; one untimed
/// warm-up round first.
fn run_cases(reps: usize, cases: &[Case]) {
    let mut runs: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); cases.len()];
    let mut met = vec![true; cases.len()];
    for rep in 0..=reps {
        for (k, case) in cases.iter().enumerate() {
            let (ns, ok) = case.time_once();
            met[k] &= ok;
            if rep > 0 {
                runs[k].push(ns);
            }
        }
    }
    for (k, case) in cases.iter().enumerate() {
        emit(&case.id, case.threads, case.ops, &mut runs[k], case.expect, met[k]);
    }
}

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).expect("non-zero")
}

fn allow_quota() -> Quota {
    Quota::per_second(nz(ALLOW_RATE_PER_S)).allow_burst(nz(ALLOW_BURST))
}

fn keyed_quota() -> Quota {
    Quota::per_hour(nz(1)).allow_burst(nz(KEYED_BURST))
}

fn aero_keyed_quota() -> aerorate::Quota {
    aerorate::Quota::per_hour(1).allow_burst(KEYED_BURST)
}

fn deny_quota() -> Quota {
    Quota::per_hour(nz(1))
}

fn aero_allow_quota() -> aerorate::Quota {
    aerorate::Quota::per_second(ALLOW_RATE_PER_S).allow_burst(ALLOW_BURST)
}

fn aero_deny_quota() -> aerorate::Quota {
    aerorate::Quota::per_hour(1).allow_burst(1)
}

/// Floors and the direct limiters of both crates, interleaved.
fn direct(cfg: &Config) {
    let n = cfg.single_ops;
    let quanta = QuantaClock::default();
    let gov_q_allow = RateLimiter::direct_with_clock(allow_quota(), QuantaClock::default());
    let gov_q_deny = RateLimiter::direct_with_clock(deny_quota(), QuantaClock::default());
    let gov_m_allow = RateLimiter::direct_with_clock(allow_quota(), MonotonicClock);
    let gov_m_deny = RateLimiter::direct_with_clock(deny_quota(), MonotonicClock);
    let aero_allow = aerorate::RateLimiter::new(aero_allow_quota());
    let aero_deny = aerorate::RateLimiter::new(aero_deny_quota());
    while gov_q_deny.check().is_ok() {}
    while gov_m_deny.check().is_ok() {}
    while aero_deny.check().is_allowed() {}
    let cases = [
        Case::new("rust.floor.instant_now", 1, n, "", |_, _| {
            black_box(Instant::now());
            true
        }),
        Case::new("rust.floor.quanta_now", 1, n, "", |_, _| {
            black_box(quanta.now());
            true
        }),
        Case::new("rust.governor.direct.quanta.allow", 1, n, "allow", |_, _| {
            black_box(gov_q_allow.check()).is_ok()
        }),
        Case::new("rust.governor.direct.quanta.deny", 1, n, "deny", |_, _| {
            black_box(gov_q_deny.check()).is_ok()
        }),
        Case::new("rust.governor.direct.monotonic.allow", 1, n, "allow", |_, _| {
            black_box(gov_m_allow.check()).is_ok()
        }),
        Case::new("rust.governor.direct.monotonic.deny", 1, n, "deny", |_, _| {
            black_box(gov_m_deny.check()).is_ok()
        }),
        Case::new("rust.aerorate.direct.allow", 1, n, "allow", |_, _| {
            black_box(aero_allow.check()).is_allowed()
        }),
        Case::new("rust.aerorate.direct.deny", 1, n, "deny", |_, _| {
            black_box(aero_deny.check()).is_allowed()
        }),
    ];
    run_cases(cfg.reps, &cases);
}

/// The keyed limiters of both crates with 1M keys (every key admitted once
/// before timing), then two threads on one key and on distinct keys (with two
/// threads each draws from its own half of the keys), each against the same
/// work on one thread. Default clocks unless named.
fn keyed(cfg: &Config, ints: &[u64], strs: &[String], picks: &[u32], picks_half: &[Vec<u32>]) {
    let gov_q_int = RateLimiter::dashmap_with_clock(keyed_quota(), QuantaClock::default());
    let gov_q_str = RateLimiter::dashmap_with_clock(keyed_quota(), QuantaClock::default());
    let gov_m_int = RateLimiter::dashmap_with_clock(keyed_quota(), MonotonicClock);
    let gov_m_str = RateLimiter::dashmap_with_clock(keyed_quota(), MonotonicClock);
    let aero_int: aerorate::KeyedRateLimiter<u64> = aerorate::KeyedRateLimiter::new(aero_keyed_quota());
    let aero_str: aerorate::KeyedRateLimiter<String> =
        aerorate::KeyedRateLimiter::new(aero_keyed_quota());
    for k in ints {
        let _ = gov_q_int.check_key(k);
        let _ = gov_m_int.check_key(k);
        let _ = aero_int.check(k);
    }
    for k in strs {
        let _ = gov_q_str.check_key(k);
        let _ = gov_m_str.check_key(k);
        let _ = aero_str.check(k.as_str());
    }
    let ops = picks.len();
    let int_of = |i: usize| &ints[picks[i] as usize];
    let str_of = |i: usize| &strs[picks[i] as usize];
    let cases = [
        Case::new("rust.governor.keyed.quanta.int", 1, ops, "allow", |_, i| {
            black_box(gov_q_int.check_key(int_of(i))).is_ok()
        }),
        Case::new("rust.governor.keyed.quanta.str", 1, ops, "allow", |_, i| {
            black_box(gov_q_str.check_key(str_of(i))).is_ok()
        }),
        Case::new("rust.governor.keyed.monotonic.int", 1, ops, "allow", |_, i| {
            black_box(gov_m_int.check_key(int_of(i))).is_ok()
        }),
        Case::new("rust.governor.keyed.monotonic.str", 1, ops, "allow", |_, i| {
            black_box(gov_m_str.check_key(str_of(i))).is_ok()
        }),
        Case::new("rust.aerorate.keyed.int", 1, ops, "allow", |_, i| {
            black_box(aero_int.check(int_of(i))).is_allowed()
        }),
        Case::new("rust.aerorate.keyed.str", 1, ops, "allow", |_, i| {
            black_box(aero_str.check(str_of(i).as_str())).is_allowed()
        }),
    ];
    run_cases(cfg.reps, &cases);
    drop(cases);
    drop((gov_q_str, gov_m_int, gov_m_str, aero_str));

    let gov = RateLimiter::direct(allow_quota());
    let aero = aerorate::RateLimiter::new(aero_allow_quota());
    let n = cfg.single_ops;
    let pick = |threads: usize, t: usize, i: usize| -> usize {
        if threads == 1 { picks[i] as usize } else { picks_half[t][i] as usize }
    };
    let mut cases = Vec::new();
    // control: work that shares nothing, to show what two threads can gain on
    // this machine at all during this harness's run
    for threads in [1usize, 2] {
        cases.push(Case::new(format!("rust.floor.threads.instant_now.{threads}t"), threads, n, "",
            |_, _| {
                black_box(Instant::now());
                true
            }));
    }
    for threads in [1usize, 2] {
        let (gov, aero) = (&gov, &aero);
        cases.push(Case::new(format!("rust.governor.threads.one_key.{threads}t"), threads, n, "allow",
            move |_, _| black_box(gov.check()).is_ok()));
        cases.push(Case::new(format!("rust.aerorate.threads.one_key.{threads}t"), threads, n, "allow",
            move |_, _| black_box(aero.check()).is_allowed()));
    }
    for threads in [1usize, 2] {
        let (gov_q_int, aero_int, pick) = (&gov_q_int, &aero_int, &pick);
        cases.push(Case::new(format!("rust.governor.threads.distinct.{threads}t"), threads, ops,
            "allow", move |t, i| black_box(gov_q_int.check_key(&ints[pick(threads, t, i)])).is_ok()));
        cases.push(Case::new(format!("rust.aerorate.threads.distinct.{threads}t"), threads, ops,
            "allow", move |t, i| black_box(aero_int.check(&ints[pick(threads, t, i)])).is_allowed()));
    }
    run_cases(cfg.reps, &cases);
}

/// VmRSS of this process, in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Bytes of RSS per tracked key: governor's default keyed limiter holding
/// `keys` short string keys ("user:<n>"), each admitted once. The key strings
/// are made one at a time, so only the copies the limiter keeps stay resident.
fn mem_governor(keys: usize) {
    let before = rss_bytes();
    let lim = RateLimiter::keyed(keyed_quota());
    let mut key = String::with_capacity(16);
    for i in 0..keys {
        key.clear();
        use std::fmt::Write;
        write!(key, "user:{i}").unwrap();
        let _ = lim.check_key(&key);
    }
    let after = rss_bytes();
    let tracked = lim.len();
    println!(
        "{{\"id\": \"mem.governor.keyed\", \"lang\": \"rust\", \"keys\": {keys}, \"tracked\": {tracked}, \
         \"rss_delta_bytes\": {}, \"bytes_per_key\": {:.2}}}",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / keys as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("run");
    let mut cfg = Config { reps: 5, single_ops: 2_000_000, keyed_ops: 1_000_000, keys: 1_000_000 };
    let mut i = 2;
    while i < args.len() {
        let value: usize = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("bench_peers: {} needs a number", args[i]);
            std::process::exit(2)
        });
        match args[i].as_str() {
            "--reps" => cfg.reps = value,
            "--single-ops" => cfg.single_ops = value,
            "--keyed-ops" => cfg.keyed_ops = value,
            "--keys" => cfg.keys = value,
            other => {
                eprintln!("bench_peers: unknown option {other}");
                std::process::exit(2)
            }
        }
        i += 2;
    }
    if cfg.reps < 1 {
        eprintln!("bench_peers: --reps must be >= 1");
        std::process::exit(2)
    }

    match mode {
        "mem" => mem_governor(cfg.keys),
        "run" => {
            direct(&cfg);
            let ints = int_keys(cfg.keys);
            let strs = str_keys(cfg.keys);
            let picks = draws(cfg.keyed_ops, 0, cfg.keys, SEED);
            let half = cfg.keys / 2;
            let picks_half = vec![
                draws(cfg.keyed_ops, 0, half, SEED + 1),
                draws(cfg.keyed_ops, half, cfg.keys - half, SEED + 2),
            ];
            keyed(&cfg, &ints, &strs, &picks, &picks_half);
        }
        other => {
            eprintln!("bench_peers: unknown mode {other} (run | mem)");
            std::process::exit(2)
        }
    }
}
