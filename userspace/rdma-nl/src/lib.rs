//! The RDMA core's netlink interface (`NETLINK_RDMA`, its `nldev` client), the one the `rdma`
//! tool speaks: for programs that read an MR's counters between measurements, as `rdma
//! statistic mr` shows them, without starting the tool each time.
//!
//! Only what pfnic's programs need: a device's index by its name, an MR's number (`mrn`) by
//! its rkey, and an MR's counters. The formats are `<rdma/rdma_netlink.h>`'s; the core reports
//! an MR's keys only to a caller with `CAP_NET_ADMIN`, so [`Nldev::mr_number`] needs it.

use std::io;
use std::os::fd::OwnedFd;

use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `RDMA_NL_NLDEV`: the core's device interface among the RDMA netlink clients.
const RDMA_NL_NLDEV: u16 = 5;
/// `enum rdma_nldev_command`.
const CMD_GET: u16 = 1;
const CMD_RES_MR_GET: u16 = 13;
const CMD_STAT_GET: u16 = 17;
/// `enum rdma_nldev_attr`.
const ATTR_DEV_INDEX: u16 = 1;
const ATTR_DEV_NAME: u16 = 2;
const ATTR_RES_MR: u16 = 40;
const ATTR_RES_MR_ENTRY: u16 = 41;
const ATTR_RES_RKEY: u16 = 42;
const ATTR_RES_MRN: u16 = 62;
const ATTR_STAT_RES: u16 = 75;
const ATTR_STAT_HWCOUNTERS: u16 = 80;
const ATTR_STAT_HWCOUNTER_ENTRY: u16 = 81;
const ATTR_STAT_HWCOUNTER_ENTRY_NAME: u16 = 82;
const ATTR_STAT_HWCOUNTER_ENTRY_VALUE: u16 = 83;

/// `<linux/netlink.h>`.
const NLMSG_HDRLEN: usize = 16;
const NLA_HDRLEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
/// The type bits of an attribute's type (`NLA_TYPE_MASK`): nests may carry `NLA_F_NESTED`.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Rounds `n` up to netlink's 4-byte alignment.
const fn align(n: usize) -> usize {
    (n + 3) & !3
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("RDMA netlink: {what}"))
}

/// A request of the core's device interface: command `cmd` with `attrs`, as one message.
fn request(cmd: u16, dump: bool, seq: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut msg = vec![0u8; NLMSG_HDRLEN];
    for (kind, data) in attrs {
        let len = NLA_HDRLEN + data.len();
        msg.extend_from_slice(&(len as u16).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(data);
        msg.resize(align(msg.len()), 0);
    }
    let len = msg.len() as u32;
    let flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    msg[4..6].copy_from_slice(&((RDMA_NL_NLDEV << 10) | cmd).to_ne_bytes());
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    // nlmsg_pid 0: the kernel.
    msg
}

/// One attribute of a message or nest: its type (flags masked off) and payload.
#[derive(Clone, Copy, Debug)]
struct Attr<'a> {
    kind: u16,
    data: &'a [u8],
}

impl<'a> Attr<'a> {
    /// The first `N` bytes of the payload; an error if it is shorter.
    fn bytes<const N: usize>(&self) -> io::Result<[u8; N]> {
        self.data
            .get(..N)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                bad(&format!(
                    "an attribute of {} bytes, {N} wanted",
                    self.data.len()
                ))
            })
    }

    fn u32(&self) -> io::Result<u32> {
        self.bytes().map(u32::from_ne_bytes)
    }

    fn u64(&self) -> io::Result<u64> {
        self.bytes().map(u64::from_ne_bytes)
    }

    /// A string attribute, without its terminating NUL.
    fn str(&self) -> io::Result<&'a str> {
        let s = self.data.split(|&b| b == 0).next().unwrap_or_default();
        std::str::from_utf8(s).map_err(|_| bad("a string attribute that is not UTF-8"))
    }

    fn nested(&self) -> io::Result<Vec<Attr<'a>>> {
        attrs(self.data)
    }
}

/// The attributes in `buf`, one after the other.
fn attrs(mut buf: &[u8]) -> io::Result<Vec<Attr<'_>>> {
    let mut out = Vec::new();
    while buf.len() >= NLA_HDRLEN {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > buf.len() {
            return Err(bad("an attribute's length runs past its message"));
        }
        out.push(Attr {
            kind,
            data: &buf[NLA_HDRLEN..len],
        });
        buf = &buf[align(len).min(buf.len())..];
    }
    Ok(out)
}

fn find<'a>(attrs: &[Attr<'a>], kind: u16) -> Option<Attr<'a>> {
    attrs.iter().copied().find(|a| a.kind == kind)
}

/// What one reply of the kernel said.
enum Reply<'a> {
    /// A message of the answer, its attributes' bytes.
    Part(&'a [u8]),
    /// The end of a dump.
    Done,
    /// The request failed with this errno (0: an acknowledgement).
    Error(i32),
}

