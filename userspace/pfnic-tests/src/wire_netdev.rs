//! The port's netdev (docs/wire.md, "Ethernet queues"): in the wire guest, each of the two
//! pfnics has a Linux netdev on its port, and raw Ethernet frames sent on one arrive on the
//! other across the link, byte for byte, through both devices' transmit and receive rings.
//! Packet sockets (`AF_PACKET`) send and receive them, so the guest's own IP stack (one
//! kernel owning both addresses would route between them locally) stays out of the way.

use pfnic_cli::outln;
use std::io;
use std::time::{Duration, Instant};

use crate::common::sh;
use crate::ktap::{Failure, Test, TestResult};
use crate::verbs_common::fail;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_wire_netdev_frames",
        run: test_wire_netdev_frames,
    },
    &Test {
        name: "test_wire_netdev_filter",
        run: test_wire_netdev_filter,
    },
    &Test {
        name: "test_wire_netdev_missed",
        run: test_wire_netdev_missed,
    },
    &Test {
        name: "test_wire_netdev_napi",
        run: test_wire_netdev_napi,
    },
];

/// An EtherType for local experiments (IEEE 802 "local experimental 1"): no stack takes it.
const ETH_P_TEST: u16 = 0x88b5;
/// How long a frame may take across the link (TCG on a loaded host).
const FRAME_WAIT: Duration = Duration::from_secs(5);

/// One port's netdev.
pub(crate) struct Netdev {
    pub(crate) name: String,
    mac: [u8; 6],
    ifindex: i32,
}

impl Netdev {
    fn stat(&self, counter: &str) -> Result<u64, Failure> {
        let path = format!("/sys/class/net/{}/statistics/{counter}", self.name);
        Ok(std::fs::read_to_string(&path)?.trim().parse()?)
    }

    pub(crate) fn carrier(&self) -> bool {
        std::fs::read_to_string(format!("/sys/class/net/{}/carrier", self.name))
            .is_ok_and(|c| c.trim() == "1")
    }
}

impl Netdev {
    /// The interface's MAC.
    pub(crate) fn mac(&self) -> [u8; 6] {
        self.mac
    }
}

/// The netdev the RDMA core ties port 1 of RDMA device `ib` to (`rdma link show`), or `None`
/// for a port without one (no wire).
pub(crate) fn netdev_of(ib: &str) -> Result<Option<Netdev>, Failure> {
    let out = crate::rdma_core::rdma(&["-j", "link", "show", &format!("{ib}/1")])?;
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .map_err(|e| fail(&format!("rdma link show {ib}/1: JSON"), e))?;
    let Some(name) = v
        .as_array()
        .and_then(|a| a.first())
        .and_then(|l| l.get("netdev"))
        .and_then(|n| n.as_str())
    else {
        return Ok(None);
    };
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let text = std::fs::read_to_string(dir.join("address"))?;
    let mut mac = [0u8; 6];
    for (i, b) in text.trim().split(':').enumerate() {
        *mac.get_mut(i)
            .ok_or_else(|| Failure::Fail(format!("{name}'s address {text:?}")))? =
            u8::from_str_radix(b, 16)?;
    }
    Ok(Some(Netdev {
        name: name.to_string(),
        mac,
        ifindex: std::fs::read_to_string(dir.join("ifindex"))?
            .trim()
            .parse()?,
    }))
}

/// The netdevs of the first two RDMA devices of pfnics (`pfnic0`, `pfnic1`: the wire
/// guest's two ports); skips unless both have one.
pub(crate) fn wire_netdevs() -> Result<[(String, Netdev); 2], Failure> {
    let mut names: Vec<String> = ibv::device_names()
        .map_err(|e| fail("ibv_get_device_list", e))?
        .into_iter()
        .filter(|n| n.starts_with("pfnic"))
        .collect();
    names.sort();
    if names.len() < 2 {
        skip!(
            "{} pfnic RDMA device(s): the wire tests need two joined by a wire",
            names.len()
        );
    }
    let mut out = Vec::new();
    for name in names.into_iter().take(2) {
        match netdev_of(&name)? {
            Some(n) => out.push((name, n)),
            None => skip!("{name}'s port has no netdev (no wire)"),
        }
    }
    out.try_into()
        .map_err(|_| Failure::Fail("two netdevs".into()))
}

