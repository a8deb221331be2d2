//! `--compare`: warm against cold in one process, and the device's cost per faulted page
//! against the guest CPU's own first touch of the same kind of page.
//!
//! For every operation and size (a row), on the same two QPs and the same two buffers, each
//! repetition runs:
//!
//! 1. the CPU reference: both buffers dropped (`MADV_DONTNEED`), then one byte stored to every
//!    page of A and one byte loaded from every page of B, each access timed alone (passes are
//!    repeated until at least [`MIN_TOUCH_PAGES`] pages were timed);
//! 2. warm: one byte stored to every page of both buffers, one untimed message (so the
//!    device's translations are cached, as they are in a steady warm run), then `iters`
//!    messages, each timed from the post to its completion(s);
//! 3. cold: `iters` times, drop both buffers (timed on its own, not part of the message), then
//!    one message timed the same way.
//!
//! One message is in flight at a time. A SEND's time runs from its post to both its send and
//! its receive completion (the receive is posted before the clock starts). Completions are
//! polled for, or with `--events` waited for on a completion channel, so that no CPU spins
//! while the device and the fault handlers work.
//!
//! Each row then gives the median and the 10th/90th percentiles over every repetition's
//! samples, faults (page requests) and page request groups per cold iteration from the two
//! MRs' counters, the device's added cost per faulted page ((cold - warm) / faults), and the
//! CPU reference it is compared with: the CPU's load and store first-touch costs, weighted by
//! the pages the device faulted for reading (the source MR) and for writing (the target MR).

use pfnic_cli::outln;
use std::io;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::counters::{MrCounters, MrStats};
use crate::{err, poll_cq, Bench, Buffers, Options, Verb, Wait, PAGE_SIZE, STUCK};
use ibv::{Cq, Wc, WcStatus};

/// The fewest pages each repetition times for each kind of CPU first touch.
const MIN_TOUCH_PAGES: usize = 64;
/// Samples of an empty interval that give the clock's own cost.
const CLOCK_SAMPLES: usize = 1000;

/// Median, spread and extremes of a set of samples (µs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Summary {
    pub(crate) median: f64,
    pub(crate) p10: f64,
    pub(crate) p90: f64,
    min: f64,
    max: f64,
    n: usize,
}

impl Summary {
    pub(crate) fn of(samples: &[f64]) -> Self {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        if n == 0 {
            return Self {
                median: f64::NAN,
                p10: f64::NAN,
                p90: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                n,
            };
        }
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Self {
            median,
            p10: crate::percentile(&s, 0.10),
            p90: crate::percentile(&s, 0.90),
            min: s[0],
            max: s[n - 1],
            n,
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "median_us": self.median,
            "p10_us": self.p10,
            "p90_us": self.p90,
            "min_us": self.min,
            "max_us": self.max,
            "samples": self.n,
        })
    }
}

/// Counters of the two MRs, split by what the operation does to each buffer.
#[derive(Clone, Copy, Default)]
struct Counts {
    /// Page requests for the buffer the device reads (the source).
    read_faults: u64,
    /// Page requests for the buffer the device writes (the target or receive buffer).
    write_faults: u64,
    /// Page request groups of both.
    groups: u64,
}

impl Counts {
    fn read(verb: Verb, bufs: &Buffers, counters: &MrCounters) -> io::Result<Self> {
        let (a, b): (MrStats, MrStats) = (counters.read(&bufs.mr_a)?, counters.read(&bufs.mr_b)?);
        // RDMA READ moves B's bytes into A; WRITE and SEND move A's into B.
        let (src, dst) = if verb == Verb::Read { (b, a) } else { (a, b) };
        Ok(Self {
            read_faults: src.page_faults,
            write_faults: dst.page_faults,
            groups: a.page_fault_groups + b.page_fault_groups,
        })
    }

    fn since(self, before: Self) -> Self {
        Self {
            read_faults: self.read_faults - before.read_faults,
            write_faults: self.write_faults - before.write_faults,
            groups: self.groups - before.groups,
        }
    }

    fn add(&mut self, o: Self) {
        self.read_faults += o.read_faults;
        self.write_faults += o.write_faults;
        self.groups += o.groups;
    }

    fn faults(self) -> u64 {
        self.read_faults + self.write_faults
    }
}

