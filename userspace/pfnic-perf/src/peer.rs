//! pfnic-perf against a peer on the wire: one side of a perftest run, the other side being
//! pfnic-perf or Debian's unmodified `ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_write_lat`, `ib_read_lat` or `ib_send_lat` on another machine. The out-of-band
//! exchange is perftest's ([`crate::exchange`]); the traffic, the barriers and the reports
//! are where perftest has them, test by test:
//!
//! | test | before the traffic | after it |
//! |---|---|---|
//! | write_bw, read_bw | keys, connect, 2 barriers | barrier, client's report to the server, close |
//! | send_bw | keys, connect, 2 barriers, receives posted, barrier | close |
//! | write_lat | keys, connect, 3 barriers | nothing |
//! | read_lat | keys, connect, 3 barriers | close (the server closes at once) |
//! | send_lat | keys, connect, 2 barriers, receives posted, barrier | close |
//!
//! The client drives the half-duplex tests and the server of a WRITE or READ test is passive
//! (it prints the client's report). In the latency tests the client sends first; `write_lat`
//! is a ping-pong of RDMA WRITEs whose last byte carries the iteration count, which each side
//! polls for in its own memory.
//!
//! The buffer is two page-aligned halves of the message size: the first is this side's
//! source (and a READ's destination), the second the one the peer targets (and where
//! receives land).

use pfnic_cli::outln;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use ibv::{
    Buffer, ConnectAttr, Context, Cq, GlobalRoute, Mr, Pd, Qp, QpInitAttr, RecvWr, Wc, WcOpcode,
    ACCESS_LOCAL_WRITE, ACCESS_ON_DEMAND, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

use crate::counters::MrCounters;
use crate::exchange::{self, BwReport, Comm, Dest};
use crate::{err, poll_cq, print_row, Kind, Meter, Row, Test, Verb, PAGE_SIZE, RESULT_LINE, STUCK};

/// perftest's defaults for a QP's connection (`ctx_modify_qp_to_rtr/rts`).
const MIN_RNR_TIMER: u32 = 12;
/// Incoming READs offered to the peer, at most (perftest's `MAX_OUT_READ_HERMON`).
const MAX_OUT_READS: u32 = 16;

pub struct PeerOptions {
    pub test: Test,
    /// The server's address; `None`: this side is the server.
    pub host: Option<String>,
    pub port: u16,
    pub size: usize,
    pub iters: usize,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub gid_index: u32,
    /// The local ACK timeout, 4.096 us * 2^N (perftest's -u; its default 14, 67 ms).
    pub qp_timeout: u32,
    pub odp: bool,
    pub device: String,
}

/// This side's verbs objects.
struct Side {
    // Field order is drop order: the QP before its CQ, the MR before its PD.
    qp: Qp,
    cq: Cq,
    mr: Mr,
    _pd: Pd,
    buf: Arc<Buffer>,
    /// Offset of the half the peer targets.
    target: usize,
    size: usize,
    depth: usize,
    rx: usize,
    my: Dest,
    counters: MrCounters,
}

impl Side {
    /// Posts message `i` of `verb` from the source half to the peer's `rem`.
    fn post(&self, verb: Verb, rem: &Dest, i: usize) -> io::Result<()> {
        let sge = [self.mr.sge(0, self.size as u32)];
        crate::post_signaled(&self.qp, verb, i, &sge, (rem.vaddr, rem.rkey))
    }

    /// Posts a receive into the target half.
    fn post_recv(&self, i: usize) -> io::Result<()> {
        let sge = [self.mr.sge(self.target as u64, self.size as u32)];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: i as u64,
                sg_list: &sge,
            }])
            .map_err(|e| err(format!("post_recv: {e}")))
    }

    /// Waits for a completion of `opcode`, counting the others in `other`.
    fn wait_for(&self, opcode: WcOpcode, other: &mut usize) -> io::Result<()> {
        crate::wait_for(&self.cq, opcode, other, "completion")
    }

    fn faults(&self) -> io::Result<u64> {
        Ok(self.counters.read(&self.mr)?.page_faults)
    }
}

fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: `b` is a valid, writable 4-byte buffer for the duration of the call.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 4 {
        u32::from_ne_bytes(b) & 0xff_ffff
    } else {
        // No entropy source: any PSN works, it only needs to differ between runs.
        (std::process::id() ^ Instant::now().elapsed().subsec_nanos()) & 0xff_ffff
    }
}