/// The messages in one datagram of the kernel, those of request `seq` only.
fn replies(mut buf: &[u8], seq: u32) -> io::Result<Vec<Reply<'_>>> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        let their_seq = u32::from_ne_bytes(buf[8..12].try_into().unwrap());
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(bad("a message's length runs past the datagram"));
        }
        let body = &buf[NLMSG_HDRLEN..len];
        buf = &buf[align(len).min(buf.len())..];
        if their_seq != seq {
            continue;
        }
        out.push(match kind {
            NLMSG_DONE => Reply::Done,
            NLMSG_ERROR => {
                let errno = body
                    .get(..4)
                    .map(|b| i32::from_ne_bytes(b.try_into().unwrap()))
                    .ok_or_else(|| bad("an error message without its errno"))?;
                Reply::Error(-errno)
            }
            _ => Reply::Part(body),
        });
    }
    Ok(out)
}

/// An object's counters as the core reports them (`RDMA_NLDEV_ATTR_STAT_HWCOUNTERS`), by
/// name, in the driver's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters(pub Vec<(String, u64)>);

impl Counters {
    /// The counter `name`, if the driver reports it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// The counters in a message's attributes.
    fn of(attrs: &[Attr<'_>]) -> io::Result<Self> {
        let table = find(attrs, ATTR_STAT_HWCOUNTERS).ok_or_else(|| bad("no counters table"))?;
        let mut out = Vec::new();
        for entry in table.nested()? {
            if entry.kind != ATTR_STAT_HWCOUNTER_ENTRY {
                continue;
            }
            let e = entry.nested()?;
            let (Some(name), Some(value)) = (
                find(&e, ATTR_STAT_HWCOUNTER_ENTRY_NAME),
                find(&e, ATTR_STAT_HWCOUNTER_ENTRY_VALUE),
            ) else {
                return Err(bad("a counter without its name or value"));
            };
            out.push((name.str()?.to_owned(), value.u64()?));
        }
        Ok(Self(out))
    }
}

/// A socket on the RDMA core's netlink interface.
pub struct Nldev {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Nldev {
    /// Opens a socket to the core (`NETLINK_RDMA`).
    pub fn open() -> io::Result<Self> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(netlink::RDMA),
        )?;
        rustix::net::connect(&fd, &netlink::SocketAddrNetlink::new(0, 0))?;
        Ok(Self {
            fd,
            seq: 0,
            // A dump's datagrams are at most a page or two (the kernel's `NLMSG_GOODSIZE`).
            buf: vec![0; 64 << 10],
        })
    }

