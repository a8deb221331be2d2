//! `--compare --modes`: the memory modes side by side in one process (docs/uapi.md, "Memory
//! modes"; docs/benchmarks.md): the seeds' comparison of what pinning costs and what not
//! pinning costs.
//!
//! Each mode gets a context of its own (`SET_MEM_MODE`), with the same two connected QPs as
//! `--compare`, and runs every operation and size:
//!
//! - **warm**: every page present and registered, one untimed message, then `iters` messages,
//!   one in flight, each timed from the post to its completion(s);
//! - **cold**: `sva` drops both buffers before every message (the device faults them in:
//!   on-demand MRs); `pinned` drops both buffers, then registers them again, and the
//!   registration (pinning the pages back in) is timed in with the message: that is what a
//!   pinned first use costs.
//!
//! Then the registration itself: `ibv_reg_mr` of a buffer whose pages are present, for the
//! sizes of [`REG_SIZES`], in the `sva` mode with an on-demand MR (nothing happens until
//! the device touches a page), in the `sva` mode with an ordinary MR (made present by
//! prefetch, never pinned) and in the `pinned` mode (pinned, mapped, written into the
//! device's translation table).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::compare::{drop_both, micros, num, size_name, spread, verb_name, Summary};
use crate::{err, Bench, Buffers, Kind, Options, Verb};
use pfnic_verbs::{
    Buffer, Context, MemMode, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
};

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

/// How registering `size` bytes went in each way.
struct RegRow {
    size: usize,
    /// `sva`, on-demand MR.
    odp: Vec<f64>,
    /// `sva`, ordinary MR (populated by prefetch).
    sva: Vec<f64>,
    pinned: Vec<f64>,
}

/// A context of `o.device` in `mode`, or `None` (with a note) where the platform cannot run it.
fn open_in(o: &Options, mode: MemMode) -> io::Result<Option<Context>> {
    let ctx = Context::open(o.device)
        .map_err(|e| err(format!("cannot open /dev/pfnic{}: {e}", o.device)))?;
    match ctx.set_mem_mode(mode) {
        Ok(()) => Ok(Some(ctx)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            println!("note: the {} mode is not available here: {e}", mode.name());
            Ok(None)
        }
        Err(e) => Err(err(format!("set_mem_mode({}): {e}", mode.name()))),
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
    println!();
    println!(
        "Memory modes, one process, a context each: sva (on-demand MRs, nothing pinned) and \
         pinned (ibv_reg_mr pins); {} repetitions x {} iterations; message time in us, median \
         [p10..p90]; cold: sva drops both buffers, pinned drops and registers them again \
         (the registration counted in)",
        o.reps, o.iters
    );
    println!(
        "{:<6} {:>8}  {:>24}  {:>24}  {:>10}  {:>26}  {:>26}",
        "op", "size", "sva warm", "pinned warm", "sva/pinned", "sva cold", "pinned cold"
    );
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
            // Bandwidth of SVA warm as a share of pinned warm (the 97% target).
            let ratio = match (find(MemMode::Sva), find(MemMode::Pinned)) {
                (Some(s), Some(p)) => {
                    let sva = mib_s(size, Summary::of(&s.warm).median);
                    let pinned = mib_s(size, Summary::of(&p.warm).median);
                    format!("{}%", num(100.0 * sva / pinned, 0))
                }
                _ => "-".into(),
            };
            println!(
                "{:<6} {:>8}  {:>24}  {:>24}  {:>10}  {:>26}  {:>26}",
                verb_name(*verb),
                size_name(size),
                cell(MemMode::Sva, false),
                cell(MemMode::Pinned, false),
                ratio,
                cell(MemMode::Sva, true),
                cell(MemMode::Pinned, true),
            );
        }
    }
}

fn print_reg(rows: &[RegRow]) {
    println!();
    println!(
        "Registration (ibv_reg_mr of present pages, us, median of {REG_REPS}): sva-odp = an \
         on-demand MR, sva = an ordinary MR made present by prefetch, pinned = pinned, mapped \
         and written into the device's table"
    );
    println!(
        "{:>8}  {:>12}  {:>12}  {:>12}  {:>16}",
        "size", "sva-odp", "sva", "pinned", "sva-odp/pinned"
    );
    for r in rows {
        let m = |v: &[f64]| Summary::of(v).median;
        let ratio = m(&r.odp) / m(&r.pinned);
        println!(
            "{:>8}  {:>12}  {:>12}  {:>12}  {:>15}%",
            size_name(r.size),
            num(m(&r.odp), 1),
            num(m(&r.sva), 1),
            num(m(&r.pinned), 1),
            num(100.0 * ratio, 2)
        );
    }
}

/// Runs the modes comparison: prints its tables and returns its JSON.
pub(crate) fn run(o: &Options) -> io::Result<Value> {
    let mut rows = Vec::new();
    let mut contexts = Vec::new();
    for mode in [MemMode::Sva, MemMode::Pinned] {
        let Some(ctx) = open_in(o, mode)? else {
            continue;
        };
        let bench = Bench::with_context(
            &ctx,
            &Options {
                odp: mode == MemMode::Sva,
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
    if let (Some(sva), Some(pinned)) = (ctx_of(MemMode::Sva), ctx_of(MemMode::Pinned)) {
        for size in REG_SIZES {
            let buf = Arc::new(Buffer::new(size)?);
            buf.madvise(libc::MADV_NOHUGEPAGE)?;
            reg.push(RegRow {
                size,
                odp: time_reg(sva, &buf, ACCESS | ACCESS_ON_DEMAND)?,
                sva: time_reg(sva, &buf, ACCESS)?,
                pinned: time_reg(pinned, &buf, ACCESS)?,
            });
        }
        print_reg(&reg);
    } else {
        println!("note: registration is compared only where both modes run");
    }
    Ok(json!({
        "rows": rows.iter().map(mode_json).collect::<Vec<_>>(),
        "registration": reg.iter().map(|r| json!({
            "size": r.size,
            "sva_odp_us": Summary::of(&r.odp).json(),
            "sva_us": Summary::of(&r.sva).json(),
            "pinned_us": Summary::of(&r.pinned).json(),
        })).collect::<Vec<_>>(),
    }))
}
