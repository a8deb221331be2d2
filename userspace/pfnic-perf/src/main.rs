//! pfnic-perf: a benchmark in the spirit of perftest (`ib_write_bw`, `ib_read_lat`, ...) for
//! pfnic, in two modes.
//!
//! With a peer (`-p PORT`, or a server address): one side of a perftest run across the wire,
//! speaking perftest's own exchange, so that the other side may be Debian's unmodified
//! perftest on rxe or another NIC ([`peer`], [`exchange`]).
//!
//! Loopback (no port, no address): two RC QPs of one process are connected to each other; QP A initiates, QP B is the target
//! (RDMA WRITE/READ) or the receiver (SEND). Every test prints perftest's table layout, plus a
//! last column: the page requests (faults) per iteration, read from the MR counters of both
//! buffers (mlx5's `page_faults`).
//!
//! Warm runs touch the buffers first, so the pages are present. `--cold` drops them with
//! `madvise(MADV_DONTNEED)` before every iteration: each message then faults its pages in,
//! on the initiator's side and on the target's.
//!
//! Bandwidth tests keep `--tx-depth` signaled work requests in flight; "BW peak" is the best
//! rate over one window of `tx-depth` completions, "BW average" the rate over the whole run.
//! Latency tests have one message in flight: RDMA WRITE and READ are timed from the post to
//! the completion, SEND as half a ping-pong round trip (A to B, then B to A), as perftest's
//! `ib_send_lat` reports it.
//!
//! `--compare` ([`compare`]) measures warm and cold side by side in one process: per
//! operation and size, interleaved warm and cold messages on the same buffers, their medians
//! and spread, faults and page request groups per iteration, and the device's cost per faulted
//! page against the guest CPU's own first touch of a dropped page, timed in the same run. It
//! prints two tables and can write them as JSON (`--json FILE`); `make bench` runs it.
//!
//! The numbers are what they are: nothing here fails on time. The tool fails (exit status 1)
//! only when the verbs fail, or a completion does not arrive within a minute.

mod cli;
mod compare;
mod counters;
mod exchange;
mod modes;
mod peer;

use counters::MrCounters;
use pfnic_cli::{errln, outln};
use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibv::{
    Buffer, CompChannel, ConnectAttr, Context, Cq, Mr, Pd, Qp, QpInitAttr, RecvWr, SendWr, Sge, Wc,
    WcOpcode, WcStatus, WrOpcode, ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE, SEND_SIGNALED,
};

/// perftest's separator line.
const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";
/// The page size buffers and slots are aligned to.
const PAGE_SIZE: usize = 4096;
/// Bytes per side that cold bandwidth runs spread their messages in flight over.
const COLD_SLOTS_BYTES: usize = 64 << 20;
/// How long a completion may take before the run is declared broken (not slow: broken).
const STUCK: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Verb {
    Write,
    Read,
    Send,
}

impl Verb {
    const ALL: [Verb; 3] = [Verb::Write, Verb::Read, Verb::Send];

    /// The operation `--compare` names `name` ([`compare::verb_name`]).
    fn of_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|&v| compare::verb_name(v) == name)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Bw,
    Lat,
}

#[derive(Clone, Copy, Debug)]
struct Test {
    verb: Verb,
    kind: Kind,
}

impl Test {
    const ALL: [Test; 6] = [
        Test::new(Verb::Write, Kind::Bw),
        Test::new(Verb::Write, Kind::Lat),
        Test::new(Verb::Read, Kind::Bw),
        Test::new(Verb::Read, Kind::Lat),
        Test::new(Verb::Send, Kind::Bw),
        Test::new(Verb::Send, Kind::Lat),
    ];

    const fn new(verb: Verb, kind: Kind) -> Self {
        Self { verb, kind }
    }