/// The interface whose address is `mac`.
pub(crate) fn netdev_by_mac(mac: [u8; 6]) -> Result<Netdev, Failure> {
    let want = mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    for entry in std::fs::read_dir("/sys/class/net")? {
        let path = entry?.path();
        let addr = std::fs::read_to_string(path.join("address")).unwrap_or_default();
        if addr.trim() == want {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let ifindex = std::fs::read_to_string(path.join("ifindex"))?
                .trim()
                .parse()?;
            return Ok(Netdev { name, mac, ifindex });
        }
    }
    Err(Failure::Fail(format!(
        "no netdev has the port's MAC {want}"
    )))
}

/// Waits until `dev`'s carrier is `on`.
pub(crate) fn wait_carrier(dev: &Netdev, on: bool) -> TestResult {
    let start = Instant::now();
    while dev.carrier() != on {
        if start.elapsed() > FRAME_WAIT {
            fail!(
                "{}'s carrier is not {} after {FRAME_WAIT:?}",
                dev.name,
                if on { "on" } else { "off" }
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// One netdev brought up (and down again when dropped), its carrier on.
pub(crate) struct UpNetdev<'a>(&'a Netdev);

/// `ip link set DEV up|down`.
pub(crate) fn set_link(dev: &Netdev, up: bool) -> TestResult {
    let state = if up { "up" } else { "down" };
    let (ok, out) = sh("ip", &["link", "set", &dev.name, state])?;
    check!(ok, "ip link set {} {state}: {out}", dev.name);
    Ok(())
}

/// `ip link set DEV promisc on|off`, as tcpdump does without `-p`.
fn set_promisc(dev: &Netdev, on: bool) -> TestResult {
    let state = if on { "on" } else { "off" };
    let (ok, out) = sh("ip", &["link", "set", &dev.name, "promisc", state])?;
    check!(ok, "ip link set {} promisc {state}: {out}", dev.name);
    Ok(())
}

/// A netdev made promiscuous, and not again when dropped.
struct Promiscuous<'a>(&'a Netdev);

impl<'a> Promiscuous<'a> {
    fn new(dev: &'a Netdev) -> Result<Self, Failure> {
        set_promisc(dev, true)?;
        Ok(Self(dev))
    }
}

impl Drop for Promiscuous<'_> {
    fn drop(&mut self) {
        let _ = set_promisc(self.0, false);
    }
}

impl<'a> UpNetdev<'a> {
    pub(crate) fn new(dev: &'a Netdev) -> Result<Self, Failure> {
        set_link(dev, true)?;
        let up = Self(dev);
        wait_carrier(dev, true)?;
        Ok(up)
    }
}

impl Drop for UpNetdev<'_> {
    fn drop(&mut self) {
        let _ = set_link(self.0, false);
    }
}

/// Brings the netdevs of the two pfnics up (and down again when dropped).
struct UpNetdevs([Netdev; 2]);

impl UpNetdevs {
    fn new() -> Result<Self, Failure> {
        let [(_, a), (_, b)] = wire_netdevs()?;
        let up = Self([a, b]);
        for d in &up.0 {
            set_link(d, true)?;
        }
        for d in &up.0 {
            wait_carrier(d, true)?;
        }
        Ok(up)
    }
}

impl Drop for UpNetdevs {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = set_link(d, false);
        }
    }
}

/// A packet socket bound to one interface, for frames of [`ETH_P_TEST`].
struct PacketSocket(std::os::fd::OwnedFd, String);

