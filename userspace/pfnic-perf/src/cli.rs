//! The command line: clap parses it, [`Cli::mode`] checks what the options mean together and
//! turns them into the run to do, with perftest's defaults where perftest has them.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use crate::{peer, Kind, Mode, Options, Test, Verb, Wait};

/// perftest's TCP port.
const DEFAULT_PORT: u16 = 18515;

const USAGE: &str = "\
pfnic-perf [OPTIONS] [TEST...]              loopback: two QPs of this process
       pfnic-perf --compare [OPTIONS] [OP...]     loopback, warm against cold
       pfnic-perf [OPTIONS] -p PORT TEST          the server of a run with a peer
       pfnic-perf [OPTIONS] [-p PORT] TEST HOST   its client";

const ABOUT: &str = "\
A perftest-like RDMA benchmark for pfnic.

TEST is write_bw, write_lat, read_bw, read_lat, send_bw or send_lat (loopback default: all six;
with a peer, exactly one). The peer may be pfnic-perf or perftest's ib_TEST (perftest's exchange,
version 6.06 as Debian 12 ships it), e.g. `ib_write_bw -d rxe0 -x 1 HOST`.";

const COMPARE: &str = "\
--compare: in one process, for each OP (write, read, send; default all three; a TEST name counts
as its OP) and size (default 4096, 65536 and 1048576), interleaved warm and cold (both buffers
dropped before every iteration, the drop timed apart) messages, one in flight, timed from the
post to the completion: median and p10..p90 of each, cold/warm, faults and page request groups
per cold iteration (MR counters), the device's cost per faulted page ((cold - warm) / faults)
against the guest CPU's own first touch of a dropped page (a store or a load per page, timed in
the same run), and cold / (warm + the CPU's touch of the same pages). Also takes -s, -a, -n
(iterations per repetition, default 20), --odp and -d.";

/// A size, count or depth: at least 1.
fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(v: &str) -> Result<T, String> {
    match v.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(_) => Err(format!("'{v}' is not a valid number")),
    }
}

#[derive(Parser, Debug)]
#[command(name = "pfnic-perf", override_usage = USAGE, about = ABOUT, after_help = COMPARE)]
pub(crate) struct Cli {
    /// Message size (loopback default: 4096 and 1048576; with a peer: 65536 for bandwidth and
    /// 2 for latency, as perftest's)
    #[arg(short, long, value_name = "BYTES", value_parser = at_least_one::<usize>)]
    size: Option<usize>,
    /// Every power of two from 2 bytes to 8 MiB (loopback)
    #[arg(short, long, conflicts_with = "size")]
    all: bool,
    /// Iterations per size (loopback default 100; with a peer 1000; --compare: per repetition,
    /// default 20)
    #[arg(short = 'n', long, value_name = "N", value_parser = at_least_one::<usize>)]
    iters: Option<usize>,
    /// Work requests in flight in bandwidth tests (loopback default 32; with a peer 128)
    #[arg(short, long, value_name = "N", value_parser = at_least_one::<u32>)]
    tx_depth: Option<u32>,
    /// Receives posted at once in SEND tests with a peer
    #[arg(short, long, value_name = "N", default_value_t = 512,
          value_parser = at_least_one::<u32>)]
    rx_depth: u32,
    /// The TCP port of the exchange with a peer [default: 18515]
    #[arg(short, long)]
    port: Option<u16>,
    /// The source GID with a peer (1: the port's IPv4 address)
    #[arg(short = 'x', long, value_name = "N", default_value_t = 1)]
    gid_index: u32,
    /// The QP's local ACK timeout with a peer, 4.096 us * 2^N (perftest's -u)
    #[arg(short = 'u', long = "qp-timeout", value_name = "N", default_value_t = 14,
          value_parser = clap::value_parser!(u32).range(0..=31))]
    qp_timeout: u32,
    /// On-demand MRs (IBV_ACCESS_ON_DEMAND)
    #[arg(long)]
    odp: bool,
    /// madvise(MADV_DONTNEED) the buffers before every iteration (loopback)
    #[arg(long, conflicts_with = "compare")]
    cold: bool,
    /// The RDMA device (libibverbs' name, as perftest's -d)
    #[arg(
        short = 'd',
        long = "ib-dev",
        value_name = "NAME",
        default_value = "pfnic0"
    )]
    device: String,
    /// Warm against cold in one process (below)
    #[arg(long)]
    compare: bool,
    /// --compare: repetitions per row, each warm then cold
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one::<usize>)]
    reps: usize,
    /// --compare: also write the results as JSON to FILE (e.g. /dev/ttyS1)
    #[arg(long, value_name = "FILE", requires = "compare")]
    json: Option<String>,
    /// --compare: wait for completions on a completion channel (armed CQ, completion event)
    /// instead of polling: no CPU spins while the device works (--waits=events)
    #[arg(long, requires = "compare", conflicts_with = "waits")]
    events: bool,
    /// --compare: each row once per wait mode of LIST, side by side (poll, events or
    /// poll,events; default poll); the memory modes wait the first way
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "compare")]
    waits: Vec<Wait>,
    /// --compare: then the memory modes side by side (docs/uapi.md): the same OPs and sizes in
    /// each mode this device and platform can run (pinned, odp and sva, the last two with
    /// on-demand MRs), warm and cold (odp, sva: both buffers dropped; pinned: dropped and
    /// registered again, the registration timed in), and the time to register 4 KiB .. 1 GiB
    /// in each mode
    #[arg(long, requires = "compare")]
    modes: bool,
    /// TESTs, --compare's OPs (write, read, send), and the peer's address (HOST)
    #[arg(value_name = "TEST|OP|HOST")]
    words: Vec<String>,
}

