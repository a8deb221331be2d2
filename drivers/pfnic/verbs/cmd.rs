// SPDX-License-Identifier: GPL-2.0

//! The admin command mailbox (docs/verbs.md, "Admin command mailbox"): sixteen argument
//! registers, an opcode register whose write executes the command, and a status. One mutex
//! serializes the commands of the whole device. The commands themselves are typed, in
//! [`crate::cmd_abi`].

pub(crate) use crate::cmd_abi::*;
use crate::{nic::Nic, regs};
use kernel::{
    io::register::Array,
    io::Io,
    prelude::*,
    time::{Delta, Instant, Monotonic},
};
use zerocopy::{FromBytes, IntoBytes};

const _: () = assert!(CMD_WORDS == regs::CMD_ARGS_NR);

/// Statuses.
const STATUS_OK: u32 = 0;
const STATUS_BAD_ARG: u32 = 1;
const STATUS_BAD_INDEX: u32 = 2;
const STATUS_BAD_STATE: u32 = 3;
const STATUS_BUSY: u32 = 4;
const STATUS_BAD_OP: u32 = 5;
const STATUS_NO_SPACE: u32 = 6;

/// The errno of a command status. The driver validates every argument before it issues a
/// command, so a failure other than `BUSY` means the device disagrees with the driver's view
/// of its tables; it is logged.
fn status_to_result(nic: &Nic, op: u32, status: u32) -> Result {
    let err = match status {
        STATUS_OK => return Ok(()),
        STATUS_BUSY => return Err(EBUSY),
        STATUS_BAD_ARG | STATUS_BAD_INDEX | STATUS_BAD_STATE => EINVAL,
        STATUS_BAD_OP => EOPNOTSUPP,
        // The device's translation table entries are used up (by every file together).
        STATUS_NO_SPACE => return Err(ENOSPC),
        _ => EIO,
    };
    dev_dbg!(
        nic.device(),
        "pfnic{}: command {:#x} failed with status {}\n",
        nic.info.index,
        op,
        status
    );
    Err(err)
}

impl Nic {
    /// Executes admin command `c` and returns its results.
    pub(crate) fn command<C: Command>(&self, c: &C) -> Result<C::Reply> {
        self.command_part(c)
    }

    /// Executes admin command `c` and returns `R`, the first words of its results, having read
    /// only those (`QP_QUERY`'s state alone: [`QpStateReply`]).
    pub(crate) fn command_part<C: Command, R: FromBytes + PrefixOf<C::Reply>>(
        &self,
        c: &C,
    ) -> Result<R> {
        let verbs = self.verbs()?;
        let mut state = verbs.cmd_lock.lock();
        self.report_access_alerts(&mut state);
        self.execute_part(c)
    }

    /// Executes one command; the caller holds the command lock.
    pub(super) fn execute<C: Command>(&self, c: &C) -> Result<C::Reply> {
        self.execute_part(c)
    }

    /// Executes one command and reads back `R` of its results; the caller holds the command
    /// lock.
    ///
    /// Only the command's own words go out and only `R`'s come back: the device reads a
    /// command's structure and no more, and each register access is a trap into the device
    /// model (`QP_MODIFY`: 18 accesses instead of 34).
    fn execute_part<C: Command, R: FromBytes + PrefixOf<C::Reply>>(&self, c: &C) -> Result<R> {
        let mut args = [0u32; CMD_WORDS];
        let bytes = c.as_bytes();
        args.as_mut_bytes()
            .get_mut(..bytes.len())
            .ok_or(EINVAL)?
            .copy_from_slice(bytes);
        let args = args.get(..bytes.len().div_ceil(4)).ok_or(EINVAL)?;
        let reply_words = size_of::<R>().div_ceil(4);
        let (status, results) = self.with_bar(|bar| -> Result<(u32, [u32; CMD_WORDS])> {
            for (i, value) in args.iter().enumerate() {
                let loc = regs::CMD_ARG::try_at(i).ok_or(EINVAL)?;
                bar.write(loc, regs::CMD_ARG::zeroed().with_value(*value));
            }
            bar.write_reg(regs::CMD_OP::zeroed().with_op(C::OP));
            let status = bar.read(regs::CMD_STATUS).status().get();
            let mut results = [0u32; CMD_WORDS];
            if status == STATUS_OK {
                for (i, r) in results.iter_mut().take(reply_words).enumerate() {
                    let loc = regs::CMD_ARG::try_at(i).ok_or(EINVAL)?;
                    *r = bar.read(loc).value().get();
                }
            }
            Ok((status, results))
        })??;
        status_to_result(self, C::OP, status)?;
        R::read_from_prefix(results.as_bytes())
            .map(|(reply, _)| reply)
            .map_err(|_| EINVAL)
    }

    /// Refused remote accesses of context `index` so far (`CTX_QUERY`); also re-arms the
    /// context's `ACCESS_ERROR` event.
    pub(crate) fn remote_access_errors(&self, index: u32) -> Result<u64> {
        let verbs = self.verbs()?;
        let _state = verbs.cmd_lock.lock();
        let r = self.execute(&CtxQuery { index })?;
        Ok(join(r.access_errors_lo, r.access_errors_hi))
    }

    /// Logs the contexts whose `ACCESS_ERROR` event arrived since the last report, with their
    /// counts, and re-arms their events: at most once per [`ALERT_INTERVAL`], so a key scan
    /// costs the log one line a second, however fast it runs. Runs before each admin command
    /// (a scanning peer issues one for every refused attempt, to reset its QP).
    fn report_access_alerts(&self, state: &mut CmdState) {
        let Ok(verbs) = self.verbs() else { return };
        if !verbs.eq.alerts_pending() {
            return;
        }
        if let Some(last) = state.last_alert_report {
            if last.elapsed() < ALERT_INTERVAL {
                return;
            }
        }
        state.last_alert_report = Some(Instant::<Monotonic>::now());
        for index in 0..self.info.num_contexts {
            if verbs.eq.take_alert(index) {
                self.log_access_errors(index);
            }
        }
    }

    /// Logs the refused remote accesses of context `index` (and re-arms its event); the
    /// caller holds the command lock.
    fn log_access_errors(&self, index: u32) {
        let Ok(r) = self.execute(&CtxQuery { index }) else {
            return;
        };
        let count = join(r.access_errors_lo, r.access_errors_hi);
        if count != 0 {
            dev_warn!(
                self.device(),
                "pfnic{}: context {}: {} remote accesses refused (wrong key, range or access)\n",
                self.info.index,
                index,
                count
            );
        }
    }

    /// Logs what is left to report of context `index`, which is about to stop (its count goes
    /// with it), whatever the rate limit: once per context at most.
    pub(crate) fn flush_access_alert(&self, index: u32) {
        let Ok(verbs) = self.verbs() else { return };
        let _state = verbs.cmd_lock.lock();
        if verbs.eq.take_alert(index) {
            self.log_access_errors(index);
        }
    }
}

/// The least time between two reports of refused remote accesses.
const ALERT_INTERVAL: Delta = Delta::from_secs(1);

/// What the command lock protects besides the mailbox itself.
#[derive(Default)]
pub(crate) struct CmdState {
    /// When refused remote accesses were last reported.
    last_alert_report: Option<Instant<Monotonic>>,
}