impl PacketSocket {
    fn new(dev: &Netdev) -> Result<Self, Failure> {
        let proto = ETH_P_TEST.to_be();
        // SAFETY: Plain socket creation; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        if fd < 0 {
            return Err(fail("socket(AF_PACKET)", io::Error::last_os_error()));
        }
        let sock = Self(
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) },
            dev.name.clone(),
        );
        // Room for a whole burst before the test reads it (the default, about 200 KiB, holds
        // some 60 full frames: the socket would drop the rest, not the device).
        let rcvbuf: i32 = 8 << 20;
        // SAFETY: `rcvbuf` is a valid `int` option value.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&raw const rcvbuf).cast(),
                std::mem::size_of::<i32>() as u32,
            )
        };
        if r != 0 {
            return Err(fail("SO_RCVBUFFORCE", io::Error::last_os_error()));
        }
        // SAFETY: An all-zero `sockaddr_ll` is valid; the fields set below complete it.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = dev.ifindex;
        // SAFETY: `sll` is a valid `sockaddr_ll` of the size given.
        let r = unsafe {
            libc::bind(
                fd,
                (&raw const sll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r != 0 {
            return Err(fail("bind(AF_PACKET)", io::Error::last_os_error()));
        }
        Ok(sock)
    }

    /// The interface's receive counters and flags, for a failure's message: where a frame
    /// that did not arrive was counted, and whether the interface was promiscuous.
    fn interface_state(&self) -> String {
        let read = |f: &str| {
            std::fs::read_to_string(format!("/sys/class/net/{}/{f}", self.1))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|e| e.to_string())
        };
        format!(
            "{}: rx_packets {}, rx_missed_errors {}, rx_dropped {}, rx_errors {}, flags {}",
            self.1,
            read("statistics/rx_packets"),
            read("statistics/rx_missed_errors"),
            read("statistics/rx_dropped"),
            read("statistics/rx_errors"),
            read("flags")
        )
    }

    fn fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.0)
    }

    fn send(&self, frame: &[u8]) -> Result<(), Failure> {
        // SAFETY: `frame` is valid for reading its length.
        let n = unsafe { libc::send(self.fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n != frame.len() as isize {
            return Err(fail(
                &format!("send of a {}-byte frame", frame.len()),
                io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// Sends `frame`, waiting while the interface's queue is full (`ENOBUFS`: a sender
    /// faster than the link).
    fn send_paced(&self, frame: &[u8]) -> Result<(), Failure> {
        let deadline = Instant::now() + FRAME_WAIT;
        loop {
            // SAFETY: `frame` is valid for reading its length.
            let n = unsafe { libc::send(self.fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n == frame.len() as isize {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOBUFS) || Instant::now() > deadline {
                return Err(fail(&format!("send of a {}-byte frame", frame.len()), e));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next frame the interface received (not one it sent), or `None` after `wait`.
    fn recv(&self, wait: Duration) -> Result<Option<Vec<u8>>, Failure> {
        let deadline = Instant::now() + wait;
        let mut buf = vec![0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: One valid `pollfd`.
            let r = unsafe { libc::poll(&raw mut pfd, 1, ms) };
            if r < 0 {
                return Err(fail("poll", io::Error::last_os_error()));
            }
            if r == 0 {
                return Ok(None);
            }
            // SAFETY: As above, zeroed then filled by the kernel.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` and `from` are valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&raw mut from).cast(),
                    &raw mut len,
                )
            };
            if n < 0 {
                return Err(fail("recvfrom", io::Error::last_os_error()));
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(buf[..n as usize].to_vec()));
        }
    }
}

/// A test frame of `len` bytes (14 at least) from `src` to `dst`, its payload numbered `seq`.
fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETH_P_TEST.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes()[..(len - 14).min(4)]);
    for i in 4..len.saturating_sub(14) {
        f.push((i as u32).wrapping_mul(7).wrapping_add(seq) as u8);
    }
    f
}

/// Sends `frames` on `tx` and checks that `rx` receives each, in order and unchanged.
fn expect_frames(
    tx: &PacketSocket,
    rx: &PacketSocket,
    frames: &[Vec<u8>],
    what: &str,
) -> TestResult {
    for f in frames {
        tx.send(f)?;
    }
    for (i, f) in frames.iter().enumerate() {
        let Some(got) = rx.recv(FRAME_WAIT)? else {
            fail!(
                "{what}: frame {i} of {} ({} bytes) never arrived ({})",
                frames.len(),
                f.len(),
                rx.interface_state()
            );
        };
        if got != *f {
            let first = got.iter().zip(f).position(|(a, b)| a != b);
            fail!(
                "{what}: frame {i} arrived as {} bytes, sent {} (first difference at {first:?}; \
                 {})",
                got.len(),
                f.len(),
                rx.interface_state()
            );
        }
    }
    Ok(())
}

/// Frames of every size from a bare header to a full 1514-byte frame cross the link in both
/// directions unchanged, then 600 full frames in bursts of 100 (more than the 128-descriptor
/// rings hold, so both wrap); the netdevs' counters count them.
fn test_wire_netdev_frames() -> TestResult {
    let up = UpNetdevs::new()?;
    let [a, b] = &up.0;
    let (sa, sb) = (PacketSocket::new(a)?, PacketSocket::new(b)?);
    let (tx0, rx0) = (a.stat("tx_packets")?, b.stat("rx_packets")?);

    let sizes = [
        14, 15, 42, 60, 61, 64, 127, 128, 1000, 1499, 1500, 1513, 1514,
    ];
    let ab: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(b.mac, a.mac, i as u32, n))
        .collect();
    expect_frames(&sa, &sb, &ab, &format!("{} -> {}", a.name, b.name))?;
    let ba: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(a.mac, b.mac, 100 + i as u32, n))
        .collect();
    expect_frames(&sb, &sa, &ba, &format!("{} -> {}", b.name, a.name))?;

    for burst in 0..6u32 {
        let frames: Vec<_> = (0..100)
            .map(|i| frame(b.mac, a.mac, 1000 + burst * 100 + i, 1514))
            .collect();
        expect_frames(&sa, &sb, &frames, &format!("burst {burst}"))?;
    }
    let sent = a.stat("tx_packets")? - tx0;
    let received = b.stat("rx_packets")? - rx0;
    let want = (sizes.len() + 600) as u64;
    check!(
        sent >= want,
        "{} counts {sent} frames sent, want at least {want}",
        a.name
    );
    check!(
        received >= want,
        "{} counts {received} frames received, want at least {want}",
        b.name
    );
    check_eq!(a.stat("tx_errors")?, 0);
    check_eq!(b.stat("rx_errors")?, 0);
    Ok(())
}

/// A port's netdev receives frames for its MAC, broadcast and multicast, and not frames for
/// another host's MAC (the device filters them out, as a NIC that is not promiscuous does);
/// made promiscuous (`ip link set DEV promisc on`, what tcpdump does without `-p`) it
/// receives those too, and filters them again once it is not.
fn test_wire_netdev_filter() -> TestResult {
    let up = UpNetdevs::new()?;
    let [a, b] = &up.0;
    let (sa, sb) = (PacketSocket::new(a)?, PacketSocket::new(b)?);
    let other = [0x02, 0, 0, 0, 0, 0x99];
    sa.send(&frame(other, a.mac, 1, 60))?;
    if let Some(f) = sb.recv(Duration::from_millis(500))? {
        fail!(
            "{} received a frame for another MAC: {:02x?}",
            b.name,
            &f[..14.min(f.len())]
        );
    }
    let bcast = frame([0xff; 6], a.mac, 2, 60);
    let mcast = frame([0x01, 0x00, 0x5e, 0, 0, 1], a.mac, 3, 60);
    expect_frames(&sa, &sb, &[bcast, mcast], "broadcast and multicast")?;
    // The frame for another MAC was dropped, not delayed: the next one is the unicast below.
    expect_frames(
        &sa,
        &sb,
        &[frame(b.mac, a.mac, 4, 60)],
        "unicast after the filtered frame",
    )?;
    let promisc = Promiscuous::new(b)?;
    expect_frames(
        &sa,
        &sb,
        &[frame(other, a.mac, 5, 60), frame(b.mac, a.mac, 6, 60)],
        "another MAC's frame, promiscuous",
    )?;
    drop(promisc);
    sa.send(&frame(other, a.mac, 7, 60))?;
    expect_frames(
        &sa,
        &sb,
        &[frame(b.mac, a.mac, 8, 60)],
        "unicast after promiscuous mode ended",
    )
}

/// Frames sent faster than the receiver takes them: each frame that left one port either
/// reaches the other's packet socket, in order, or is counted there, as dropped by the stack
/// (`rx_dropped`) or missed by the device for want of a posted buffer (`rx_missed_errors`,
/// the device's `ETH_RX_DROPPED`); none goes uncounted. Whether any is missed depends on how
/// fast the guest's CPUs are (none, mostly: the driver reposts as fast as the device fills):
/// the test reports it.
fn test_wire_netdev_missed() -> TestResult {
    const FRAMES: u32 = 2000;
    let up = UpNetdevs::new()?;
    let [a, b] = &up.0;
    let (sa, sb) = (PacketSocket::new(a)?, PacketSocket::new(b)?);
    let n = burst(a, b, &sa, &sb, FRAMES)?;
    outln!(
        "# {} frames sent, {} received, {} missed by the device, {} dropped by the stack",
        n.sent,
        n.received,
        n.missed,
        n.dropped
    );
    check!(n.sent > 0, "{} sent none of {FRAMES} frames", a.name);
    check_eq!(n.received + n.missed + n.dropped, n.sent);
    Ok(())
}

/// What became of a burst of frames from one netdev to the other.
struct Burst {
    sent: u64,
    received: u64,
    missed: u64,
    dropped: u64,
}

/// Sends `frames` numbered 60-byte frames from `a` to `b` as fast as `a`'s queue takes them,
/// and receives what arrives (each in order, unchanged); the receiver's counters say what
/// became of the others.
fn burst(
    a: &Netdev,
    b: &Netdev,
    sa: &PacketSocket,
    sb: &PacketSocket,
    frames: u32,
) -> Result<Burst, Failure> {
    let tx0 = a.stat("tx_packets")?;
    let (dropped0, missed0) = (b.stat("rx_dropped")?, b.stat("rx_missed_errors")?);
    for i in 0..frames {
        sa.send_paced(&frame(b.mac, a.mac, i, 60))?;
    }
    let (mut received, mut next) = (0u64, 0u32);
    while let Some(f) = sb.recv(Duration::from_secs(2))? {
        let seq = u32::from_be_bytes(f[14..18].try_into()?);
        check!(
            seq >= next && seq < frames,
            "frame {seq} arrived after frame {}: out of order or repeated",
            next.wrapping_sub(1)
        );
        check!(
            f == frame(b.mac, a.mac, seq, 60),
            "frame {seq} arrived changed"
        );
        next = seq + 1;
        received += 1;
    }
    Ok(Burst {
        sent: a.stat("tx_packets")? - tx0,
        received,
        missed: b.stat("rx_missed_errors")? - missed0,
        dropped: b.stat("rx_dropped")? - dropped0,
    })
}

/// The kernel threads of `dev`'s NAPI contexts in threaded mode (`napi/DEV-ID`).
fn napi_threads(dev: &Netdev) -> Result<Vec<String>, Failure> {
    let prefix = format!("napi/{}-", dev.name);
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path().join("comm");
        // A process that exits meanwhile has no comm any more.
        if let Ok(comm) = std::fs::read_to_string(&path) {
            if comm.trim_end().starts_with(&prefix) {
                found.push(comm.trim_end().to_string());
            }
        }
    }
    Ok(found)
}

/// A netdev's NAPI threaded mode, put back when dropped.
struct Threaded<'a>(&'a Netdev, String);

impl<'a> Threaded<'a> {
    fn set(dev: &'a Netdev, on: bool) -> Result<Self, Failure> {
        let path = format!("/sys/class/net/{}/threaded", dev.name);
        let before = std::fs::read_to_string(&path)?.trim().to_string();
        std::fs::write(&path, if on { "1" } else { "0" })
            .map_err(|e| fail(&format!("write {path}"), e))?;
        Ok(Self(dev, before))
    }
}

impl Drop for Threaded<'_> {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/sys/class/net/{}/threaded", self.0.name), &self.1);
    }
}