impl Cli {
    /// Parses the process's arguments; exits with clap's message and status 2 on bad ones.
    pub(crate) fn parse_mode() -> Mode {
        Self::parse()
            .mode()
            .unwrap_or_else(|(kind, msg)| Self::command().error(kind, msg).exit())
    }

    /// What the options ask for, or why they cannot go together.
    fn mode(self) -> Result<Mode, (ErrorKind, String)> {
        let mut tests = Vec::new();
        let mut verbs = Vec::new();
        let mut host = None;
        for w in self.words {
            if let Some(&t) = Test::ALL.iter().find(|t| t.name() == w) {
                tests.push(t);
            } else if let Some(v) = Verb::of_name(&w) {
                verbs.push(v);
            } else if host.is_none() {
                host = Some(w);
            } else {
                return Err((
                    ErrorKind::InvalidValue,
                    format!(
                        "unknown test '{w}' (the peer's address is {})",
                        host.unwrap_or_default()
                    ),
                ));
            }
        }
        let mut waits = if self.events {
            vec![Wait::Events]
        } else {
            self.waits
        };
        for (i, w) in waits.iter().enumerate() {
            if waits[..i].contains(w) {
                return Err((
                    ErrorKind::ArgumentConflict,
                    format!("--waits: {} given twice", w.name()),
                ));
            }
        }
        if waits.is_empty() {
            waits.push(Wait::Poll);
        }
        if self.compare && (self.port.is_some() || host.is_some()) {
            return Err((
                ErrorKind::ArgumentConflict,
                "--compare is a loopback run of its own (no peer)".into(),
            ));
        }
        if !self.compare && !verbs.is_empty() {
            return Err((
                ErrorKind::InvalidValue,
                "the OPs write, read and send are for --compare".into(),
            ));
        }

        if self.port.is_some() || host.is_some() {
            let [test] = tests[..] else {
                return Err((
                    ErrorKind::WrongNumberOfValues,
                    format!(
                        "a run with a peer is of exactly one TEST ({} given)",
                        tests.len()
                    ),
                ));
            };
            if self.all || self.cold {
                return Err((
                    ErrorKind::ArgumentConflict,
                    "--all and --cold are for loopback runs".into(),
                ));
            }
            return Ok(Mode::Peer(peer::PeerOptions {
                test,
                host,
                port: self.port.unwrap_or(DEFAULT_PORT),
                size: self.size.unwrap_or(match test.kind {
                    Kind::Bw => 65536,
                    Kind::Lat => 2,
                }),
                iters: self.iters.unwrap_or(1000),
                tx_depth: self.tx_depth.unwrap_or(128),
                rx_depth: self.rx_depth,
                gid_index: self.gid_index,
                qp_timeout: self.qp_timeout,
                odp: self.odp,
                device: self.device.clone(),
            }));
        }

        let sizes = if self.all {
            (1..=23).map(|s| 1usize << s).collect()
        } else if let Some(s) = self.size {
            vec![s]
        } else if self.compare {
            vec![4096, 64 << 10, 1 << 20]
        } else {
            vec![4096, 1 << 20]
        };
        let mut o = Options {
            tests,
            verbs,
            sizes,
            iters: self.iters.unwrap_or(if self.compare { 20 } else { 100 }),
            tx_depth: self.tx_depth.unwrap_or(32),
            odp: self.odp,
            cold: self.cold,
            device: self.device.clone(),
            reps: self.reps,
            json: self.json,
            waits,
            modes: self.modes,
        };
        if !self.compare {
            if o.tests.is_empty() {
                o.tests = Test::ALL.to_vec();
            }
            return Ok(Mode::Loopback(o));
        }
        for t in &o.tests {
            if !o.verbs.contains(&t.verb) {
                o.verbs.push(t.verb);
            }
        }
        if o.verbs.is_empty() {
            o.verbs = Verb::ALL.to_vec();
        }
        Ok(Mode::Compare(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(args: &str) -> Result<Mode, String> {
        let cli = Cli::try_parse_from(std::iter::once("pfnic-perf").chain(args.split_whitespace()))
            .map_err(|e| e.to_string())?;
        cli.mode().map_err(|(_, msg)| msg)
    }

    fn waits(args: &str) -> Result<Vec<Wait>, String> {
        match mode(args)? {
            Mode::Compare(o) => Ok(o.waits),
            _ => Err("not --compare".into()),
        }
    }

    #[test]
    fn the_command_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn waits_are_a_list_of_distinct_modes() {
        assert_eq!(waits("--compare"), Ok(vec![Wait::Poll]));
        assert_eq!(waits("--compare --waits=poll"), Ok(vec![Wait::Poll]));
        assert_eq!(
            waits("--compare --waits events,poll"),
            Ok(vec![Wait::Events, Wait::Poll])
        );
        assert_eq!(waits("--compare --events"), Ok(vec![Wait::Events]));
        assert!(waits("--compare --waits=poll,poll")
            .unwrap_err()
            .contains("twice"));
        assert!(waits("--compare --waits=spin")
            .unwrap_err()
            .contains("'spin'"));
        assert!(waits("--compare --waits=").is_err());
        assert!(waits("--compare --events --waits=poll").is_err());
        assert!(mode("--waits=poll").is_err_and(|e| e.contains("--compare")));
    }

    #[test]
    fn words_are_tests_ops_and_the_host() {
        let Ok(Mode::Loopback(o)) = mode("write_bw read_lat -s 8192") else {
            panic!("not a loopback run");
        };
        assert_eq!(o.tests.len(), 2);
        assert_eq!((o.sizes, o.iters, o.tx_depth), (vec![8192], 100, 32));

        let Ok(Mode::Compare(o)) = mode("--compare read send_bw -n 5 --reps 2") else {
            panic!("not a compare run");
        };
        assert_eq!(o.verbs, vec![Verb::Read, Verb::Send]);
        assert_eq!((o.iters, o.reps), (5, 2));
        assert_eq!(o.sizes, vec![4096, 65536, 1 << 20]);

        let Ok(Mode::Peer(p)) = mode("-p 9999 write_lat 10.0.0.2") else {
            panic!("not a peer run");
        };
        assert_eq!(p.host.as_deref(), Some("10.0.0.2"));
        assert_eq!((p.port, p.size, p.iters, p.tx_depth), (9999, 2, 1000, 128));
        let Ok(Mode::Peer(p)) = mode("send_bw 10.0.0.2") else {
            panic!("not a peer run");
        };
        assert_eq!((p.port, p.size), (DEFAULT_PORT, 65536));
    }

    #[test]
    fn bad_combinations_are_refused() {
        for bad in [
            "-s 0",
            "-n 0 write_bw",
            "-t 0",
            "-s x",
            "-a -s 4096",
            "--compare --cold",
            "--compare -p 1 write_bw",
            "--compare write_bw 10.0.0.2",
            "write",
            "--json=f",
            "--reps 0 --compare",
            "-p 1 write_bw read_bw",
            "-p 1",
            "--cold -p 1 write_bw",
            "write_bw 10.0.0.2 10.0.0.3",
            "--bogus",
        ] {
            assert!(mode(bad).is_err(), "'{bad}' was taken");
        }
    }
}