/// One row's measurements.
struct RowResult {
    verb: Verb,
    size: usize,
    wait: Wait,
    warm: Vec<f64>,
    cold: Vec<f64>,
    drop: Vec<f64>,
    touch_write: Vec<f64>,
    touch_read: Vec<f64>,
    warm_counts: Counts,
    cold_counts: Counts,
}

pub(crate) fn verb_name(v: Verb) -> &'static str {
    match v {
        Verb::Write => "write",
        Verb::Read => "read",
        Verb::Send => "send",
    }
}

pub(crate) fn micros(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// The median cost of reading the clock twice around nothing (µs): subtracted from the
/// per-page touch times, which are close enough to it to matter.
fn clock_overhead() -> f64 {
    let samples: Vec<f64> = (0..CLOCK_SAMPLES).map(|_| micros(Instant::now())).collect();
    Summary::of(&samples).median
}

/// `madvise(MADV_DONTNEED)` of all of both buffers.
pub(crate) fn drop_both(bufs: &Buffers) -> io::Result<()> {
    bufs.a.dontneed()?;
    bufs.b.dontneed()
}

/// Offsets of the pages a message of the row covers.
fn pages(bufs: &Buffers) -> impl Iterator<Item = usize> {
    (0..bufs.size.div_ceil(PAGE_SIZE)).map(|p| p * PAGE_SIZE)
}

/// The CPU reference: first stores to dropped pages of A and first loads from dropped pages
/// of B, each page timed alone, appended to `write` and `read`.
fn cpu_touch(bufs: &Buffers, write: &mut Vec<f64>, read: &mut Vec<f64>) -> io::Result<()> {
    let mut timed = 0;
    while timed < MIN_TOUCH_PAGES {
        drop_both(bufs)?;
        for off in pages(bufs) {
            let t0 = Instant::now();
            bufs.a.write(off, &[1]);
            write.push(micros(t0));
        }
        let mut byte = [0u8];
        for off in pages(bufs) {
            let t0 = Instant::now();
            bufs.b.read(off, &mut byte);
            read.push(micros(t0));
            std::hint::black_box(byte);
        }
        timed += bufs.size.div_ceil(PAGE_SIZE);
    }
    Ok(())
}

impl Bench {
    /// Waits for one completion on `cq`: by polling, or (`Wait::Events`) by sleeping on the
    /// completion channel between polls (armed before the last poll, so none is missed).
    fn wait_one(&self, cq: &Cq, what: &str) -> io::Result<()> {
        let mut wc = [Wc::default(); 1];
        let (Wait::Events, Some(channel)) = (self.wait, &self.events) else {
            return poll_cq(cq, &mut wc, what).map(|_| ());
        };
        let start = Instant::now();
        loop {
            for arm in [false, true] {
                if arm {
                    cq.req_notify(false)?;
                }
                let n = cq.poll(&mut wc);
                if n > 0 {
                    return match wc[0].status {
                        WcStatus::SUCCESS => Ok(()),
                        s => Err(err(format!(
                            "{what}: completion {s:?} of wr_id {}",
                            wc[0].wr_id
                        ))),
                    };
                }
            }
            // An event for this CQ or the other (or one left from an earlier arm): poll again.
            if channel.get_event(Some(Duration::from_secs(1)))?.is_none() && start.elapsed() > STUCK
            {
                return Err(err(format!("{what}: no completion within {STUCK:?}")));
            }
        }
    }

    /// One message of `verb` from A to B, timed from the post to its completion(s) (µs).
    pub(crate) fn one_message(&self, verb: Verb, bufs: &Buffers, i: usize) -> io::Result<f64> {
        if verb == Verb::Send {
            Self::post_recv(&self.qp_b, &bufs.mr_b, bufs, 0)?;
        }
        let t0 = Instant::now();
        self.post(verb, bufs, i)?;
        self.wait_one(&self.cq_a, "completion")?;
        if verb == Verb::Send {
            self.wait_one(&self.cq_b, "receive completion")?;
        }
        Ok(micros(t0))
    }

    fn compare_row(&self, verb: Verb, size: usize, o: &Options) -> io::Result<RowResult> {
        let bufs = self.buffers(size, crate::Kind::Lat)?;
        let mut r = RowResult {
            verb,
            size,
            wait: self.wait,
            warm: Vec::with_capacity(o.iters * o.reps),
            cold: Vec::with_capacity(o.iters * o.reps),
            drop: Vec::with_capacity(o.iters * o.reps),
            touch_write: Vec::new(),
            touch_read: Vec::new(),
            warm_counts: Counts::default(),
            cold_counts: Counts::default(),
        };
        let mut msg = 0;
        for _ in 0..o.reps {
            cpu_touch(&bufs, &mut r.touch_write, &mut r.touch_read)?;

            for off in pages(&bufs) {
                bufs.a.write(off, &[0xa5]);
                bufs.b.write(off, &[0x5a]);
            }
            self.one_message(verb, &bufs, msg)?;
            msg += 1;
            let before = Counts::read(verb, &bufs, &self.counters)?;
            for _ in 0..o.iters {
                r.warm.push(self.one_message(verb, &bufs, msg)?);
                msg += 1;
            }
            r.warm_counts
                .add(Counts::read(verb, &bufs, &self.counters)?.since(before));

            let before = Counts::read(verb, &bufs, &self.counters)?;
            for _ in 0..o.iters {
                let t0 = Instant::now();
                drop_both(&bufs)?;
                r.drop.push(micros(t0));
                r.cold.push(self.one_message(verb, &bufs, msg)?);
                msg += 1;
            }
            r.cold_counts
                .add(Counts::read(verb, &bufs, &self.counters)?.since(before));
        }
        Ok(r)
    }
}

/// What a row's numbers come to.
struct Derived {
    warm: Summary,
    cold: Summary,
    drop: Summary,
    touch_write: Summary,
    touch_read: Summary,
    /// Per cold iteration.
    read_faults: f64,
    write_faults: f64,
    faults: f64,
    groups: f64,
    warm_faults: f64,
    cold_over_warm: f64,
    /// (cold - warm) / faults, µs.
    device_per_fault: f64,
    /// The CPU's first touch, clock cost removed, µs per page.
    cpu_write: f64,
    cpu_read: f64,
    /// The CPU touches weighted by the device's read and write faults, µs per page.
    cpu_weighted: f64,
    device_over_cpu: f64,
    /// The CPU's first touch of the pages one cold message faulted, µs.
    cpu_per_iter: f64,
    /// cold / (warm + cpu_per_iter): the second target is 2 or less.
    cold_over_warm_cpu: f64,
}

fn derive(r: &RowResult, clock: f64) -> Derived {
    let warm = Summary::of(&r.warm);
    let cold = Summary::of(&r.cold);
    let touch_write = Summary::of(&r.touch_write);
    let touch_read = Summary::of(&r.touch_read);
    // Counts over every repetition's cold (or warm) iterations, per iteration.
    let per_iter = |n: u64| n as f64 / r.cold.len() as f64;
    let read_faults = per_iter(r.cold_counts.read_faults);
    let write_faults = per_iter(r.cold_counts.write_faults);
    let faults = per_iter(r.cold_counts.faults());
    let cpu_write = (touch_write.median - clock).max(0.0);
    let cpu_read = (touch_read.median - clock).max(0.0);
    // NaN (null in the JSON) when the device faulted nothing.
    let cpu_weighted = (read_faults * cpu_read + write_faults * cpu_write) / faults;
    let device_per_fault = (cold.median - warm.median) / faults;
    let cpu_per_iter = read_faults * cpu_read + write_faults * cpu_write;
    Derived {
        warm,
        cold,
        drop: Summary::of(&r.drop),
        touch_write,
        touch_read,
        read_faults,
        write_faults,
        faults,
        groups: per_iter(r.cold_counts.groups),
        warm_faults: r.warm_counts.faults() as f64 / r.warm.len() as f64,
        cold_over_warm: cold.median / warm.median,
        device_per_fault,
        cpu_write,
        cpu_read,
        cpu_weighted,
        device_over_cpu: device_per_fault / cpu_weighted,
        cpu_per_iter,
        cold_over_warm_cpu: cold.median / (warm.median + cpu_per_iter),
    }
}

fn row_json(r: &RowResult, d: &Derived) -> Value {
    json!({
        "op": verb_name(r.verb),
        "size": r.size,
        "wait": r.wait.name(),
        "warm": d.warm.json(),
        "cold": d.cold.json(),
        "drop": d.drop.json(),
        "cold_over_warm": d.cold_over_warm,
        "warm_faults_per_iter": d.warm_faults,
        "faults_per_iter": d.faults,
        "read_faults_per_iter": d.read_faults,
        "write_faults_per_iter": d.write_faults,
        "groups_per_iter": d.groups,
        "device_us_per_fault": d.device_per_fault,
        "cpu": {
            "write_touch": d.touch_write.json(),
            "read_touch": d.touch_read.json(),
            "write_us_per_page": d.cpu_write,
            "read_us_per_page": d.cpu_read,
            "weighted_us_per_page": d.cpu_weighted,
            "us_per_iter": d.cpu_per_iter,
        },
        "device_over_cpu": d.device_over_cpu,
        "cold_over_warm_plus_cpu": d.cold_over_warm_cpu,
        "samples_us": { "warm": r.warm, "cold": r.cold },
    })
}

/// A number for the table: a dash when it does not exist (nothing faulted).
pub(crate) fn num(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".into()
    }
}

