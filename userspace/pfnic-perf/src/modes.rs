//! `--compare --modes`: the memory modes side by side in one process (docs/uapi.md, "Memory
//! modes"; docs/benchmarks.md): the seeds' comparison of what pinning costs and what not
//! pinning costs, with the IOMMU's help (`sva`) and without (`odp`).
//!
//! Each mode gets a context of its own (`SET_MEM_MODE`), with the same two connected QPs as
//! `--compare`, and runs every operation and size:
//!
//! - **warm**: every page present and registered, one untimed message, then `iters` messages,
//!   one in flight, each timed from the post to its completion(s);
//! - **cold**: `sva` and `odp` drop both buffers before every message (the device faults them
//!   in: on-demand MRs; `sva` through page requests to the IOMMU, `odp` through page-fault
//!   events the driver serves); `pinned` drops both buffers, then registers them again, and
//!   the registration (pinning the pages back in) is timed in with the message: that is what
//!   a pinned first use costs.
//!
//! Then the registration itself: `ibv_reg_mr` of a buffer whose pages are present, for the
//! sizes of [`REG_SIZES`]: an on-demand MR in the `odp` and in the `sva` mode (nothing happens
//! until the device touches a page), an ordinary MR in the `sva` mode (made present by
//! prefetch, never pinned) and in the `pinned` mode (pinned, mapped, written into the
//! device's translation table).

use pfnic_cli::outln;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::compare::{drop_both, micros, num, size_name, spread, verb_name, Summary};
use crate::{err, Bench, Buffers, Kind, Options, Verb};
use ibv::{
    Buffer, Context, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};
use pfnic_verbs::{MemMode, MEM_MODE_ENV};

/// The registrations timed: 4 KiB to 1 GiB (half the guest's memory).
const REG_SIZES: [usize; 6] = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30];
/// Registrations timed per size and mode.
const REG_REPS: usize = 3;

/// One operation at one size in one mode.
struct ModeRow {
    mode: MemMode,
    verb: Verb,
    size: usize,
    warm: Vec<f64>,
    cold: Vec<f64>,
}

/// The ways of registering timed: (JSON key, mode, on-demand MR, name in the table).
const REG_WAYS: [(&str, MemMode, bool, &str); 4] = [
    ("odp_us", MemMode::Odp, true, "odp"),
    ("sva_odp_us", MemMode::Sva, true, "sva-odp"),
    ("sva_us", MemMode::Sva, false, "sva"),
    ("pinned_us", MemMode::Pinned, false, "pinned"),
];

/// How registering `size` bytes went in each way of [`REG_WAYS`] (`None`: the mode is not
/// available here).
struct RegRow {
    size: usize,
    ways: Vec<Option<Vec<f64>>>,
}

/// A context of `o.device` in `mode`, or `None` (with a note) where the platform cannot run it.
fn open_in(o: &Options, mode: MemMode) -> io::Result<Option<Context>> {
    // pfnic's provider takes a context's memory mode from the environment when it opens the
    // device; this process has no other thread yet.
    match Context::open_with_env(&o.device, &[(MEM_MODE_ENV, mode.name())]) {
        Ok(ctx) => Ok(Some(ctx)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            outln!("note: the {} mode is not available here: {e}", mode.name());
            Ok(None)
        }
        Err(e) => Err(err(format!(
            "cannot open {} with {MEM_MODE_ENV}={}: {e}",
            o.device,
            mode.name()
        ))),
    }
}

/// The registration access of the benchmark's buffers.
const ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;

