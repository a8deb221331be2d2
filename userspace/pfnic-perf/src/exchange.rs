//! perftest's out-of-band exchange: what `ib_write_bw` and its siblings say to each other over
//! their TCP connection before, between and after the RDMA traffic. pfnic-perf speaks it so
//! that either side of a test can be Debian's unmodified perftest (4.5-0.17, which calls
//! itself version 6.06) on another machine.
//!
//! Every exchange is symmetric and of a fixed size, without framing: the client writes its
//! part and then reads the server's, the server reads first and then writes.
//! - versions: 16 bytes, a NUL-padded version string;
//! - system data (when the peer's version is 5.32 or newer): the page size, then the cache
//!   line size, each a big-endian 32-bit int; both sides use the larger;
//! - MTU: 2 bytes, the `IBV_MTU_*` value as a decimal digit and a NUL; both sides use the
//!   smaller;
//! - keys: 108 bytes, `LID:OUT_READS:QPN:PSN:RKEY:VADDR:` and the 16 GID bytes and the SRQ
//!   number, each in hex and followed by `:`, then a NUL. The same message is exchanged
//!   again at fixed points of each test: there it is the tests' barrier;
//! - bandwidth report (versions 5.33 and newer): message size and iterations as big-endian
//!   u64, peak and average bandwidth and message rate as big-endian f64, each exchanged on
//!   its own;
//! - close: a keys exchange, then `done` and a NUL written (the peer never reads it).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, ToSocketAddrs};

/// The version pfnic-perf's exchange is that of.
pub const VERSION: &str = "6.06";
/// The oldest version whose exchange is the one implemented here (perftest refuses older
/// peers the same way).
const OLDEST_PEER: f64 = 5.70;
const VERSION_LEN: usize = 16;
const KEYS_LEN: usize = 108;
/// The page size and cache line size pfnic-perf announces (x86-64's).
const PAGE_SIZE: u32 = 4096;
const CACHE_LINE: u32 = 64;

/// One QP's side of a connection (perftest's `struct pingpong_dest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    pub lid: u16,
    /// Incoming RDMA READs this side accepts at once.
    pub out_reads: u16,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    /// Where the peer writes to or reads from.
    pub vaddr: u64,
    pub gid: [u8; 16],
    pub srqn: u32,
}

impl Dest {
    /// The 108-byte keys message.
    pub fn encode(&self) -> [u8; KEYS_LEN] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut msg = [0u8; KEYS_LEN];
        // Fixed widths: always KEYS_LEN - 1 characters and the NUL.
        msg[..s.len()].copy_from_slice(s.as_bytes());
        msg
    }

    /// Parses a keys message; anything but the exact layout is an error.
    pub fn decode(msg: &[u8]) -> io::Result<Self> {
        let bad = || {
            invalid(format!(
                "malformed keys message {:?}",
                String::from_utf8_lossy(msg)
            ))
        };
        let end = msg.iter().position(|&b| b == 0).ok_or_else(bad)?;
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| bad())?;
        let f: Vec<&str> = text.split(':').collect();
        // 6 fields, 16 GID bytes, the SRQ number, and the empty string after the last ':'.
        if f.len() != 24 || !f[23].is_empty() {
            return Err(bad());
        }
        let hex = |s: &str, digits: usize| -> io::Result<u64> {
            if s.len() != digits {
                return Err(bad());
            }
            u64::from_str_radix(s, 16).map_err(|_| bad())
        };
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = hex(f[6 + i], 2)? as u8;
        }
        Ok(Self {
            lid: hex(f[0], 4)? as u16,
            out_reads: hex(f[1], 4)? as u16,
            qpn: hex(f[2], 6)? as u32,
            psn: hex(f[3], 6)? as u32,
            rkey: hex(f[4], 8)? as u32,
            vaddr: hex(f[5], 16)?,
            gid,
            srqn: hex(f[22], 8)? as u32,
        })
    }
}

/// One side's bandwidth result (perftest's `struct bw_report_data`, as exchanged).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwReport {
    pub size: u64,
    pub iters: u64,
    /// MiB/s (perftest's "MB/sec" is 2^20 bytes per second).
    pub bw_peak: f64,
    pub bw_avg: f64,
    /// Millions of messages per second.
    pub msg_rate: f64,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// perftest's version comparison: the number a version string starts with (C's `atof`).
