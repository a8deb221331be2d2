// SPDX-License-Identifier: GPL-2.0

//! The admin command mailbox (docs/verbs.md, "Admin command mailbox"): sixteen argument
//! registers, an opcode register whose write executes the command, and a status. One mutex
//! serializes the commands of the whole device.

use crate::{nic::Nic, regs};
use kernel::{io::register::Array, io::Io, prelude::*};

/// Opcodes.
pub(crate) const MR_SET: u32 = 0x01;
pub(crate) const MR_CLEAR: u32 = 0x02;
pub(crate) const MR_QUERY: u32 = 0x03;
pub(crate) const CQ_CREATE: u32 = 0x10;
pub(crate) const CQ_DESTROY: u32 = 0x11;
pub(crate) const QP_CREATE: u32 = 0x20;
pub(crate) const QP_MODIFY: u32 = 0x21;
pub(crate) const QP_QUERY: u32 = 0x22;
pub(crate) const QP_DESTROY: u32 = 0x23;

/// Statuses.
const STATUS_OK: u32 = 0;
const STATUS_BAD_ARG: u32 = 1;
const STATUS_BAD_INDEX: u32 = 2;
const STATUS_BAD_STATE: u32 = 3;
const STATUS_BUSY: u32 = 4;
const STATUS_BAD_OP: u32 = 5;

/// Arguments and results of one command.
pub(crate) type Args = [u32; regs::CMD_ARGS_NR];

/// Splits a 64-bit argument into its two words, low first.
pub(crate) fn split(value: u64) -> [u32; 2] {
    [value as u32, (value >> 32) as u32]
}

/// Joins two result words, low first.
pub(crate) fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// The errno of a command status. The driver validates every argument before it issues a
/// command, so a failure other than `BUSY` means the device disagrees with the driver's view
/// of its tables; it is logged.
fn status_to_result(nic: &Nic, op: u32, status: u32) -> Result {
    let err = match status {
        STATUS_OK => return Ok(()),
        STATUS_BUSY => return Err(EBUSY),
        STATUS_BAD_ARG | STATUS_BAD_INDEX | STATUS_BAD_STATE => EINVAL,
        STATUS_BAD_OP => EOPNOTSUPP,
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
    /// Executes admin command `op` with `args` (the rest zero) and returns the argument
    /// registers as the device left them (the command's results).
    pub(crate) fn command(&self, op: u32, args: &[u32]) -> Result<Args> {
        if args.len() > regs::CMD_ARGS_NR {
            return Err(EINVAL);
        }
        let verbs = self.verbs()?;
        let _guard = verbs.cmd_lock.lock();
        let (status, results) = self.with_bar(|bar| -> Result<(u32, Args)> {
            for i in 0..regs::CMD_ARGS_NR {
                let value = args.get(i).copied().unwrap_or(0);
                let loc = regs::CMD_ARG::try_at(i).ok_or(EINVAL)?;
                bar.write(loc, regs::CMD_ARG::zeroed().with_value(value));
            }
            bar.write_reg(regs::CMD_OP::zeroed().with_op(op));
            let status = bar.read(regs::CMD_STATUS).status().get();
            let mut results = [0u32; regs::CMD_ARGS_NR];
            if status == STATUS_OK {
                for (i, r) in results.iter_mut().enumerate() {
                    let loc = regs::CMD_ARG::try_at(i).ok_or(EINVAL)?;
                    *r = bar.read(loc).value().get();
                }
            }
            Ok((status, results))
        })??;
        status_to_result(self, op, status)?;
        Ok(results)
    }
}