impl Bench {
    /// One row: warm, then cold, `o.reps` times over `o.iters` messages each.
    fn mode_row(&self, mode: MemMode, verb: Verb, size: usize, o: &Options) -> io::Result<ModeRow> {
        let mut bufs: Buffers = self.buffers(size, Kind::Lat)?;
        let mut r = ModeRow {
            mode,
            verb,
            size,
            warm: Vec::with_capacity(o.iters * o.reps),
            cold: Vec::with_capacity(o.iters * o.reps),
        };
        let access = ACCESS | if self.odp { ACCESS_ON_DEMAND } else { 0 };
        let mut msg = 0;
        for _ in 0..o.reps {
            // Present pages (in the pinned mode: the ones the last registration pinned).
            bufs.a.fill(0xa5);
            bufs.b.fill(0x5a);
            self.one_message(verb, &bufs, msg)?;
            msg += 1;
            for _ in 0..o.iters {
                r.warm.push(self.one_message(verb, &bufs, msg)?);
                msg += 1;
            }
            for _ in 0..o.iters {
                drop_both(&bufs)?;
                if mode == MemMode::Pinned {
                    let t0 = Instant::now();
                    let mr_a = self.pd.reg_mr(&bufs.a, access)?;
                    let mr_b = self.pd.reg_mr(&bufs.b, access)?;
                    let reg = micros(t0);
                    // The old registrations go outside the time (their pages were dropped).
                    bufs.mr_a = mr_a;
                    bufs.mr_b = mr_b;
                    r.cold.push(reg + self.one_message(verb, &bufs, msg)?);
                } else {
                    r.cold.push(self.one_message(verb, &bufs, msg)?);
                }
                msg += 1;
            }
        }
        Ok(r)
    }
}

/// Times `REG_REPS` registrations of `buf` (present pages) in `ctx` with `access`.
fn time_reg(ctx: &Context, buf: &Arc<Buffer>, access: u32) -> io::Result<Vec<f64>> {
    let pd = ctx.alloc_pd()?;
    let mut samples = Vec::with_capacity(REG_REPS);
    for _ in 0..REG_REPS {
        buf.fill(0x33);
        let t0 = Instant::now();
        let mr = pd.reg_mr(buf, access)?;
        samples.push(micros(t0));
        mr.dereg().map_err(|(_, e)| e)?;
    }
    Ok(samples)
}

fn mode_json(r: &ModeRow) -> Value {
    json!({
        "mode": r.mode.name(),
        "op": verb_name(r.verb),
        "size": r.size,
        "warm_us": Summary::of(&r.warm).json(),
        "cold_us": Summary::of(&r.cold).json(),
    })
}

/// MiB/s of one `size`-byte message taking `us`.
fn mib_s(size: usize, us: f64) -> f64 {
    size as f64 / (1 << 20) as f64 / (us / 1e6)
}

fn print_modes(o: &Options, rows: &[ModeRow]) {
    outln!();
    outln!(
        "Memory modes, one process, a context each: pinned (ibv_reg_mr pins), odp (on-demand \
         MRs the driver fills, nothing pinned) and sva (on-demand MRs through the IOMMU, nothing \
         pinned); {} repetitions x {} iterations; message time in us, median [p10..p90]; \
         mode/pinned: warm bandwidth as a share of pinned's; cold: odp and sva drop both \
         buffers, pinned drops and registers them again (the registration counted in)",
        o.reps,
        o.iters
    );
    let modes = MemMode::ALL;
    let mut head = format!("{:<6} {:>8}", "op", "size");
    for m in modes {
        head += &format!("  {:>24}", format!("{} warm", m.name()));
    }
    for m in &modes[1..] {
        head += &format!("  {:>11}", format!("{}/pinned", m.name()));
    }
    for m in modes {
        head += &format!("  {:>26}", format!("{} cold", m.name()));
    }
    outln!("{head}");
    for verb in &o.verbs {
        for &size in &o.sizes {
            let find = |m: MemMode| {
                rows.iter()
                    .find(|r| r.mode == m && r.verb == *verb && r.size == size)
            };
            let cell = |m: MemMode, cold: bool| {
                find(m).map_or("-".to_string(), |r| {
                    spread(&Summary::of(if cold { &r.cold } else { &r.warm }))
                })
            };
            // Warm bandwidth as a share of pinned's (the 97% target).
            let ratio = |m: MemMode| match (find(m), find(MemMode::Pinned)) {
                (Some(r), Some(p)) => {
                    let bw = mib_s(size, Summary::of(&r.warm).median);
                    let pinned = mib_s(size, Summary::of(&p.warm).median);
                    format!("{}%", num(100.0 * bw / pinned, 0))
                }
                _ => "-".into(),
            };
            let mut line = format!("{:<6} {:>8}", verb_name(*verb), size_name(size));
            for m in modes {
                line += &format!("  {:>24}", cell(m, false));
            }
            for m in &modes[1..] {
                line += &format!("  {:>11}", ratio(*m));
            }
            for m in modes {
                line += &format!("  {:>26}", cell(m, true));
            }
            outln!("{line}");
        }
    }
}