/// Opens the device and creates this side's objects; the QP is not connected yet.
fn open(o: &PeerOptions) -> io::Result<(Side, u32)> {
    let ctx =
        Context::open(&o.device).map_err(|e| err(format!("cannot open {}: {e}", o.device)))?;
    let port = ctx.query_port(1)?;
    let gid = ctx
        .query_gid(1, o.gid_index)
        .map_err(|e| err(format!("GID index {}: {e}", o.gid_index)))?;
    if gid == [0; 16] {
        return Err(err(format!(
            "GID {} of {} is empty: give the port's netdev an IPv4 address",
            o.gid_index, o.device
        )));
    }
    let attr = ctx.query_device_ex()?;
    let max_wr = attr.orig_attr.max_qp_wr as u32;
    let depth = o.tx_depth.min(max_wr).max(1);
    let rx = o.rx_depth.min(max_wr).min(o.iters as u32).max(1);
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(depth + rx, None, 0)?;
    let mut init = QpInitAttr::new(&cq, &cq, depth, 1);
    init.cap.max_recv_wr = rx;
    let qp = pd.create_qp(&init)?;
    let stride = o.size.next_multiple_of(PAGE_SIZE);
    let buf = Arc::new(Buffer::new(2 * stride)?);
    // Present before the run, as perftest's buffers are (it writes them at setup).
    buf.fill(0);
    let access = ACCESS_LOCAL_WRITE
        | ACCESS_REMOTE_WRITE
        | ACCESS_REMOTE_READ
        | if o.odp { ACCESS_ON_DEMAND } else { 0 };
    let mr = pd.reg_mr(&buf, access)?;
    let out_reads = (attr.orig_attr.max_qp_rd_atom as u32).clamp(1, MAX_OUT_READS);
    let my = Dest {
        lid: port.lid,
        out_reads: out_reads as u16,
        qpn: qp.qp_num(),
        psn: random_psn(),
        rkey: mr.rkey(),
        vaddr: mr.addr() + stride as u64,
        gid,
        srqn: 0,
    };
    let side = Side {
        qp,
        cq,
        mr,
        _pd: pd,
        buf,
        target: stride,
        size: o.size,
        depth: depth as usize,
        rx: rx as usize,
        my,
        counters: MrCounters::of(&ctx)?,
    };
    Ok((side, port.active_mtu))
}

/// perftest's address lines (`ctx_print_pingpong_data`).
fn print_dest(which: &str, d: &Dest, verb: Verb) {
    let mut line = format!(
        " {which} address: LID {:#06x} QPN {:#08x} PSN {:#08x}",
        d.lid, d.qpn, d.psn
    );
    if verb == Verb::Read {
        line += &format!(" OUT {:#06x}", d.out_reads);
    }
    if verb != Verb::Send {
        line += &format!(" RKey {:#010x} VAddr {:#018x}", d.rkey, d.vaddr);
    }
    outln!("{line}");
    let gid: Vec<String> = d.gid.iter().map(|b| format!("{b:02}")).collect();
    outln!(" GID: {}", gid.join(":"));
}

fn print_table_header(kind: Kind) {
    outln!("{RESULT_LINE}");
    crate::print_columns(kind);
}