    fn name(self) -> &'static str {
        match (self.verb, self.kind) {
            (Verb::Write, Kind::Bw) => "write_bw",
            (Verb::Write, Kind::Lat) => "write_lat",
            (Verb::Read, Kind::Bw) => "read_bw",
            (Verb::Read, Kind::Lat) => "read_lat",
            (Verb::Send, Kind::Bw) => "send_bw",
            (Verb::Send, Kind::Lat) => "send_lat",
        }
    }

    /// perftest's title line.
    fn title(self) -> String {
        let verb = match self.verb {
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Send => "Send",
        };
        let kind = match self.kind {
            Kind::Bw => "BW",
            Kind::Lat => "Latency",
        };
        format!("{verb} {kind} Test")
    }
}

#[derive(Clone)]
struct Options {
    tests: Vec<Test>,
    /// The operations of `--compare`.
    verbs: Vec<Verb>,
    sizes: Vec<usize>,
    iters: usize,
    tx_depth: u32,
    odp: bool,
    cold: bool,
    device: String,
    /// `--compare`: repetitions per row, and where the JSON goes.
    reps: usize,
    json: Option<String>,
    /// `--compare`: how a message's completion is waited for; each row runs once per mode.
    waits: Vec<Wait>,
    /// `--compare --modes`: also the memory modes side by side ([`modes`]).
    modes: bool,
}

/// What the command line asks for.
enum Mode {
    Loopback(Options),
    Compare(Options),
    Peer(peer::PeerOptions),
}

/// How `--compare` waits for a message's completion.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum Wait {
    /// Spinning on the CQ: one CPU is busy while the device and the fault handlers work.
    Poll,
    /// Sleeping on a completion channel (the CQ armed): no CPU spins, and a message that
    /// completes while the process sleeps pays the interrupt and the wake-up.
    Events,
}

impl Wait {
    fn name(self) -> &'static str {
        match self {
            Wait::Poll => "poll",
            Wait::Events => "events",
        }
    }
}

/// What a test gives to its row.
enum Row {
    Bw {
        peak_mib_s: f64,
        avg_mib_s: f64,
        msg_rate_mpps: f64,
    },
    Lat(Vec<f64>),
}

/// The two connected QPs, their CQs and PD, shared by every test.
struct Bench {
    pd: Pd,
    cq_a: Cq,
    cq_b: Cq,
    qp_a: Qp,
    qp_b: Qp,
    depth: u32,
    odp: bool,
    cold: bool,
    /// The CQs' completion channel, when some wait mode sleeps on it.
    events: Option<CompChannel>,
    /// How messages wait for their completions now (the first of `--waits` unless changed).
    wait: Wait,
    /// Where the MRs' fault counters are read.
    counters: MrCounters,
}

/// One size's buffers: A's (local) and B's (remote), registered, each of `slots` messages
/// (page aligned). Message `i` uses slot `i % slots` on both sides.
struct Buffers {
    a: Arc<Buffer>,
    b: Arc<Buffer>,
    mr_a: Mr,
    mr_b: Mr,
    size: usize,
    slots: usize,
    stride: usize,
}

impl Buffers {
    /// Page faults of both MRs so far.
    fn faults(&self, counters: &MrCounters) -> io::Result<u64> {
        Ok(counters.read(&self.mr_a)?.page_faults + counters.read(&self.mr_b)?.page_faults)
    }

    /// Offset of message `i`'s slot.
    fn offset(&self, i: usize) -> usize {
        (i % self.slots) * self.stride
    }