fn print_reg(rows: &[RegRow]) {
    outln!();
    outln!(
        "Registration (ibv_reg_mr of present pages, us, median of {REG_REPS}): odp = an \
         on-demand MR the driver fills later, sva-odp = an on-demand MR in the sva mode, sva = \
         an ordinary MR made present by prefetch, pinned = pinned, mapped and written into the \
         device's table; way/pinned: the share of pinning's time"
    );
    let mut head = format!("{:>8}", "size");
    for (_, _, _, name) in REG_WAYS {
        head += &format!("  {name:>12}");
    }
    head += &format!("  {:>14}  {:>18}", "odp/pinned", "sva-odp/pinned");
    outln!("{head}");
    let median = |v: &Option<Vec<f64>>| v.as_ref().map(|v| Summary::of(v).median);
    for r in rows {
        let mut line = format!("{:>8}", size_name(r.size));
        for way in &r.ways {
            line += &format!("  {:>12}", median(way).map_or("-".into(), |m| num(m, 1)));
        }
        let share = |i: usize| match (median(&r.ways[i]), median(&r.ways[3])) {
            (Some(a), Some(p)) => format!("{}%", num(100.0 * a / p, 2)),
            _ => "-".into(),
        };
        line += &format!("  {:>14}  {:>18}", share(0), share(1));
        outln!("{line}");
    }
}

/// Runs the modes comparison: prints its tables and returns its JSON.
pub(crate) fn run(o: &Options) -> io::Result<Value> {
    let mut rows = Vec::new();
    let mut contexts = Vec::new();
    for mode in MemMode::ALL {
        let Some(ctx) = open_in(o, mode)? else {
            continue;
        };
        let bench = Bench::with_context(
            &ctx,
            &Options {
                odp: mode != MemMode::Pinned,
                ..o.clone()
            },
        )?;
        for &verb in &o.verbs {
            for &size in &o.sizes {
                rows.push(bench.mode_row(mode, verb, size, o).map_err(|e| {
                    err(format!(
                        "{} mode, {} {size} bytes: {e}",
                        mode.name(),
                        verb_name(verb)
                    ))
                })?);
            }
        }
        contexts.push((mode, ctx));
    }
    print_modes(o, &rows);

    let ctx_of = |m: MemMode| contexts.iter().find(|(mode, _)| *mode == m).map(|(_, c)| c);
    let mut reg = Vec::new();
    if ctx_of(MemMode::Pinned).is_some() {
        for size in REG_SIZES {
            let buf = Arc::new(Buffer::new(size)?);
            buf.madvise(libc::MADV_NOHUGEPAGE)?;
            let mut ways = Vec::new();
            for (_, mode, on_demand, _) in REG_WAYS {
                let access = ACCESS | if on_demand { ACCESS_ON_DEMAND } else { 0 };
                ways.push(match ctx_of(mode) {
                    Some(ctx) => Some(time_reg(ctx, &buf, access)?),
                    None => None,
                });
            }
            reg.push(RegRow { size, ways });
        }
        print_reg(&reg);
    } else {
        outln!("note: registration is compared only where the pinned mode runs");
    }
    Ok(json!({
        "rows": rows.iter().map(mode_json).collect::<Vec<_>>(),
        "registration": reg.iter().map(|r| {
            let mut row = serde_json::Map::new();
            row.insert("size".into(), json!(r.size));
            for ((key, ..), way) in REG_WAYS.iter().zip(&r.ways) {
                if let Some(samples) = way {
                    row.insert((*key).into(), Summary::of(samples).json());
                }
            }
            Value::Object(row)
        }).collect::<Vec<_>>(),
    }))
}