/// The receiver's netdev polls its queues with NAPI: switched to threaded NAPI
/// (`/sys/class/net/DEV/threaded`), it has a kernel thread `napi/DEV-ID`, which a driver
/// without a NAPI context does not get; frames sent across the wire arrive in order, every
/// one accounted for (received, or missed by the device, or dropped by the stack), polled
/// by that thread and then, threaded mode off again, in softirq context.
fn test_wire_netdev_napi() -> TestResult {
    const FRAMES: u32 = 300;
    let up = UpNetdevs::new()?;
    let [a, b] = &up.0;
    let (sa, sb) = (PacketSocket::new(a)?, PacketSocket::new(b)?);
    for threaded in [true, false] {
        let mode = Threaded::set(b, threaded)?;
        if threaded {
            let threads = napi_threads(b)?;
            check!(
                threads.len() == 1,
                "{} in threaded NAPI has the threads {threads:?}, want one",
                b.name
            );
            outln!("# {}: threaded NAPI in {}", b.name, threads[0]);
        }
        let n = burst(a, b, &sa, &sb, FRAMES)?;
        outln!(
            "# threaded {threaded}: {} frames sent, {} received, {} missed, {} dropped",
            n.sent,
            n.received,
            n.missed,
            n.dropped
        );
        check!(
            n.received > 0,
            "{} received none of {} frames",
            b.name,
            n.sent
        );
        check_eq!(n.received + n.missed + n.dropped, n.sent);
        drop(mode);
    }
    Ok(())
}