    /// Sends command `cmd` and calls `each` with the attributes of every message of the answer
    /// (one, or a dump's).
    fn ask(
        &mut self,
        cmd: u16,
        dump: bool,
        attrs_in: &[(u16, &[u8])],
        mut each: impl FnMut(&[Attr<'_>]) -> io::Result<()>,
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        rustix::net::send(
            &self.fd,
            &request(cmd, dump, seq, attrs_in),
            SendFlags::empty(),
        )?;
        loop {
            let (_, len) = rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::empty())?;
            if len > self.buf.len() {
                return Err(bad("a datagram larger than the receive buffer"));
            }
            for reply in replies(&self.buf[..len], seq)? {
                match reply {
                    Reply::Done => return Ok(()),
                    Reply::Error(0) if !dump => return Ok(()),
                    Reply::Error(0) => {}
                    Reply::Error(errno) => return Err(io::Error::from_raw_os_error(errno)),
                    Reply::Part(body) => {
                        each(&attrs(body)?)?;
                        if !dump {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// The core's index of RDMA device `name` (`RDMA_NLDEV_ATTR_DEV_INDEX`).
    pub fn device_index(&mut self, name: &str) -> io::Result<u32> {
        let mut found = None;
        self.ask(CMD_GET, true, &[], |a| {
            if let (Some(i), Some(n)) = (find(a, ATTR_DEV_INDEX), find(a, ATTR_DEV_NAME)) {
                if n.str()? == name {
                    found = Some(i.u32()?);
                }
            }
            Ok(())
        })?;
        found.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no RDMA device {name} in the RDMA core"),
            )
        })
    }

    /// The number (`mrn`) of device `dev`'s MR whose rkey is `rkey`, as `rdma resource show
    /// mr` lists it. The core shows keys only to `CAP_NET_ADMIN`: without it, `NotFound`.
    pub fn mr_number(&mut self, dev: u32, rkey: u32) -> io::Result<u32> {
        let mut found = None;
        self.ask(
            CMD_RES_MR_GET,
            true,
            &[(ATTR_DEV_INDEX, &dev.to_ne_bytes())],
            |a| {
                let Some(table) = find(a, ATTR_RES_MR) else {
                    return Ok(());
                };
                for entry in table.nested()? {
                    let e = entry.nested()?;
                    if entry.kind != ATTR_RES_MR_ENTRY {
                        continue;
                    }
                    if let (Some(k), Some(n)) = (find(&e, ATTR_RES_RKEY), find(&e, ATTR_RES_MRN)) {
                        if k.u32()? == rkey {
                            found = Some(n.u32()?);
                        }
                    }
                }
                Ok(())
            },
        )?;
        found.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no MR with rkey {rkey:#x} in RDMA device {dev}'s resources \
                     (the core shows keys to CAP_NET_ADMIN only)"
                ),
            )
        })
    }

    /// MR `mrn`'s counters on device `dev`, as `rdma statistic mr` shows them.
    pub fn mr_counters(&mut self, dev: u32, mrn: u32) -> io::Result<Counters> {
        let mut out = None;
        self.ask(
            CMD_STAT_GET,
            false,
            &[
                (ATTR_DEV_INDEX, &dev.to_ne_bytes()),
                (ATTR_STAT_RES, &u32::from(ATTR_RES_MR).to_ne_bytes()),
                (ATTR_RES_MRN, &mrn.to_ne_bytes()),
            ],
            |a| {
                out = Some(Counters::of(a)?);
                Ok(())
            },
        )?;
        out.ok_or_else(|| bad("no answer to a statistic request"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attribute in the kernel's layout: length, type, payload, padding.
    fn nla(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut v = ((NLA_HDRLEN + data.len()) as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(data);
        v.resize(align(v.len()), 0);
        v
    }

    /// A message of the kernel: header (type, sequence) and attributes.
    fn nlmsg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut v = ((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes().to_vec();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&2u16.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(body);
        v.resize(align(v.len()), 0);
        v
    }

    #[test]
    fn a_request_is_the_kernels_layout() {
        let msg = request(
            CMD_STAT_GET,
            false,
            7,
            &[(ATTR_DEV_INDEX, &3u32.to_ne_bytes())],
        );
        let mut want = 24u32.to_ne_bytes().to_vec();
        want.extend_from_slice(&((5u16 << 10) | 17).to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&3u32.to_ne_bytes());
        assert_eq!(msg, want);
        // A dump asks with NLM_F_DUMP; a string's padding is zeros.
        let msg = request(CMD_GET, true, 1, &[(ATTR_DEV_NAME, b"ab\0")]);
        assert_eq!(u16::from_ne_bytes([msg[6], msg[7]]), 0x301);
        assert_eq!(msg.len(), 24);
        assert_eq!(&msg[20..24], b"ab\0\0");
    }

    #[test]
    fn counters_come_from_nested_entries_with_the_nested_flag() {
        let entry = |name: &str, v: u64| {
            let mut n = name.as_bytes().to_vec();
            n.push(0);
            let mut e = nla(ATTR_STAT_HWCOUNTER_ENTRY_NAME, &n);
            e.extend(nla(ATTR_STAT_HWCOUNTER_ENTRY_VALUE, &v.to_ne_bytes()));
            nla(ATTR_STAT_HWCOUNTER_ENTRY | 0x8000, &e)
        };
        let mut table = entry("page_faults", 12);
        table.extend(entry("page_fault_groups", 1 << 40));
        let mut body = nla(ATTR_DEV_INDEX, &1u32.to_ne_bytes());
        body.extend(nla(ATTR_RES_MRN, &9u32.to_ne_bytes()));
        body.extend(nla(ATTR_STAT_HWCOUNTERS | 0x8000, &table));
        let c = Counters::of(&attrs(&body).unwrap()).unwrap();
        assert_eq!(c.get("page_faults"), Some(12));
        assert_eq!(c.get("page_fault_groups"), Some(1 << 40));
        assert_eq!(c.get("pages_pinned"), None);
        assert_eq!(c.0.len(), 2);
    }

    /// `ENOENT`, as the kernel negates it in an error message.
    const ENOENT: i32 = 2;

    #[test]
    fn replies_of_other_requests_are_skipped_and_errors_kept() {
        let mut dgram = nlmsg(0x1401, 4, &nla(ATTR_DEV_INDEX, &1u32.to_ne_bytes()));
        dgram.extend(nlmsg(0x1401, 5, &nla(ATTR_DEV_INDEX, &2u32.to_ne_bytes())));
        dgram.extend(nlmsg(NLMSG_ERROR, 5, &(-ENOENT).to_ne_bytes()));
        dgram.extend(nlmsg(NLMSG_DONE, 5, &0u32.to_ne_bytes()));
        let r = replies(&dgram, 5).unwrap();
        assert_eq!(r.len(), 3);
        let Reply::Part(body) = r[0] else {
            panic!("not a part")
        };
        assert_eq!(attrs(body).unwrap()[0].u32().unwrap(), 2);
        assert!(matches!(r[1], Reply::Error(e) if e == ENOENT));
        assert!(matches!(r[2], Reply::Done));
    }

    #[test]
    fn lengths_past_the_buffer_are_refused() {
        // An attribute claiming 64 bytes in 8.
        let mut a = 64u16.to_ne_bytes().to_vec();
        a.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        assert!(attrs(&a).is_err());
        // An attribute shorter than its header.
        assert!(attrs(&[2, 0, 1, 0]).is_err());
        // A message claiming more than the datagram.
        let mut m = nlmsg(0x1401, 1, &[]);
        m[0] = 200;
        assert!(replies(&m, 1).is_err());
        // Short numbers are errors, not zeros.
        let body = nla(ATTR_DEV_INDEX, &[1, 2]);
        assert!(attrs(&body).unwrap()[0].u32().is_err());
    }
}