/// Runs `o.test` against the peer.
pub fn run(o: &PeerOptions) -> io::Result<()> {
    let t = o.test;
    let server = o.host.is_none();
    let (side, local_mtu) = open(o)?;
    if server {
        outln!("\n************************************");
        outln!("* Waiting for client to connect... *");
        outln!("************************************");
    }
    let mut comm = match &o.host {
        Some(h) => Comm::connect(h, o.port)?,
        None => Comm::accept(o.port)?,
    };
    let peer_version = comm.versions()?;
    comm.sys_data()?;
    let mtu = comm.mtu(local_mtu)?;

    outln!("{RESULT_LINE}");
    outln!("                    {}", t.title());
    outln!(" Device          : {}", o.device);
    outln!(
        " Connection type : RC, {} of a perftest exchange (version {}, peer {peer_version})",
        if server { "server" } else { "client" },
        exchange::VERSION
    );
    match t.kind {
        Kind::Bw => outln!(" TX depth        : {}", side.depth),
        Kind::Lat => outln!(" TX depth        : 1"),
    }
    if t.verb == Verb::Send {
        outln!(" RX depth        : {}", side.rx);
    }
    outln!(" Mtu             : {}[B]", 128u32 << mtu);
    outln!(" Link type       : Ethernet");
    outln!(" GID index       : {}", o.gid_index);
    outln!(
        " Memory          : {}",
        if o.odp {
            "on-demand MR (IBV_ACCESS_ON_DEMAND)"
        } else {
            "MR made present at registration, not pinned"
        }
    );
    outln!("{RESULT_LINE}");

    let my = side.my;
    let rem = comm.hand_shake(&my)?;
    if is_v4_mapped(&my.gid) != is_v4_mapped(&rem.gid) {
        return Err(err(
            "the peer's GID and ours are of different IP versions: use -x with an IPv4 GID on both sides".into(),
        ));
    }
    let connect = ConnectAttr {
        path_mtu: mtu,
        grh: Some(GlobalRoute {
            dgid: rem.gid,
            sgid_index: o.gid_index as u8,
            hop_limit: 0xff,
            traffic_class: 0,
            flow_label: 0,
        }),
        sq_psn: my.psn,
        rq_psn: rem.psn,
        max_rd_atomic: u32::from(rem.out_reads).clamp(1, u32::from(my.out_reads)),
        max_dest_rd_atomic: Some(u32::from(my.out_reads)),
        min_rnr_timer: MIN_RNR_TIMER,
        timeout: o.qp_timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        ..ConnectAttr::default()
    };
    side.qp
        .connect(rem.qpn, &connect)
        .map_err(|e| err(format!("connecting to QP {:#x}: {e}", rem.qpn)))?;
    comm.hand_shake(&my)?;
    print_dest("local", &my, t.verb);
    comm.hand_shake(&my)?;
    print_dest("remote", &rem, t.verb);

    let faults_before = side.faults()?;
    let iters = o.iters;
    let faults = |side: &Side| -> io::Result<f64> {
        Ok((side.faults()? - faults_before) as f64 / iters as f64)
    };
    match (t.kind, t.verb, server) {
        (Kind::Bw, Verb::Write | Verb::Read, false) => {
            print_table_header(Kind::Bw);
            let row = client_bw(&side, t.verb, &rem, iters)?;
            print_row(o.size, iters, &row, faults(&side)?);
            outln!("{RESULT_LINE}");
            comm.hand_shake(&my)?;
            let Row::Bw {
                peak_mib_s,
                avg_mib_s,
                msg_rate_mpps,
            } = row
            else {
                unreachable!("a bandwidth run gives a bandwidth row")
            };
            comm.bw_reports(&BwReport {
                size: o.size as u64,
                iters: iters as u64,
                bw_peak: peak_mib_s,
                bw_avg: avg_mib_s,
                msg_rate: msg_rate_mpps,
            })?;
            comm.close(&my)
        }
        (Kind::Bw, Verb::Write | Verb::Read, true) => {
            print_table_header(Kind::Bw);
            // Passive: the client's traffic, then its report.
            comm.hand_shake(&my)?;
            let r = comm.bw_reports(&BwReport::default())?;
            let row = Row::Bw {
                peak_mib_s: r.bw_peak,
                avg_mib_s: r.bw_avg,
                msg_rate_mpps: r.msg_rate,
            };
            print_row(r.size as usize, r.iters as usize, &row, faults(&side)?);
            comm.close(&my)?;
            outln!("{RESULT_LINE}");
            Ok(())
        }
        (Kind::Bw, Verb::Send, _) => {
            if server {
                for i in 0..side.rx {
                    side.post_recv(i)?;
                }
            }
            print_table_header(Kind::Bw);
            comm.hand_shake(&my)?;
            let row = if server {
                server_send_bw(&side, iters)?
            } else {
                client_bw(&side, Verb::Send, &rem, iters)?
            };
            print_row(o.size, iters, &row, faults(&side)?);
            outln!("{RESULT_LINE}");
            comm.close(&my)
        }
        (Kind::Lat, Verb::Write, _) => {
            comm.hand_shake(&my)?;
            print_table_header(Kind::Lat);
            let row = write_lat(&side, &rem, iters, server)?;
            print_row(o.size, iters, &row, faults(&side)?);
            outln!("{RESULT_LINE}");
            // perftest's write_lat ends without a closing exchange.
            Ok(())
        }
        (Kind::Lat, Verb::Read, true) => {
            comm.hand_shake(&my)?;
            // Passive: nothing to measure on this side.
            comm.close(&my)?;
            outln!("{RESULT_LINE}");
            Ok(())
        }
        (Kind::Lat, Verb::Read, false) => {
            comm.hand_shake(&my)?;
            print_table_header(Kind::Lat);
            let row = read_lat(&side, &rem, iters)?;
            print_row(o.size, iters, &row, faults(&side)?);
            comm.close(&my)?;
            outln!("{RESULT_LINE}");
            Ok(())
        }
        (Kind::Lat, Verb::Send, _) => {
            for i in 0..side.rx {
                side.post_recv(i)?;
            }
            print_table_header(Kind::Lat);
            comm.hand_shake(&my)?;
            let row = send_lat(&side, &rem, iters, server)?;
            print_row(o.size, iters, &row, faults(&side)?);
            outln!("{RESULT_LINE}");
            comm.close(&my)
        }
    }
}