fn version_number(v: &str) -> f64 {
    let n: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    n.parse().unwrap_or(0.0)
}

/// The TCP connection to the peer.
pub struct Comm {
    sock: TcpStream,
    client: bool,
}

impl Comm {
    /// Client: connects to the server at `host`:`port`.
    pub fn connect(host: &str, port: u16) -> io::Result<Self> {
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot resolve {host}: {e}")))?
            .collect();
        let mut last = io::Error::other(format!("{host} has no address"));
        for a in addrs {
            match TcpStream::connect(a) {
                Ok(sock) => return Self::new(sock, true),
                Err(e) => last = e,
            }
        }
        Err(io::Error::new(
            last.kind(),
            format!("Couldn't connect to {host}:{port}: {last}"),
        ))
    }

    /// Server: waits for one client on `port` (any IPv4 address).
    pub fn accept(port: u16) -> io::Result<Self> {
        let listener =
            TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).map_err(|e| {
                io::Error::new(e.kind(), format!("Couldn't listen to port {port}: {e}"))
            })?;
        let (sock, _) = listener.accept()?;
        Self::new(sock, false)
    }

    fn new(sock: TcpStream, client: bool) -> io::Result<Self> {
        sock.set_nodelay(true)?;
        Ok(Self { sock, client })
    }

    /// Exchanges `mine` for the peer's message of the same size.
    fn swap(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> io::Result<()> {
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("exchange of {what}: {e}"));
        if self.client {
            self.sock.write_all(mine).map_err(ctx)?;
            self.sock.read_exact(theirs).map_err(ctx)
        } else {
            self.sock.read_exact(theirs).map_err(ctx)?;
            self.sock.write_all(mine).map_err(ctx)
        }
    }

    /// Exchanges versions; fails if the peer's exchange is not the one spoken here.
    pub fn versions(&mut self) -> io::Result<String> {
        let mut mine = [0u8; VERSION_LEN];
        mine[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
        let mut theirs = [0u8; VERSION_LEN];
        self.swap(&mine, &mut theirs, "versions")?;
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        let v = String::from_utf8_lossy(&theirs[..end]).into_owned();
        if version_number(&v) < OLDEST_PEER {
            return Err(invalid(format!(
                "the peer's perftest version {v:?} is older than {OLDEST_PEER:.2}, whose exchange this is"
            )));
        }
        Ok(v)
    }

    /// Exchanges page and cache line sizes (only the larger ones matter, and pfnic-perf's
    /// buffers do not depend on them); returns the peer's.
    pub fn sys_data(&mut self) -> io::Result<(u32, u32)> {
        let mut page = [0u8; 4];
        let mut line = [0u8; 4];
        self.swap(&PAGE_SIZE.to_be_bytes(), &mut page, "page size")?;
        self.swap(&CACHE_LINE.to_be_bytes(), &mut line, "cache line size")?;
        Ok((u32::from_be_bytes(page), u32::from_be_bytes(line)))
    }

    /// Exchanges `IBV_MTU_*` values; returns the path MTU both use: the smaller, or ours if
    /// the peer's is not a valid MTU.
    pub fn mtu(&mut self, mine: u32) -> io::Result<u32> {
        if !(1..=5).contains(&mine) {
            return Err(invalid(format!(
                "local MTU value {mine} is not an IBV_MTU_*"
            )));
        }
        let msg = [b'0' + mine as u8, 0];
        let mut theirs = [0u8; 2];
        self.swap(&msg, &mut theirs, "MTU")?;
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(2);
        let rem: u32 = std::str::from_utf8(&theirs[..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Ok(if (1..=5).contains(&rem) {
            rem.min(mine)
        } else {
            mine
        })
    }

    /// The keys exchange, and the tests' barrier.
    pub fn hand_shake(&mut self, mine: &Dest) -> io::Result<Dest> {
        let mut theirs = [0u8; KEYS_LEN];
        self.swap(&mine.encode(), &mut theirs, "keys")?;
        Dest::decode(&theirs)
    }

    /// Exchanges bandwidth reports (the client's is the one that counts in half-duplex
    /// tests; the server sends zeros).
    pub fn bw_reports(&mut self, mine: &BwReport) -> io::Result<BwReport> {
        let mut r = BwReport::default();
        let mut w = [0u8; 8];
        self.swap(&mine.size.to_be_bytes(), &mut w, "report")?;
        r.size = u64::from_be_bytes(w);
        self.swap(&mine.iters.to_be_bytes(), &mut w, "report")?;
        r.iters = u64::from_be_bytes(w);
        for (m, t) in [
            (mine.bw_peak, &mut r.bw_peak),
            (mine.bw_avg, &mut r.bw_avg),
            (mine.msg_rate, &mut r.msg_rate),
        ] {
            self.swap(&m.to_bits().to_be_bytes(), &mut w, "report")?;
            *t = f64::from_bits(u64::from_be_bytes(w));
        }
        Ok(r)
    }

    /// perftest's close: a last barrier, then "done".
    pub fn close(mut self, mine: &Dest) -> io::Result<()> {
        self.hand_shake(mine)?;
        self.sock.write_all(b"done\0")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> Dest {
        Dest {
            lid: 0,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234_5678,
            vaddr: 0x7f00_dead_b000,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2],
            srqn: 0,
        }
    }

    #[test]
    fn keys_message_is_perftests() {
        // What perftest's KEY_PRINT_FMT_GID prints for the same values.
        let want = "0000:0010:000011:abcdef:12345678:00007f00deadb000:\
                    00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02:00000000:";
        let msg = dest().encode();
        assert_eq!(want.len(), KEYS_LEN - 1);
        assert_eq!(&msg[..KEYS_LEN - 1], want.as_bytes());
        assert_eq!(msg[KEYS_LEN - 1], 0);
        assert_eq!(Dest::decode(&msg).unwrap(), dest());
    }

    #[test]
    fn malformed_keys_are_refused() {
        let good = dest().encode();
        let mut short = good;
        short[40] = 0;
        let mut not_hex = good;
        not_hex[5] = b'g';
        let mut no_colon = good;
        no_colon[4] = b'0';
        for bad in [
            &short[..],
            &not_hex[..],
            &no_colon[..],
            &[0u8; KEYS_LEN][..],
            b"x",
        ] {
            assert!(
                Dest::decode(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn versions_compare_like_atof() {
        assert_eq!(version_number("6.06"), 6.06);
        assert_eq!(version_number("5.70 (mofed)"), 5.70);
        assert!(version_number("") < OLDEST_PEER);
        assert!(version_number("4.5") < OLDEST_PEER);
    }

    /// Both sides of every exchange over a real TCP connection: the order (client writes
    /// first) and the byte layouts must agree.
    #[test]
    fn client_and_server_agree() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let server = std::thread::spawn(move || {
            let mut c = Comm::accept(port).unwrap();
            assert_eq!(c.versions().unwrap(), VERSION);
            assert_eq!(c.sys_data().unwrap(), (PAGE_SIZE, CACHE_LINE));
            assert_eq!(c.mtu(5).unwrap(), 3);
            let rem = c.hand_shake(&Dest { qpn: 2, ..dest() }).unwrap();
            assert_eq!(rem.qpn, 1);
            let r = c.bw_reports(&BwReport::default()).unwrap();
            assert_eq!(r.size, 65536);
            assert_eq!(r.bw_avg, 123.5);
            c.close(&dest()).unwrap();
        });
        let mut c = loop {
            match Comm::connect("127.0.0.1", port) {
                Ok(c) => break c,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        };
        assert_eq!(c.versions().unwrap(), VERSION);
        c.sys_data().unwrap();
        assert_eq!(c.mtu(3).unwrap(), 3);
        let rem = c.hand_shake(&Dest { qpn: 1, ..dest() }).unwrap();
        assert_eq!(rem.qpn, 2);
        let r = c
            .bw_reports(&BwReport {
                size: 65536,
                iters: 10,
                bw_peak: 200.0,
                bw_avg: 123.5,
                msg_rate: 0.002,
            })
            .unwrap();
        assert_eq!(r, BwReport::default());
        c.close(&dest()).unwrap();
        server.join().unwrap();
    }
}