    /// Drops the pages of message `i`'s slot on both sides (`--cold`).
    fn drop_pages(&self, i: usize) -> io::Result<()> {
        let off = self.offset(i);
        for buf in [&self.a, &self.b] {
            // SAFETY: the slot is inside the buffer's mapping (`slots * stride` bytes, page
            // aligned); MADV_DONTNEED only makes its pages read as zeros again, and the buffer
            // is only ever accessed through atomic copies, so no reference is invalidated.
            if unsafe {
                libc::madvise(
                    buf.as_ptr().add(off).cast(),
                    self.stride,
                    libc::MADV_DONTNEED,
                )
            } != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn err(msg: String) -> io::Error {
    io::Error::other(msg)
}

impl Bench {
    fn new(o: &Options) -> io::Result<Self> {
        let ctx =
            Context::open(&o.device).map_err(|e| err(format!("cannot open {}: {e}", o.device)))?;
        Self::with_context(&ctx, o)
    }

    /// The bench's QPs and CQs in `ctx`, which the caller opened (in the memory mode it chose).
    fn with_context(ctx: &Context, o: &Options) -> io::Result<Self> {
        let attr = ctx.query_device_ex()?;
        let depth = o.tx_depth.min(attr.orig_attr.max_qp_wr as u32);
        let pd = ctx.alloc_pd()?;
        let events = if o.waits.contains(&Wait::Events) {
            Some(ctx.create_comp_channel()?)
        } else {
            None
        };
        // Room for every completion in flight: the send queue's, and as many receives.
        let cq_a = ctx.create_cq(2 * depth, events.as_ref(), 0)?;
        let cq_b = ctx.create_cq(2 * depth, events.as_ref(), 0)?;
        let qp_a = pd.create_qp(&QpInitAttr::new(&cq_a, &cq_a, depth, 1))?;
        let qp_b = pd.create_qp(&QpInitAttr::new(&cq_b, &cq_b, depth, 1))?;
        let c = ConnectAttr {
            max_rd_atomic: (attr.orig_attr.max_qp_rd_atom as u32).clamp(1, 16),
            ..ConnectAttr::default()
        };
        qp_a.connect(qp_b.qp_num(), &c)?;
        qp_b.connect(qp_a.qp_num(), &c)?;
        Ok(Self {
            pd,
            cq_a,
            cq_b,
            qp_a,
            qp_b,
            depth,
            odp: o.odp,
            cold: o.cold,
            events,
            wait: o.waits.first().copied().unwrap_or(Wait::Poll),
            counters: MrCounters::of(ctx)?,
        })
    }

    /// Buffers for messages of `size` bytes. Cold bandwidth runs give every message in
    /// flight its own slot (up to [`COLD_SLOTS_BYTES`] per side), so that dropping the pages of
    /// the next message does not touch those the device is still moving.
    fn buffers(&self, size: usize, kind: Kind) -> io::Result<Buffers> {
        let access = ACCESS_LOCAL_WRITE
            | ACCESS_REMOTE_WRITE
            | ACCESS_REMOTE_READ
            | if self.odp { ACCESS_ON_DEMAND } else { 0 };
        let stride = size.next_multiple_of(PAGE_SIZE);
        let slots = if self.cold && kind == Kind::Bw {
            (self.depth as usize).min((COLD_SLOTS_BYTES / stride).max(1))
        } else {
            1
        };
        let a = Arc::new(Buffer::new(stride * slots)?);
        let b = Arc::new(Buffer::new(stride * slots)?);
        // Base pages only: a transparent huge page would fault in (and count as) one page
        // for up to 2 MiB, so faults per iteration would depend on where a buffer lands.
        a.madvise(libc::MADV_NOHUGEPAGE)?;
        b.madvise(libc::MADV_NOHUGEPAGE)?;
        if !self.cold {
            // Warm: every page present before the first message.
            a.fill(0xa5);
            b.fill(0x5a);
        }
        let mr_a = self.pd.reg_mr(&a, access)?;
        let mr_b = self.pd.reg_mr(&b, access)?;
        Ok(Buffers {
            a,
            b,
            mr_a,
            mr_b,
            size,
            slots,
            stride,
        })
    }

    /// Posts message `i` of `verb` from A's slot to B's.
    fn post(&self, verb: Verb, bufs: &Buffers, i: usize) -> io::Result<()> {
        let off = bufs.offset(i);
        let sge = [bufs.mr_a.sge(off as u64, bufs.size as u32)];
        let remote = (bufs.mr_b.addr() + off as u64, bufs.mr_b.rkey());
        post_signaled(&self.qp_a, verb, i, &sge, remote)
    }

    /// Posts a receive of message `i`'s slot of `mr` on `qp`.
    fn post_recv(qp: &Qp, mr: &Mr, bufs: &Buffers, i: usize) -> io::Result<()> {
        let sge = [mr.sge(bufs.offset(i) as u64, bufs.size as u32)];
        qp.post_recv(&[RecvWr {
            wr_id: 0,
            sg_list: &sge,
        }])
        .map_err(|e| err(format!("post_recv: {e}")))
    }

    fn run_bw(&self, verb: Verb, bufs: &Buffers, iters: usize) -> io::Result<Row> {
        let depth = self.depth as usize;
        let mut recvs_posted = 0;
        if verb == Verb::Send {
            for _ in 0..depth.min(iters) {
                Self::post_recv(&self.qp_b, &bufs.mr_b, bufs, recvs_posted)?;
                recvs_posted += 1;
            }
        }
        let mut wcs = vec![Wc::default(); depth];
        let mut received = 0;
        let post = |i| {
            if self.cold {
                bufs.drop_pages(i)?;
            }
            self.post(verb, bufs, i)
        };
        // B's side of a SEND: every receive completed, one kept ready for every send to come.
        let receive = || -> io::Result<bool> {
            if verb != Verb::Send {
                return Ok(true);
            }
            let n = self.cq_b.poll(&mut wcs);
            if let Some(bad) = wcs[..n].iter().find(|w| w.status != WcStatus::SUCCESS) {
                return Err(err(format!("receive completion {:?}", bad.status)));
            }
            received += n;
            for _ in 0..n {
                if recvs_posted < iters {
                    Self::post_recv(&self.qp_b, &bufs.mr_b, bufs, recvs_posted)?;
                    recvs_posted += 1;
                }
            }
            Ok(received >= recvs_posted)
        };
        drive_bw(&self.cq_a, iters, depth, bufs.size, post, receive)
    }

    fn run_lat(&self, verb: Verb, bufs: &Buffers, iters: usize) -> io::Result<Row> {
        let size = bufs.size;
        let sge_a = [bufs.mr_a.sge(0, size as u32)];
        let sge_b = [bufs.mr_b.sge(0, size as u32)];
        let mut samples = Vec::with_capacity(iters);
        let mut wc = [Wc::default(); 1];
        // Send completions seen while waiting for receives.
        let (mut extra_a, mut extra_b) = (0, 0);
        for i in 0..iters {
            if verb == Verb::Send {
                // Both receives ready before the clock starts; none is left over at the end
                // (a receive must not outlive its buffer's MR).
                Self::post_recv(&self.qp_b, &bufs.mr_b, bufs, 0)?;
                Self::post_recv(&self.qp_a, &bufs.mr_a, bufs, 0)?;
            }
            if self.cold {
                bufs.drop_pages(0)?;
            }
            let t0 = Instant::now();
            match verb {
                Verb::Write | Verb::Read => {
                    self.post(verb, bufs, i)?;
                    poll_cq(&self.cq_a, &mut wc, "completion")?;
                    samples.push(t0.elapsed().as_secs_f64() * 1e6);
                }
                Verb::Send => {
                    // A -> B, then B -> A: half the round trip is the latency.
                    self.qp_a
                        .post_send(&[SendWr::new(i as u64, WrOpcode::Send, &sge_a)])
                        .map_err(|e| err(format!("post_send: {e}")))?;
                    wait_for(&self.cq_b, WcOpcode::RECV, &mut extra_b, "B receive")?;
                    self.qp_b
                        .post_send(&[SendWr::new(i as u64, WrOpcode::Send, &sge_b)])
                        .map_err(|e| err(format!("post_send: {e}")))?;
                    wait_for(&self.cq_a, WcOpcode::RECV, &mut extra_a, "A receive")?;
                    samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
            }
        }
        if verb == Verb::Send {
            // Collect the send completions not seen yet: one per send, on each side.
            while extra_a < iters {
                wait_for(&self.cq_a, WcOpcode::SEND, &mut 0, "A send")?;
                extra_a += 1;
            }
            while extra_b < iters {
                wait_for(&self.cq_b, WcOpcode::SEND, &mut 0, "B send")?;
                extra_b += 1;
            }
        }
        Ok(Row::Lat(samples))
    }
}

/// Posts message `i` of `verb`, signaled, from `sge` to `remote` (address, rkey; unused by a
/// SEND).
fn post_signaled(qp: &Qp, verb: Verb, i: usize, sge: &[Sge], remote: (u64, u32)) -> io::Result<()> {
    let op = match verb {
        Verb::Write => WrOpcode::RdmaWrite,
        Verb::Read => WrOpcode::RdmaRead,
        Verb::Send => WrOpcode::Send,
    };
    let mut wr = SendWr::new(i as u64, op, sge).flags(SEND_SIGNALED);
    if verb != Verb::Send {
        wr = wr.remote(remote.0, remote.1);
    }
    qp.post_send(&[wr])
        .map_err(|e| err(format!("post_send: {e}")))
}

/// Polls `cq` for at least one completion; fails on an error completion or after [`STUCK`].
fn poll_cq(cq: &Cq, out: &mut [Wc], what: &str) -> io::Result<usize> {
    let start = Instant::now();
    loop {
        let n = cq.poll(out);
        if let Some(bad) = out[..n].iter().find(|w| w.status != WcStatus::SUCCESS) {
            return Err(err(format!(
                "{what}: completion {:?} of wr_id {}",
                bad.status, bad.wr_id
            )));
        }
        if n > 0 {
            return Ok(n);
        }
        if start.elapsed() > STUCK {
            return Err(err(format!("{what}: no completion within {STUCK:?}")));
        }
        std::hint::spin_loop();
    }
}

/// Waits for one completion of `opcode` on `cq`, counting the others (send completions
/// while a receive is awaited) in `other`.
fn wait_for(cq: &Cq, opcode: WcOpcode, other: &mut usize, what: &str) -> io::Result<()> {
    let mut wc = [Wc::default(); 1];
    loop {
        poll_cq(cq, &mut wc, what)?;
        if wc[0].opcode == opcode {
            return Ok(());
        }
        *other += 1;
    }
}

/// The nearest-rank `p` percentile (0 < p <= 1) of `sorted` (ascending, not empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    sorted[((n as f64 * p).ceil() as usize).clamp(1, n) - 1]
}

/// A bandwidth run's clock: the average over the run, and the peak over windows of
/// `window` completions.
struct Meter {
    size: usize,
    window: usize,
    start: Instant,
    done: usize,
    mark: (Instant, usize),
    peak: f64,
}

impl Meter {
    fn new(size: usize, window: usize) -> Self {
        let now = Instant::now();
        Self {
            size,
            window: window.max(1),
            start: now,
            done: 0,
            mark: (now, 0),
            peak: 0.0,
        }
    }

    /// `n` more messages completed.
    fn add(&mut self, n: usize) {
        self.done += n;
        if self.done - self.mark.1 >= self.window {
            let now = Instant::now();
            let secs = now.duration_since(self.mark.0).as_secs_f64();
            self.peak = self
                .peak
                .max(((self.done - self.mark.1) * self.size) as f64 / secs);
            self.mark = (now, self.done);
        }
    }

    /// Fails a run that stopped moving: a minute, and another per thousand messages.
    fn check(&self, iters: usize) -> io::Result<()> {
        if self.start.elapsed() > STUCK * (1 + iters as u32 / 1000) {
            return Err(err(format!(
                "{} of {iters} completions after {:?}",
                self.done,
                self.start.elapsed()
            )));
        }
        Ok(())
    }

    fn row(&self, iters: usize) -> Row {
        let secs = self.start.elapsed().as_secs_f64();
        let avg = (iters * self.size) as f64 / secs;
        let mib = (1u64 << 20) as f64;
        Row::Bw {
            peak_mib_s: self.peak.max(avg) / mib,
            avg_mib_s: avg / mib,
            msg_rate_mpps: iters as f64 / secs / 1e6,
        }
    }
}

/// The bandwidth loop of every mode: `post(i)` sends message `i`, up to `depth` are in flight,
/// their completions come to `cq`; `other` runs every round (the receiving side, when it is
/// in this process) and says whether it is done.
fn drive_bw(
    cq: &Cq,
    iters: usize,
    depth: usize,
    size: usize,
    mut post: impl FnMut(usize) -> io::Result<()>,
    mut other: impl FnMut() -> io::Result<bool>,
) -> io::Result<Row> {
    let mut wcs = vec![Wc::default(); depth];
    let mut meter = Meter::new(size, depth);
    let mut posted = 0;
    let mut other_done = false;
    while meter.done < iters || !other_done {
        while posted < iters && posted - meter.done < depth {
            post(posted)?;
            posted += 1;
        }
        if meter.done < iters {
            let n = cq.poll(&mut wcs);
            if let Some(bad) = wcs[..n].iter().find(|w| w.status != WcStatus::SUCCESS) {
                return Err(err(format!(
                    "completion {:?} of wr_id {}",
                    bad.status, bad.wr_id
                )));
            }
            meter.add(n);
        }
        other_done = other()?;
        meter.check(iters)?;
    }
    Ok(meter.row(iters))
}

fn print_header(t: Test, o: &Options, depth: u32) {
    outln!("{RESULT_LINE}");
    outln!("                    {}", t.title());
    outln!(" Device          : {}", o.device);
    outln!(" Connection type : RC, loopback (two QPs of one process)");
    if t.kind == Kind::Bw {
        outln!(" TX depth        : {depth}");
    }
    outln!(
        " Memory          : {}",
        if o.odp {
            "on-demand MRs (IBV_ACCESS_ON_DEMAND)"
        } else {
            "MRs made present at registration, not pinned"
        }
    );
    outln!(
        " Pages           : {}",
        if o.cold {
            "cold: madvise(MADV_DONTNEED) before every iteration"
        } else {
            "warm: touched before the run"
        }
    );
    outln!("{RESULT_LINE}");
    print_columns(t.kind);
}

/// perftest's column titles, and pfnic-perf's last column: page requests per iteration.
fn print_columns(kind: Kind) {
    match kind {
        Kind::Bw => outln!(
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]   faults/iter"
        ),
        Kind::Lat => outln!(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]   faults/iter"
        ),
    }
}

fn print_row(size: usize, iters: usize, row: &Row, faults: f64) {
    match row {
        Row::Bw {
            peak_mib_s,
            avg_mib_s,
            msg_rate_mpps,
        } => outln!(
            " {size:<7}    {iters:<10}       {peak_mib_s:<7.2}            {avg_mib_s:<7.2}\t\t     {msg_rate_mpps:<7.6}        {faults:<7.2}"
        ),
        Row::Lat(samples) => {
            let mut s = samples.clone();
            s.sort_by(f64::total_cmp);
            let n = s.len();
            let avg = s.iter().sum::<f64>() / n as f64;
            let var = s.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
            outln!(
                " {size:<7} {iters:<10}    {:<7.2}        {:<7.2}      {:<7.2}  \t       {avg:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}                 {faults:<7.2}",
                s[0],
                s[n - 1],
                s[n / 2],
                var.sqrt(),
                percentile(&s, 0.99),
                percentile(&s, 0.999),
            );
        }
    }
}

fn run(o: &Options) -> io::Result<()> {
    let bench = Bench::new(o)?;
    for &t in &o.tests {
        print_header(t, o, bench.depth);
        for &size in &o.sizes {
            let bufs = bench.buffers(size, t.kind)?;
            let before = bufs.faults(&bench.counters)?;
            let row = match t.kind {
                Kind::Bw => bench.run_bw(t.verb, &bufs, o.iters),
                Kind::Lat => bench.run_lat(t.verb, &bufs, o.iters),
            }
            .map_err(|e| err(format!("{} {size} bytes: {e}", t.name())))?;
            let faults = (bufs.faults(&bench.counters)? - before) as f64 / o.iters as f64;
            print_row(size, o.iters, &row, faults);
        }
        outln!("{RESULT_LINE}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let mode = cli::Cli::parse_mode();
    let r = match &mode {
        Mode::Loopback(o) => run(o),
        Mode::Compare(o) => compare::run(o),
        Mode::Peer(o) => peer::run(o),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("pfnic-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