/// The client of a bandwidth test: `iters` messages, `depth` in flight.
fn client_bw(side: &Side, verb: Verb, rem: &Dest, iters: usize) -> io::Result<Row> {
    crate::drive_bw(
        &side.cq,
        iters,
        side.depth,
        side.size,
        |i| side.post(verb, rem, i),
        || Ok(true),
    )
}

/// The server of `send_bw`: receives `iters` messages, keeping every receive posted until
/// the last; timed from the first arrival, as perftest's server is.
fn server_send_bw(side: &Side, iters: usize) -> io::Result<Row> {
    let mut posted = side.rx;
    let mut wcs = vec![Wc::default(); side.rx];
    // The first arrival starts the clock.
    let n = poll_cq(&side.cq, &mut wcs, "receive")?;
    let mut meter = Meter::new(side.size, side.rx);
    let mut received = 0;
    let mut got = n;
    loop {
        received += got;
        meter.add(got);
        for _ in 0..got {
            if posted < iters {
                side.post_recv(posted)?;
                posted += 1;
            }
        }
        if received >= iters {
            break;
        }
        got = poll_cq(&side.cq, &mut wcs, "receive")?;
        meter.check(iters)?;
    }
    Ok(meter.row(iters))
}

/// Latency samples from the post times perftest keeps (`tposted`): the time between two
/// posts, divided by the number of trips it covers.
fn lat_row(posted: &[Instant], trips: f64) -> Row {
    Row::Lat(
        posted
            .windows(2)
            .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6 / trips)
            .collect(),
    )
}

/// Polls this side's copy of the last byte the peer writes until it is `want`.
fn wait_byte(side: &Side, want: u8) -> io::Result<()> {
    let off = side.target + side.size - 1;
    let start = Instant::now();
    let mut b = [0u8; 1];
    loop {
        side.buf.read(off, &mut b);
        if b[0] == want {
            return Ok(());
        }
        if start.elapsed() > STUCK {
            return Err(err(format!(
                "the peer's write of count {want} did not arrive within {STUCK:?} (last byte {})",
                b[0]
            )));
        }
        std::hint::spin_loop();
    }
}

/// `write_lat`: a ping-pong of RDMA WRITEs whose last byte is the sender's count.
fn write_lat(side: &Side, rem: &Dest, iters: usize, server: bool) -> io::Result<Row> {
    let (mut scnt, mut rcnt, mut ccnt) = (0usize, 0usize, 0usize);
    let mut posted = Vec::with_capacity(iters);
    let mut wc = [Wc::default(); 1];
    while scnt < iters || rcnt < iters || ccnt < iters {
        // The server waits for the client's first write before its own.
        if rcnt < iters && (!server || scnt >= 1) {
            rcnt += 1;
            wait_byte(side, rcnt as u8)?;
        }
        if scnt < iters {
            posted.push(Instant::now());
            scnt += 1;
            side.buf.write(side.size - 1, &[scnt as u8]);
            side.post(Verb::Write, rem, scnt)?;
        }
        if ccnt < iters {
            poll_cq(&side.cq, &mut wc, "write completion")?;
            ccnt += 1;
        }
    }
    Ok(lat_row(&posted, 2.0))
}

/// `read_lat`: one RDMA READ at a time.
fn read_lat(side: &Side, rem: &Dest, iters: usize) -> io::Result<Row> {
    let mut posted = Vec::with_capacity(iters);
    let mut wc = [Wc::default(); 1];
    for i in 0..iters {
        posted.push(Instant::now());
        side.post(Verb::Read, rem, i)?;
        poll_cq(&side.cq, &mut wc, "read completion")?;
    }
    Ok(lat_row(&posted, 1.0))
}

/// `send_lat`: a ping-pong of SENDs; the client sends first.
fn send_lat(side: &Side, rem: &Dest, iters: usize, server: bool) -> io::Result<Row> {
    let (mut scnt, mut rcnt, mut sends_done) = (0usize, 0usize, 0usize);
    let mut recvs_posted = side.rx;
    let mut posted = Vec::with_capacity(iters);
    while scnt < iters || rcnt < iters {
        // The client waits for a message only once it has sent its first.
        if rcnt < iters && (server || scnt >= 1) {
            side.wait_for(WcOpcode::RECV, &mut sends_done)?;
            rcnt += 1;
            if recvs_posted < iters {
                side.post_recv(recvs_posted)?;
                recvs_posted += 1;
            }
        }
        if scnt < iters {
            posted.push(Instant::now());
            side.post(Verb::Send, rem, scnt)?;
            scnt += 1;
        }
    }
    // Every send completed before the QP goes away.
    while sends_done < iters {
        side.wait_for(WcOpcode::SEND, &mut 0)?;
        sends_done += 1;
    }
    Ok(lat_row(&posted, 2.0))
}