pub(crate) fn spread(s: &Summary) -> String {
    format!(
        "{} [{}..{}]",
        num(s.median, 1),
        num(s.p10, 1),
        num(s.p90, 1)
    )
}

pub(crate) fn size_name(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// Prints a table: the operation and size, then `columns` (title, width) filled by `cells`.
fn table(
    columns: &[(&str, usize)],
    rows: &[(RowResult, Derived)],
    cells: impl Fn(&Derived) -> Vec<String>,
) {
    let line = |op: &str, size: &str, wait: &str, rest: Vec<String>| {
        let mut l = format!("{op:<6} {size:>7}  {wait:<6}");
        for ((_, w), c) in columns.iter().zip(rest) {
            l.push_str(&format!("  {c:>w$}"));
        }
        outln!("{l}");
    };
    line(
        "op",
        "size",
        "wait",
        columns.iter().map(|(t, _)| t.to_string()).collect(),
    );
    for (r, d) in rows {
        line(
            verb_name(r.verb),
            &size_name(r.size),
            r.wait.name(),
            cells(d),
        );
    }
}

fn print_tables(o: &Options, rows: &[(RowResult, Derived)], clock: f64) {
    outln!(
        "pfnic-perf --compare: {}, RC loopback (two QPs of one process), {}, one message \
         in flight; wait: poll spins on the CQ, events sleeps on a completion channel",
        o.device,
        if o.odp {
            "on-demand MRs"
        } else {
            "ordinary MRs"
        },
    );
    outln!(
        "  {} repetitions x {} iterations per row; warm and cold interleaved on the same \
         buffers and QPs; times in us: median [p10..p90]",
        o.reps,
        o.iters
    );
    outln!(
        "  cold: madvise(MADV_DONTNEED) of both buffers before every iteration, timed apart \
         ('drop'), not in the message time"
    );
    outln!();
    table(
        &[
            ("warm", 26),
            ("cold", 28),
            ("cold/warm", 9),
            ("drop", 8),
            ("faults/iter", 11),
            ("groups/iter", 11),
        ],
        rows,
        |d| {
            vec![
                spread(&d.warm),
                spread(&d.cold),
                format!("{}x", num(d.cold_over_warm, 1)),
                num(d.drop.median, 1),
                num(d.faults, 1),
                num(d.groups, 1),
            ]
        },
    );
    outln!();
    outln!(
        "Cost per faulted page (us): device = (cold - warm) / faults; CPU = the guest CPU's \
         first touch of a dropped page in this process (store / load one byte, median, clock \
         cost {} us removed), weighted by the pages the device faulted for writing (target) \
         and for reading (source)",
        num(clock, 3)
    );
    table(
        &[
            ("device", 10),
            ("CPU store", 10),
            ("CPU load", 10),
            ("CPU ref", 10),
            ("device/CPU", 10),
            ("cold/(warm+CPU)", 15),
        ],
        rows,
        |d| {
            vec![
                num(d.device_per_fault, 2),
                num(d.cpu_write, 2),
                num(d.cpu_read, 2),
                num(d.cpu_weighted, 2),
                format!("{}x", num(d.device_over_cpu, 1)),
                format!("{}x", num(d.cold_over_warm_cpu, 2)),
            ]
        },
    );
    if rows.iter().any(|(_, d)| d.warm_faults > 0.0) {
        outln!("note: some warm iterations took page faults (warm_faults_per_iter in the JSON)");
    }
}

/// Runs `--compare`: every operation at every size, prints the tables and writes the JSON.
pub(crate) fn run(o: &Options) -> io::Result<()> {
    let mut bench = Bench::new(o)?;
    let clock = clock_overhead();
    let start = Instant::now();
    let mut rows = Vec::new();
    for &verb in &o.verbs {
        for &size in &o.sizes {
            for &wait in &o.waits {
                bench.wait = wait;
                let r = bench.compare_row(verb, size, o).map_err(|e| {
                    err(format!(
                        "{} {size} bytes, {}: {e}",
                        verb_name(verb),
                        wait.name()
                    ))
                })?;
                let d = derive(&r, clock);
                rows.push((r, d));
            }
        }
    }
    print_tables(o, &rows, clock);
    let modes = if o.modes {
        Some(crate::modes::run(o)?)
    } else {
        None
    };
    if let Some(path) = &o.json {
        let doc = json!({
            "tool": "pfnic-perf --compare",
            "format": 1,
            "device": o.device,
            "odp": o.odp,
            "waits": o.waits.iter().map(|w| w.name()).collect::<Vec<_>>(),
            "iters": o.iters,
            "reps": o.reps,
            "page_size": PAGE_SIZE,
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "clock_overhead_us": clock,
            "seconds": start.elapsed().as_secs_f64(),
            "rows": rows.iter().map(|(r, d)| row_json(r, d)).collect::<Vec<_>>(),
            "modes": modes,
        });
        let mut text = doc.to_string();
        text.push('\n');
        std::fs::write(path, text).map_err(|e| err(format!("cannot write {path}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_median_and_nearest_rank_percentiles() {
        let s = Summary::of(&[10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]);
        assert_eq!((s.median, s.p10, s.p90), (5.5, 1.0, 9.0));
        assert_eq!((s.min, s.max, s.n), (1.0, 10.0, 10));
        let odd = Summary::of(&[3.0, 1.0, 2.0]);
        assert_eq!((odd.median, odd.p10, odd.p90), (2.0, 1.0, 3.0));
        assert!(Summary::of(&[]).median.is_nan());
    }

    fn row(read_faults: u64, write_faults: u64) -> RowResult {
        RowResult {
            verb: Verb::Write,
            size: 2 * PAGE_SIZE,
            wait: Wait::Poll,
            warm: vec![10.0; 4],
            cold: vec![50.0; 4],
            drop: vec![1.0; 4],
            touch_write: vec![3.0; 8],
            touch_read: vec![1.5; 8],
            warm_counts: Counts::default(),
            cold_counts: Counts {
                read_faults,
                write_faults,
                groups: 4,
            },
        }
    }

    #[test]
    fn device_cost_against_the_cpu_weighted_by_the_faults() {
        // 4 cold iterations, each faulting 2 source pages (read) and 2 target pages (write).
        let d = derive(&row(8, 8), 0.5);
        assert_eq!((d.read_faults, d.write_faults, d.faults), (2.0, 2.0, 4.0));
        assert_eq!(d.groups, 1.0);
        assert_eq!(d.cold_over_warm, 5.0);
        assert_eq!(d.device_per_fault, 10.0);
        // The clock's cost comes off each touch: store 2.5, load 1.0, weighted 1.75.
        assert_eq!((d.cpu_write, d.cpu_read, d.cpu_weighted), (2.5, 1.0, 1.75));
        assert_eq!(d.cpu_per_iter, 7.0);
        assert_eq!(d.device_over_cpu, 10.0 / 1.75);
        assert_eq!(d.cold_over_warm_cpu, 50.0 / 17.0);
        // Only reads faulted: the load cost alone is the reference.
        assert_eq!(derive(&row(8, 0), 0.5).cpu_weighted, 1.0);
    }

    #[test]
    fn nothing_faulted_gives_null_not_a_number() {
        let r = row(0, 0);
        let d = derive(&r, 0.0);
        assert!(d.device_per_fault.is_infinite() || d.device_per_fault.is_nan());
        let j = row_json(&r, &d);
        assert!(j["device_us_per_fault"].is_null());
        assert!(j["cpu"]["weighted_us_per_page"].is_null());
        assert_eq!(num(d.device_over_cpu, 1), "-");
    }
}
